//! B13 (issue 16): a task graph of 10,000 small tasks over 256 buffers,
//! run through `gpu::scope` / `spawn`. `benches/torch_dag.py` runs the same
//! graph in PyTorch (one stream; 8 streams with events waited by hand; one
//! CUDA graph of it all, captured once and replayed).
//!
//! The graph, identical in both (both check [`fingerprint`]):
//!
//! - a SplitMix64 generator whose state starts at the seed ([`SEED`], 13):
//!   `state += 0x9e3779b97f4a7c15; z = state;
//!   z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
//!   z = (z ^ z >> 27) * 0x94d049bb133111eb; return z ^ z >> 31`
//!   (64-bit wrapping arithmetic);
//! - for each task `i` in order: its own buffer `own = next() % 256`, its
//!   number of reads `k = 1 + next() % 3`, then `next() % 256` drawn until
//!   `k` distinct buffers other than `own` are found (a draw equal to `own`
//!   or to an earlier read is dropped);
//! - task `i` spins about 10 us on one device thread, then adds each read
//!   buffer into its own, in the order drawn (`w += r`, 1024 `f32`, one
//!   kernel each).
//!
//! Its dependences are those of the program order: a task's adds come after
//! the last earlier writer of every buffer it reads, and after the last
//! earlier writer and every reader since of the buffer it writes. The spin
//! touches no buffer and depends on nothing, in all three versions.
//!
//! Every buffer starts as `x[e] = ((b + e) % 4 + 1) / 4` (buffer `b`,
//! element `e`); values grow to about 2^113 at most over the 10,000 tasks,
//! below `f32`'s limit (2^128), and each add rounds once on the device as on the
//! host, so a host model gives the expected values bit for bit.
//!
//! # Program order, through spawned tasks
//!
//! The runtime orders each buffer's uses in the order they are *submitted*,
//! and the order in which sibling tasks run is not specified. So each task
//! takes its turn at each buffer it touches (`Turns`): a writer once every
//! earlier use of its buffer was submitted, a reader once every earlier
//! write was (readers between two writes go in any order: they do not
//! depend on each other). A task submits its spin first, then waits for its
//! turns, then submits its adds and hands the turns on. The buffers sit
//! behind `RwLock`s so that tasks can share them; the turns already exclude
//! a writer from every other user, so the locks are never contended but by
//! readers, which share them. A task that fails still hands its turns on
//! (the order is lost then, but no task waits forever; the scope returns
//! the error).
//!
//! The turns block worker threads, yet cannot deadlock when [`run`] is
//! called from outside the pool (as here, from the bench's main thread):
//! the scope's thread then takes its jobs from the newest and the pool's
//! workers take theirs from the oldest, so the oldest unfinished task is
//! always running, and it waits for no one.

use gpu::{Buffer, Result};
use gpu_kernels as k;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// The generator's seed.
pub const SEED: u64 = 13;
/// Buffers in the graph.
pub const BUFFERS: usize = 256;
/// `f32` elements per buffer.
pub const LEN: usize = 1024;
/// Tasks in the graph on the GPU; the host backend runs [`HOST_TASKS`].
pub const TASKS: usize = 10_000;
/// Tasks in the host backend's smaller run of the same generator.
pub const HOST_TASKS: usize = 500;
/// Each task's spin. PyTorch's `torch.cuda._sleep` counts clock cycles;
/// `torch_dag.py` calibrates its count to this time (about 20,000 cycles at
/// 1.98 GHz); `B13/spin-alone` and `B13/torch-spin-alone` measure both.
pub const SPIN: Duration = Duration::from_micros(10);

/// [`fingerprint`] of the first [`TASKS`] and [`HOST_TASKS`] tasks from
/// [`SEED`], as `torch_dag.py` computes them too.
pub const FINGERPRINTS: [(usize, u64); 2] = [
    (TASKS, 0x5dfb_66a8_346c_d022),
    (HOST_TASKS, 0xc3cc_2f1b_cdef_6c5a),
];

/// SplitMix64, state starting at the seed (see the module's note).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// One task of the graph, with its turns.
#[derive(Clone, Debug)]
pub struct Task {
    /// The buffer it writes.
    pub own: usize,
    /// The buffers it reads (the first `k`), in the order they are added.
    reads: [usize; 3],
    k: usize,
    /// Uses of `own` (reads and writes) before this task's.
    own_turn: u32,
    /// Writes of each read buffer before this task.
    read_turns: [u32; 3],
}

impl Task {
    /// The buffers it reads, in the order they are added.
    pub fn reads(&self) -> &[usize] {
        &self.reads[..self.k]
    }
}

/// The first `tasks` tasks of the graph from `seed` over `buffers` buffers.
pub fn dag(seed: u64, tasks: usize, buffers: usize) -> Vec<Task> {
    assert!(buffers >= 4, "three reads distinct from the own buffer");
    let mut rng = SplitMix64(seed);
    let n = buffers as u64;
    let mut uses = vec![0u32; buffers];
    let mut writes = vec![0u32; buffers];
    (0..tasks)
        .map(|_| {
            let own = (rng.next() % n) as usize;
            let k = 1 + (rng.next() % 3) as usize;
            let mut reads = [0usize; 3];
            let mut got = 0;
            while got < k {
                let c = (rng.next() % n) as usize;
                if c != own && !reads[..got].contains(&c) {
                    reads[got] = c;
                    got += 1;
                }
            }
            let mut read_turns = [0u32; 3];
            for (t, &r) in read_turns.iter_mut().zip(&reads[..k]) {
                *t = writes[r];
                uses[r] += 1;
            }
            let own_turn = uses[own];
            uses[own] += 1;
            writes[own] += 1;
            Task {
                own,
                reads,
                k,
                own_turn,
                read_turns,
            }
        })
        .collect()
}

/// FNV-1a over 64-bit words of, for each task in order, `own`, `k` and its
/// reads.
pub fn fingerprint(tasks: &[Task]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for t in tasks {
        for x in [t.own, t.k].iter().chain(t.reads()) {
            h = (h ^ *x as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Buffer `b`'s starting values.
pub fn initial(b: usize) -> Vec<f32> {
    (0..LEN).map(|e| ((b + e) % 4 + 1) as f32 / 4.0).collect()
}

/// The values after `tasks`, computed on the host in program order.
pub fn model(tasks: &[Task]) -> Vec<Vec<f32>> {
    let mut v: Vec<Vec<f32>> = (0..BUFFERS).map(initial).collect();
    for t in tasks {
        let mut own = std::mem::take(&mut v[t.own]);
        for &r in t.reads() {
            own.iter_mut().zip(&v[r]).for_each(|(w, x)| *w += *x);
        }
        v[t.own] = own;
    }
    v
}

/// One buffer's turns: how many of its uses, and how many of its writes,
/// have been submitted.
#[derive(Default)]
struct Turns {
    uses: AtomicU32,
    writes: AtomicU32,
    /// Tasks asleep on `wake` (only then does a hand-on take the lock).
    sleepers: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Turns {
    /// Returns once `ready` holds: spins for a few microseconds (a turn is
    /// usually a submission away), then sleeps until a hand-on wakes it.
    fn wait(&self, ready: impl Fn(&Self) -> bool) {
        // Most turns have come already (always, run serially): no clock.
        if ready(self) {
            return;
        }
        let spin_until = Instant::now() + Duration::from_micros(20);
        while !ready(self) {
            if Instant::now() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            // `sleepers` rises before `ready` is read again under the lock,
            // and a hand-on reads `sleepers` after its count rose and
            // notifies under the lock: no wake-up is lost (the timeout is a
            // second guard).
            self.sleepers.fetch_add(1, SeqCst);
            let mut g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            while !ready(self) {
                g = self
                    .wake
                    .wait_timeout(g, Duration::from_millis(1))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            drop(g);
            self.sleepers.fetch_sub(1, SeqCst);
            return;
        }
    }

    /// Counts one submitted use (a write when `write`), waking sleepers.
    fn hand_on(&self, write: bool) {
        if write {
            self.writes.fetch_add(1, SeqCst);
        }
        self.uses.fetch_add(1, SeqCst);
        if self.sleepers.load(SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_all();
        }
    }
}

/// Hands a task's turns on when dropped, so that a task that failed or
/// panicked does not leave later tasks waiting forever.
struct HandOn<'a> {
    turns: &'a [Turns],
    task: &'a Task,
}

impl Drop for HandOn<'_> {
    fn drop(&mut self) {
        for &r in self.task.reads() {
            self.turns[r].hand_on(false);
        }
        self.turns[self.task.own].hand_on(true);
    }
}

/// The buffers a run starts from (each [`initial`]), to copy from.
///
/// # Errors
///
/// Allocation errors.
pub fn pristine() -> Result<Vec<Buffer<f32>>> {
    (0..BUFFERS)
        .map(|b| Buffer::from_host(&initial(b)))
        .collect()
}

/// The buffers the tasks work on (zeros: [`reset`] them first).
///
/// # Errors
///
/// Allocation errors.
pub fn buffers() -> Result<Vec<RwLock<Buffer<f32>>>> {
    (0..BUFFERS)
        .map(|_| Buffer::zeros(LEN).map(RwLock::new))
        .collect()
}

/// Copies `pristine` into `bufs` on `t` (queued: `t`'s later work sees it).
///
/// # Errors
///
/// Driver errors.
pub fn reset(
    t: &gpu::TaskContext,
    pristine: &[Buffer<f32>],
    bufs: &mut [RwLock<Buffer<f32>>],
) -> Result<()> {
    for (p, b) in pristine.iter().zip(bufs.iter_mut()) {
        t.copy(p, b.get_mut().unwrap_or_else(PoisonError::into_inner))?;
    }
    Ok(())
}

/// The first buffer whose values differ from `want` (the [`model`]'s).
///
/// # Errors
///
/// Driver errors.
pub fn first_difference(bufs: &[RwLock<Buffer<f32>>], want: &[Vec<f32>]) -> Result<Option<usize>> {
    for (b, (buf, want)) in bufs.iter().zip(want).enumerate() {
        if buf
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .to_vec()?
            != *want
        {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Runs `tasks` on `bufs` as one `gpu::scope`, a spawned task each, spawned
/// in program order; returns once every task returned (their GPU work may
/// still run: `gpu::synchronize` waits for it).
///
/// # Errors
///
/// The first error of a task.
pub fn run(bufs: &[RwLock<Buffer<f32>>], tasks: &[Task]) -> Result<()> {
    let turns: Vec<Turns> = (0..bufs.len()).map(|_| Turns::default()).collect();
    gpu::scope(|s| {
        spawn_all(s, bufs, tasks, &turns);
        Ok(())
    })
}

/// The same scope as [`run`] through a graphed scope (`gpu::Graphed`):
/// its first run builds the graph, later runs launch it again (the
/// buffers and tasks being the same). Returns once the graph is launched.
///
/// # Errors
///
/// The first error of a task; the graph's.
pub fn run_graphed(
    g: &mut gpu::Graphed,
    bufs: &[RwLock<Buffer<f32>>],
    tasks: &[Task],
) -> Result<()> {
    let turns: Vec<Turns> = (0..bufs.len()).map(|_| Turns::default()).collect();
    g.scope(|s| {
        spawn_all(s, bufs, tasks, &turns);
        Ok(())
    })
}

/// The same scope as [`run`], captured into one graph (`gpu::capture`):
/// nothing runs; [`launch`] replays it.
///
/// # Errors
///
/// The first error of a task.
pub fn capture(bufs: &[RwLock<Buffer<f32>>], tasks: &[Task]) -> Result<gpu::sync::Graph> {
    let turns: Vec<Turns> = (0..bufs.len()).map(|_| Turns::default()).collect();
    gpu::capture(|s| {
        spawn_all(s, bufs, tasks, &turns);
        Ok(())
    })
}

/// Launches a graph from [`capture`] on `t`: every buffer passed as
/// written.
///
/// # Errors
///
/// Driver errors.
pub fn launch(
    t: &gpu::TaskContext,
    g: &gpu::sync::Graph,
    bufs: &mut [RwLock<Buffer<f32>>],
) -> Result<()> {
    let mut l = t.launch_graph(g);
    for b in bufs.iter_mut() {
        l = l.write(b.get_mut().unwrap_or_else(PoisonError::into_inner));
    }
    l.submit()
}

/// Spawns a task of `s` for each of `tasks`, in program order.
fn spawn_all<'s>(
    s: &gpu::Scope<'_, 's>,
    bufs: &'s [RwLock<Buffer<f32>>],
    tasks: &'s [Task],
    turns: &'s [Turns],
) {
    for task in tasks {
        s.spawn(move |t| {
            // Before anything can fail: the turns go on whatever happens.
            let _hand_on = HandOn { turns, task };
            k::spin(t, SPIN)?;
            turns[task.own].wait(|b| b.uses.load(SeqCst) >= task.own_turn);
            for (&r, &w) in task.reads().iter().zip(&task.read_turns) {
                turns[r].wait(|b| b.writes.load(SeqCst) >= w);
            }
            let mut own = bufs[task.own]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for &r in task.reads() {
                let x = bufs[r].read().unwrap_or_else(PoisonError::into_inner);
                k::axpy(t, 1.0, &*x, &mut *own)?;
            }
            Ok(())
        });
    }
}

/// The host time of a graphed replay of B13 (issue 38, item 4): the
/// medians over some replays of the time `Graphed::scope` took, and of its
/// parts from `Graphed::stats` (see [`replay_host_parts`]).
#[derive(Clone, Copy, Debug)]
pub struct HostParts {
    /// The whole call, to its return (its graph launched, not run).
    pub total: Duration,
    /// The body: the tasks' host code and the recording of their
    /// operations.
    pub body: Duration,
    /// Comparing the recording with the cached graph, setting changed
    /// nodes in place.
    pub compare: Duration,
    /// The graph's launch.
    pub launch: Duration,
    /// The rest: beginning and ending the scope and its task.
    pub rest: Duration,
}

impl HostParts {
    /// One JSON row per part, per task of `tasks` (as `xtask bench` reads
    /// them): `B13/gpu-graphed-replay-host-per-task` (the total), then
    /// `.../body`, `.../compare`, `.../launch`, `.../rest`.
    pub fn rows(&self, tasks: usize) -> String {
        let per = |d: Duration| d.as_nanos() as f64 / tasks as f64;
        let name = "B13/gpu-graphed-replay-host-per-task";
        [
            (String::new(), self.total),
            ("/body".into(), self.body),
            ("/compare".into(), self.compare),
            ("/launch".into(), self.launch),
            ("/rest".into(), self.rest),
        ]
        .iter()
        .map(|(part, d)| {
            format!(
                "{{\"name\": \"{name}{part}\", \"value\": {:.1}, \"unit\": \"ns\"}}\n",
                per(*d)
            )
        })
        .collect()
    }
}

/// [`HostParts`] of `runs` replays (at least one) of `g`, a graphed
/// scope of `tasks` on `bufs` that was built already: each replay from
/// the starting values (`pristine`, copied on `t` outside the timing) and
/// waited for before the next.
///
/// # Errors
///
/// A replay's; driver errors.
pub fn replay_host_parts(
    g: &mut gpu::Graphed,
    t: &gpu::TaskContext,
    pristine: &[Buffer<f32>],
    bufs: &mut [RwLock<Buffer<f32>>],
    tasks: &[Task],
    runs: usize,
) -> Result<HostParts> {
    let mut parts: [Vec<Duration>; 5] = Default::default();
    for _ in 0..runs.max(1) {
        reset(t, pristine, bufs)?;
        t.synchronize()?;
        let t0 = Instant::now();
        run_graphed(g, bufs, tasks)?;
        let total = t0.elapsed();
        gpu::synchronize()?;
        let st = g.stats();
        let compare = st.last_graph.saturating_sub(st.last_launch);
        let rest = total.saturating_sub(st.last_body + st.last_graph);
        for (v, d) in parts
            .iter_mut()
            .zip([total, st.last_body, compare, st.last_launch, rest])
        {
            v.push(d);
        }
    }
    let [total, body, compare, launch, rest] = parts.map(|mut v| {
        v.sort();
        v[v.len() / 2]
    });
    Ok(HostParts {
        total,
        body,
        compare,
        launch,
        rest,
    })
}
