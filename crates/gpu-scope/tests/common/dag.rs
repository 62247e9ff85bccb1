//! A seeded generator of random task DAGs, and the harness that runs them
//! and checks every value.
//!
//! Shared by `tests/stress.rs` (CI-sized, host backend),
//! `examples/90-stress.rs` (`cargo xtask stress`) and `examples/91-soak.rs`
//! (`cargo xtask soak`); the examples use the global runtime: the GPU when
//! there is one.
//!
//! The generator builds one top-level scope at a time: a tree of tasks
//! (spawns, nested scopes, joins, `par_chunks_mut`) over a fixed set of
//! buffers, each task holding some buffers to write (`&mut`, moved to it)
//! and some to read (`&`, shared by several tasks and written by none while
//! they are shared), exactly as the borrow rules allow. It simulates every
//! operation on a host model as it goes, so the expected value of every
//! element is known; the harness checks them after each top-level scope
//! (and in the middle, through `to_vec`, `host_sync_ptr` and `sum`). Values
//! are small integers held in `f32`, kept below [`LIMIT`] in magnitude, so
//! every result is exact on any device.
//!
//! Same seed, same programs: a failure names its seed and scope.

#![allow(dead_code)] // each user takes the part it needs

use gpu::{BackendKind, Buffer, DeviceSlice, Event, LaunchConfig, Result, Runtime, Scope};
use gpu_kernels as k;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest magnitude of a value: sums over 1024 elements stay below 2^24,
/// where `f32` holds every integer exactly.
pub(crate) const LIMIT: f32 = 4096.0;

/// SplitMix64: small, fast, reproducible everywhere.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A small integer in `lo..=hi`, as `f32`.
    fn int(&mut self, lo: i32, hi: i32) -> f32 {
        (lo + self.below((hi - lo + 1) as usize) as i32) as f32
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The seed: same seed, same programs.
    pub(crate) seed: u64,
    /// Stop after the top-level scope that brings the tasks run to this.
    pub(crate) tasks: usize,
    /// Elements per buffer.
    pub(crate) len: usize,
    /// Buffers the programs work on.
    pub(crate) buffers: usize,
    /// User events the programs record, wait for, synchronize and query.
    pub(crate) events: usize,
    /// How deep tasks nest.
    pub(crate) max_depth: usize,
    /// About how many tasks one top-level scope has.
    pub(crate) scope_tasks: usize,
}

impl Config {
    /// Defaults for `tasks` tasks from `seed`.
    pub(crate) fn new(seed: u64, tasks: usize) -> Self {
        Config {
            seed,
            tasks,
            len: 256,
            buffers: 12,
            events: 6,
            max_depth: 4,
            scope_tasks: 40,
        }
    }
}

/// One operation of a task. Buffers are named by their index in the
/// harness's buffer list; a chunk task names its view by its buffer's
/// index.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    /// `fill(b, v)`.
    Fill { b: usize, v: f32 },
    /// `add_scalar(b, v)`.
    Add { b: usize, v: f32 },
    /// `scale(b, a)`.
    Scale { b: usize, a: f32 },
    /// `axpy(a, &x, &mut y)`.
    Axpy { a: f32, x: usize, y: usize },
    /// `copy(&src, &mut dst)`: the kernel, or the runtime's device copy.
    Copy {
        src: usize,
        dst: usize,
        kernel: bool,
    },
    /// A temporary buffer filled with `v`, added into `b`, and dropped with
    /// its work still queued (X4).
    Temp { b: usize, v: f32 },
    /// `raw_ptr(b)`, then a hand-written launch through the pointer (R10).
    RawAdd { b: usize, v: f32 },
    /// `host_sync_ptr(b)`; on the host backend the memory is read through
    /// the pointer and compared (R11).
    HostSync { b: usize, expect: Vec<f32> },
    /// `to_vec(&b)` in the task, compared.
    Check { b: usize, expect: Vec<f32> },
    /// `sum(&b)` into a temporary, copied back and compared.
    Sum { b: usize, expect: f32 },
    /// `add_scalar(b, v)` captured into a graph, then the graph launched.
    Graph { b: usize, v: f32 },
    /// `record(event)`.
    Record(usize),
    /// `wait(event)`.
    Wait(usize),
    /// `event.synchronize()`.
    EventSync(usize),
    /// `event.query()`.
    EventQuery(usize),
    /// `synchronize()` of the task's stream.
    Sync,
    /// `spawn`: the child gets `writes` (moved to it) and `reads` (shared;
    /// read-only for everyone until the scope ends).
    Spawn {
        writes: Vec<usize>,
        reads: Vec<usize>,
        ops: Vec<Op>,
    },
    /// A nested scope on this task: it gets everything back afterwards.
    Scope(Vec<Op>),
    /// `join(a, b)`: `b` gets `b_writes` and `b_reads` (read-only for both
    /// during the join); `a` the rest.
    Join {
        b_writes: Vec<usize>,
        b_reads: Vec<usize>,
        a: Vec<Op>,
        b: Vec<Op>,
    },
    /// `par_chunks_mut(b, chunk)`: chunk task `i` runs `per_chunk[i]` on
    /// its view, and may read `reads`.
    Chunks {
        b: usize,
        chunk: usize,
        reads: Vec<usize>,
        per_chunk: Vec<Vec<Op>>,
    },
}

impl Op {
    /// The operation's name, for censuses.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Op::Fill { .. } => "fill",
            Op::Add { .. } => "add_scalar",
            Op::Scale { .. } => "scale",
            Op::Axpy { .. } => "axpy",
            Op::Copy { kernel: true, .. } => "copy kernel",
            Op::Copy { kernel: false, .. } => "device copy",
            Op::Temp { .. } => "temporary",
            Op::RawAdd { .. } => "raw_ptr launch",
            Op::HostSync { .. } => "host_sync_ptr",
            Op::Check { .. } => "to_vec in a task",
            Op::Sum { .. } => "sum",
            Op::Graph { .. } => "graph",
            Op::Record(_) => "record",
            Op::Wait(_) => "wait",
            Op::EventSync(_) => "event synchronize",
            Op::EventQuery(_) => "event query",
            Op::Sync => "stream synchronize",
            Op::Spawn { .. } => "spawn",
            Op::Scope(_) => "nested scope",
            Op::Join { .. } => "join",
            Op::Chunks { .. } => "par_chunks_mut",
        }
    }
}

/// Counts the operations of `ops` and everything below them, by kind.
pub(crate) fn census(ops: &[Op], into: &mut std::collections::BTreeMap<&'static str, usize>) {
    for op in ops {
        *into.entry(op.kind()).or_default() += 1;
        match op {
            Op::Spawn { ops, .. } | Op::Scope(ops) => census(ops, into),
            Op::Join { a, b, .. } => {
                census(a, into);
                census(b, into);
            }
            Op::Chunks { per_chunk, .. } => per_chunk.iter().for_each(|c| census(c, into)),
            _ => {}
        }
    }
}

/// The depth of the deepest task below `ops` (a top-level scope is 0).
pub(crate) fn depth(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Spawn { ops, .. } | Op::Scope(ops) => 1 + depth(ops),
            Op::Join { a, b, .. } => 1 + depth(a).max(depth(b)),
            Op::Chunks { per_chunk, .. } => {
                1 + per_chunk.iter().map(|c| depth(c)).max().unwrap_or(0)
            }
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// A buffer (or part of one) a task holds while the generator plans it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    id: usize,
    start: usize,
    len: usize,
    write: bool,
    whole: bool,
}

/// The generator and its host model of every buffer.
#[derive(Debug)]
pub(crate) struct Generator {
    rng: Rng,
    cfg: Config,
    model: Vec<Vec<f32>>,
    scopes: usize,
}

impl Generator {
    /// A generator for `cfg`; the buffers start as [`Generator::model`].
    pub(crate) fn new(cfg: &Config) -> Self {
        let model = (0..cfg.buffers)
            .map(|b| {
                (0..cfg.len)
                    .map(|i| ((b * 7 + i * 3) % 17) as f32 - 8.0)
                    .collect()
            })
            .collect();
        Generator {
            rng: Rng::new(cfg.seed),
            cfg: cfg.clone(),
            model,
            scopes: 0,
        }
    }

    /// Every buffer's expected contents after the scopes generated so far.
    pub(crate) fn model(&self) -> &[Vec<f32>] {
        &self.model
    }

    /// The generator's own random numbers (for the harness's choices
    /// between scopes, so that they too follow the seed).
    pub(crate) fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// The body of the next top-level scope, which holds every buffer.
    pub(crate) fn next_scope(&mut self) -> Vec<Op> {
        self.scopes += 1;
        let mut held: Vec<Slot> = (0..self.cfg.buffers)
            .map(|id| Slot {
                id,
                start: 0,
                len: self.cfg.len,
                write: true,
                whole: true,
            })
            .collect();
        let budget = self.cfg.scope_tasks / 2 + self.rng.below(self.cfg.scope_tasks + 1);
        self.body(&mut held, 0, budget)
    }

    fn values(&self, s: &Slot) -> &[f32] {
        &self.model[s.id][s.start..s.start + s.len]
    }

    fn values_mut(&mut self, s: &Slot) -> &mut [f32] {
        &mut self.model[s.id][s.start..s.start + s.len]
    }

    fn max_abs(&self, s: &Slot) -> f32 {
        self.values(s).iter().fold(0.0, |m, v| m.max(v.abs()))
    }

    /// A task body over `held`, with about `budget` tasks below it.
    fn body(&mut self, held: &mut Vec<Slot>, depth: usize, mut budget: usize) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut steps = 1 + self.rng.below(6);
        while steps > 0 || (budget > 0 && ops.len() < 64) {
            steps = steps.saturating_sub(1);
            let structural = budget > 0 && depth < self.cfg.max_depth && self.rng.chance(45);
            let op = if structural {
                self.structural(held, depth, &mut budget)
            } else {
                self.plain(held)
            };
            if let Some(op) = op {
                ops.push(op);
            }
            if !structural && budget > 0 && ops.len() >= 64 {
                break;
            }
        }
        ops
    }

    fn writable(held: &[Slot]) -> Vec<usize> {
        (0..held.len()).filter(|&i| held[i].write).collect()
    }

    fn sub_budget(&mut self, budget: &mut usize) -> usize {
        let b = self.rng.below(*budget / 2 + 1);
        *budget -= b;
        b
    }

    fn structural(&mut self, held: &mut Vec<Slot>, depth: usize, budget: &mut usize) -> Option<Op> {
        let w = Self::writable(held);
        match self.rng.below(10) {
            // spawn
            0..=4 => {
                *budget -= 1;
                let sub = self.sub_budget(budget);
                let mut child = Vec::new();
                let mut writes = Vec::new();
                let mut reads = Vec::new();
                for &i in w.iter().rev() {
                    if self.rng.chance(35) {
                        let s = held.remove(i);
                        writes.push(s.id);
                        child.push(s);
                    }
                }
                for s in held.iter_mut() {
                    if self.rng.chance(20) {
                        s.write = false;
                        reads.push(s.id);
                        child.push(*s);
                    }
                }
                let ops = self.body(&mut child, depth + 1, sub);
                Some(Op::Spawn { writes, reads, ops })
            }
            // nested scope
            5 | 6 => {
                let sub = self.sub_budget(budget);
                let mut inner = held.clone();
                Some(Op::Scope(self.body(&mut inner, depth + 1, sub)))
            }
            // join
            7 => {
                *budget -= 1;
                let (sa, sb) = (self.sub_budget(budget), self.sub_budget(budget));
                let mut a_held = held.clone();
                let mut b_held = Vec::new();
                let (mut b_writes, mut b_reads) = (Vec::new(), Vec::new());
                for i in (0..a_held.len()).rev() {
                    if a_held[i].write && self.rng.chance(40) {
                        let s = a_held.remove(i);
                        b_writes.push(s.id);
                        b_held.push(s);
                    }
                }
                for s in a_held.iter_mut() {
                    if self.rng.chance(25) {
                        s.write = false;
                        b_reads.push(s.id);
                        b_held.push(*s);
                    }
                }
                let a = self.body(&mut a_held, depth + 1, sa);
                let b = self.body(&mut b_held, depth + 1, sb);
                Some(Op::Join {
                    b_writes,
                    b_reads,
                    a,
                    b,
                })
            }
            // par_chunks_mut
            _ => {
                let whole: Vec<usize> = w.into_iter().filter(|&i| held[i].whole).collect();
                if whole.is_empty() {
                    return None;
                }
                let target = held[whole[self.rng.below(whole.len())]];
                let pieces = 1 + self.rng.below(8.min(target.len));
                let chunk = target.len.div_ceil(pieces);
                let count = target.len.div_ceil(chunk);
                *budget = budget.saturating_sub(count);
                let readers: Vec<Slot> = held
                    .iter()
                    .filter(|s| s.id != target.id && self.rng.chance(25))
                    .map(|s| Slot { write: false, ..*s })
                    .collect();
                let reads = readers.iter().map(|s| s.id).collect();
                let mut per_chunk = Vec::new();
                for c in 0..count {
                    let start = c * chunk;
                    let mut h = vec![Slot {
                        id: target.id,
                        start,
                        len: chunk.min(target.len - start),
                        write: true,
                        whole: false,
                    }];
                    h.extend(readers.iter().copied());
                    let sub = if *budget > 0 {
                        self.sub_budget(budget).min(4)
                    } else {
                        0
                    };
                    per_chunk.push(self.body(&mut h, depth + 1, sub));
                }
                Some(Op::Chunks {
                    b: target.id,
                    chunk,
                    reads,
                    per_chunk,
                })
            }
        }
    }

    /// An operation on buffers or events, applied to the model.
    fn plain(&mut self, held: &[Slot]) -> Option<Op> {
        let w = Self::writable(held);
        let roll = self.rng.below(100);
        if w.is_empty() || roll >= 88 {
            return self.sync_op();
        }
        let y = held[w[self.rng.below(w.len())]];
        Some(match roll {
            0..=14 => self.value_op(&y),
            15..=34 => {
                let xs: Vec<Slot> = held
                    .iter()
                    .filter(|s| s.id != y.id && s.len == y.len)
                    .copied()
                    .collect();
                if xs.is_empty() {
                    return Some(self.value_op(&y));
                }
                let x = xs[self.rng.below(xs.len())];
                if self.rng.chance(30) {
                    let v = self.values(&x).to_vec();
                    self.values_mut(&y).copy_from_slice(&v);
                    Op::Copy {
                        src: x.id,
                        dst: y.id,
                        kernel: self.rng.chance(50),
                    }
                } else {
                    let a: f32 = [-2.0, -1.0, 1.0, 2.0][self.rng.below(4)];
                    if self.max_abs(&y) + a.abs() * self.max_abs(&x) > LIMIT {
                        return Some(self.fill(&y));
                    }
                    let xv = self.values(&x).to_vec();
                    for (yi, xi) in self.values_mut(&y).iter_mut().zip(xv) {
                        *yi += a * xi;
                    }
                    Op::Axpy {
                        a,
                        x: x.id,
                        y: y.id,
                    }
                }
            }
            35..=44 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Temp { b: y.id, v }
            }
            45..=52 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::RawAdd { b: y.id, v }
            }
            53..=57 => Op::HostSync {
                b: y.id,
                expect: self.values(&y).to_vec(),
            },
            58..=62 => {
                let x = held[self.rng.below(held.len())];
                Op::Check {
                    b: x.id,
                    expect: self.values(&x).to_vec(),
                }
            }
            63..=66 => {
                let x = held[self.rng.below(held.len())];
                Op::Sum {
                    b: x.id,
                    expect: self.values(&x).iter().sum(),
                }
            }
            67..=71 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Graph { b: y.id, v }
            }
            _ => self.value_op(&y),
        })
    }

    fn sync_op(&mut self) -> Option<Op> {
        let e = self.cfg.events;
        if e == 0 {
            return Some(Op::Sync);
        }
        Some(match self.rng.below(10) {
            0..=3 => Op::Record(self.rng.below(e)),
            4..=6 => Op::Wait(self.rng.below(e)),
            7 => Op::EventSync(self.rng.below(e)),
            8 => Op::EventQuery(self.rng.below(e)),
            _ => Op::Sync,
        })
    }

    /// Adds `v` to the slot in the model, unless it would pass [`LIMIT`].
    fn add(&mut self, s: &Slot, v: f32) -> bool {
        if self.max_abs(s) + v.abs() > LIMIT {
            return false;
        }
        self.values_mut(s).iter_mut().for_each(|x| *x += v);
        true
    }

    fn fill(&mut self, s: &Slot) -> Op {
        let v = self.rng.int(-8, 8);
        self.values_mut(s).fill(v);
        Op::Fill { b: s.id, v }
    }

    fn value_op(&mut self, s: &Slot) -> Op {
        match self.rng.below(3) {
            0 => self.fill(s),
            1 => {
                let v = self.rng.int(-5, 5);
                if !self.add(s, v) {
                    return self.fill(s);
                }
                Op::Add { b: s.id, v }
            }
            _ => {
                let a: f32 = [-1.0, 2.0, -2.0, 3.0][self.rng.below(4)];
                if self.max_abs(s) * a.abs() > LIMIT {
                    return self.fill(s);
                }
                self.values_mut(s).iter_mut().for_each(|x| *x *= a);
                Op::Scale { b: s.id, a }
            }
        }
    }
}

// ----- running the programs ----------------------------------------------

type Dyn<'a> = dyn DeviceSlice<f32> + Send + Sync + 'a;

/// How a running task holds a buffer.
enum Ref<'a> {
    /// A whole buffer, to write (and split into chunks).
    Buf(&'a mut Buffer<f32>),
    /// A chunk's view, to write.
    View(&'a mut Dyn<'a>),
    /// Shared, to read.
    Read(&'a Dyn<'a>),
}

/// The buffers a running task holds, by index.
struct Held<'a>(Vec<(usize, Ref<'a>)>);

impl<'a> Held<'a> {
    /// The same buffers for a shorter while (a nested scope, a join).
    fn reborrow(&mut self) -> Held<'_> {
        Held(
            self.0
                .iter_mut()
                .map(|(id, r)| {
                    let r = match r {
                        Ref::Buf(b) => Ref::Buf(b),
                        Ref::View(v) => Ref::View(&mut **v),
                        Ref::Read(x) => Ref::Read(*x),
                    };
                    (*id, r)
                })
                .collect(),
        )
    }

    fn pos(&self, id: usize) -> usize {
        self.0
            .iter()
            .position(|(i, _)| *i == id)
            .unwrap_or_else(|| panic!("generator bug: buffer {id} is not held"))
    }

    /// Gives buffer `id` away (to a child).
    fn take(&mut self, id: usize) -> Ref<'a> {
        let p = self.pos(id);
        self.0.swap_remove(p).1
    }

    /// Makes buffer `id` read-only from now on and returns a shared
    /// reference to it.
    fn share(&mut self, id: usize) -> &'a Dyn<'a> {
        let r: &'a Dyn<'a> = match self.take(id) {
            Ref::Buf(b) => b,
            Ref::View(v) => v,
            Ref::Read(x) => x,
        };
        self.0.push((id, Ref::Read(r)));
        r
    }

    fn w(&mut self, id: usize) -> &mut Dyn<'a> {
        let p = self.pos(id);
        match &mut self.0[p].1 {
            Ref::Buf(b) => &mut **b,
            Ref::View(v) => &mut **v,
            Ref::Read(_) => panic!("generator bug: buffer {id} is read-only here"),
        }
    }

    fn r(&self, id: usize) -> &Dyn<'a> {
        read(&self.0[self.pos(id)].1)
    }

    fn pair(&mut self, x: usize, y: usize) -> (&Dyn<'a>, &mut Dyn<'a>) {
        let (ix, iy) = (self.pos(x), self.pos(y));
        assert_ne!(ix, iy, "generator bug: reading and writing one buffer");
        let (lo, hi) = self.0.split_at_mut(ix.max(iy));
        let (ex, ey) = if ix < iy {
            (&lo[ix], &mut hi[0])
        } else {
            (&hi[0], &mut lo[iy])
        };
        let y = match &mut ey.1 {
            Ref::Buf(b) => &mut **b as &mut Dyn<'a>,
            Ref::View(v) => &mut **v,
            Ref::Read(_) => panic!("generator bug: buffer {y} is read-only here"),
        };
        (read(&ex.1), y)
    }
}

fn read<'s, 'a>(r: &'s Ref<'a>) -> &'s Dyn<'a> {
    match r {
        Ref::Buf(b) => &**b,
        Ref::View(v) => &**v,
        Ref::Read(x) => *x,
    }
}

/// Counters the running tasks share.
#[derive(Debug, Default)]
struct Stats {
    tasks: AtomicUsize,
    ops: AtomicUsize,
    wrong: AtomicUsize,
    first_wrong: Mutex<Option<String>>,
}

impl Stats {
    fn compare(&self, what: &str, got: &[f32], want: &[f32]) {
        let bad =
            got.iter().zip(want).filter(|(g, w)| g != w).count() + got.len().abs_diff(want.len());
        if bad > 0 {
            self.wrong.fetch_add(bad, Relaxed);
            let mut f = self.first_wrong.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_none() {
                let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
                *f = Some(format!(
                    "{what}: {bad} wrong value(s); first at [{i}]: got {:?}, expected {:?}",
                    got.get(i),
                    want.get(i)
                ));
            }
        }
    }
}

/// What the running tasks share.
struct Env<'e> {
    events: &'e [Event],
    backend: BackendKind,
    stats: &'e Stats,
    scope: usize,
}

/// Runs one task body (`ops`) holding `held`, spawning into `s`'s scope.
fn run_body<'sc>(
    s: &Scope<'_, 'sc>,
    ops: &'sc [Op],
    held: &mut Held<'sc>,
    env: &'sc Env<'sc>,
) -> Result<()> {
    for op in ops {
        env.stats.ops.fetch_add(1, Relaxed);
        match op {
            Op::Fill { b, v } => k::fill(s, held.w(*b), *v)?,
            Op::Add { b, v } => k::add_scalar(s, held.w(*b), *v)?,
            Op::Scale { b, a } => k::scale(s, held.w(*b), *a)?,
            Op::Axpy { a, x, y } => {
                let (x, y) = held.pair(*x, *y);
                k::axpy(s, *a, x, y)?
            }
            Op::Copy { src, dst, kernel } => {
                let (x, y) = held.pair(*src, *dst);
                if *kernel {
                    k::copy(s, x, y)?
                } else {
                    s.copy(x, y)?
                }
            }
            Op::Temp { b, v } => {
                let y = held.w(*b);
                let mut tmp = s.alloc::<f32>(y.len())?;
                k::fill(s, &mut tmp, *v)?;
                k::axpy(s, 1.0, &tmp, y)?;
                drop(tmp);
            }
            Op::RawAdd { b, v } => {
                let y = held.w(*b);
                let n = y.len();
                let p = s.raw_ptr(y)?;
                let add = k::kernel_ref(k::names::ADD_SCALAR_F32).expect("add_scalar_f32");
                // SAFETY: the kernel touches only the buffers passed, within their
                // lengths (its length arguments are theirs), or the launch is refused
                // before anything is submitted.
                unsafe {
                    s.launch(add, LaunchConfig::for_elements(n, k::BLOCK))
                        .raw_ptr(p)
                        .arg(*v)
                        .arg(n)
                        .submit()
                }?;
            }
            Op::HostSync { b, expect } => {
                let y = held.w(*b);
                let n = y.len();
                let p = s.host_sync_ptr(y)?;
                if env.backend == BackendKind::Host {
                    // SAFETY: on the host backend a device pointer is host
                    // memory; `host_sync_ptr` returned after every write to
                    // the buffer finished, and this task holds it
                    // exclusively (`&mut`), so nothing writes it meanwhile.
                    let got = unsafe { std::slice::from_raw_parts(p as *const f32, n) };
                    env.stats.compare(
                        &format!("scope {}: host_sync_ptr of buffer {b}", env.scope),
                        got,
                        expect,
                    );
                }
            }
            Op::Check { b, expect } => {
                let got = s.to_vec(held.r(*b))?;
                env.stats.compare(
                    &format!("scope {}: to_vec of buffer {b} in a task", env.scope),
                    &got,
                    expect,
                );
            }
            Op::Sum { b, expect } => {
                let mut out = s.alloc::<f32>(1)?;
                k::sum(s, held.r(*b), &mut out)?;
                let got = s.to_vec(&out)?;
                env.stats.compare(
                    &format!("scope {}: sum of buffer {b}", env.scope),
                    &got,
                    &[*expect],
                );
            }
            Op::Graph { b, v } => {
                let y = held.w(*b);
                let g = s.capture(|c| k::add_scalar(c, &mut *y, *v))?;
                s.launch_graph(&g).write(y).submit()?;
            }
            Op::Record(e) => s.record(&env.events[*e])?,
            Op::Wait(e) => s.wait(&env.events[*e])?,
            Op::EventSync(e) => env.events[*e].synchronize()?,
            Op::EventQuery(e) => {
                env.events[*e].query()?;
            }
            Op::Sync => s.synchronize()?,
            Op::Spawn { writes, reads, ops } => {
                let mut child = Held(Vec::new());
                for &id in writes {
                    child.0.push((id, held.take(id)));
                }
                for &id in reads {
                    child.0.push((id, Ref::Read(held.share(id))));
                }
                s.spawn(move |t| {
                    env.stats.tasks.fetch_add(1, Relaxed);
                    run_body(t, ops, &mut child, env)
                });
            }
            Op::Scope(body) => s.scope(|inner| {
                let mut h = held.reborrow();
                run_body(inner, body, &mut h, env)
            })?,
            Op::Join {
                b_writes,
                b_reads,
                a,
                b,
            } => {
                let mut ha = held.reborrow();
                let mut hb = Held(Vec::new());
                for &id in b_writes {
                    hb.0.push((id, ha.take(id)));
                }
                for &id in b_reads {
                    hb.0.push((id, Ref::Read(ha.share(id))));
                }
                s.join(
                    |sa| {
                        sa.scope(|x| {
                            let mut h = ha.reborrow();
                            run_body(x, a, &mut h, env)
                        })
                    },
                    move |sb| {
                        env.stats.tasks.fetch_add(1, Relaxed);
                        sb.scope(|x| {
                            let mut h = hb.reborrow();
                            run_body(x, b, &mut h, env)
                        })
                    },
                )?;
            }
            Op::Chunks {
                b,
                chunk,
                reads,
                per_chunk,
            } => {
                let Ref::Buf(buf) = held.take(*b) else {
                    panic!("generator bug: chunks of a view or a shared buffer")
                };
                let r = {
                    let shared: Vec<(usize, &Dyn<'_>)> =
                        reads.iter().map(|&id| (id, held.r(id))).collect();
                    let shared = &shared;
                    s.par_chunks_mut(&mut *buf, *chunk, |t, view| {
                        env.stats.tasks.fetch_add(1, Relaxed);
                        let ops = &per_chunk[view.index()];
                        t.scope(|x| {
                            let mut h = Held(vec![(*b, Ref::View(view as &mut Dyn<'_>))]);
                            for &(id, r) in shared {
                                h.0.push((id, Ref::Read(r)));
                            }
                            run_body(x, ops, &mut h, env)
                        })
                    })
                };
                held.0.push((*b, Ref::Buf(buf)));
                r?
            }
        }
    }
    Ok(())
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub(crate) struct Report {
    /// Tasks run (scope bodies, spawns, joins' second halves, chunks).
    pub(crate) tasks: usize,
    /// Top-level scopes run.
    pub(crate) scopes: usize,
    /// Operations submitted.
    pub(crate) ops: usize,
    /// Values that differed from the model (must be 0).
    pub(crate) wrong: usize,
    /// The first wrong value, described.
    pub(crate) first_wrong: Option<String>,
    /// Races the host backend's detector found (must be 0).
    pub(crate) races: usize,
    /// The first race found.
    pub(crate) first_race: Option<String>,
    /// Hand-offs that waited on the device, and that synchronized the host.
    pub(crate) device_waits: u64,
    /// Hand-offs that synchronized the old stream on the host.
    pub(crate) host_syncs: u64,
    /// Stream switches whose wait the ledger's facts avoided.
    pub(crate) waits_avoided: u64,
    /// Wall time.
    pub(crate) elapsed: Duration,
}

impl Report {
    /// Whether every value was right and no race was found.
    pub(crate) fn ok(&self) -> bool {
        self.wrong == 0 && self.races == 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tasks run {}, scopes {}, ops {}, wrong values {}, races {}, \
             device waits {}, host syncs {}, waits avoided {}, elapsed {:.2?}",
            self.tasks,
            self.scopes,
            self.ops,
            self.wrong,
            self.races,
            self.device_waits,
            self.host_syncs,
            self.waits_avoided,
            self.elapsed
        )?;
        if let Some(w) = &self.first_wrong {
            write!(f, "\n  first wrong value: {w}")?;
        }
        if let Some(r) = &self.first_race {
            write!(f, "\n  first race: {r}")?;
        }
        Ok(())
    }
}

/// Runs top-level scopes from `cfg` on `rt` until `cfg.tasks` tasks ran,
/// checking every buffer against the model after each scope. Calls
/// `after_scope` after each with the report so far; it returns false to
/// stop early.
///
/// # Errors
///
/// The first error a scope returned (none is expected), with its seed and
/// scope number in the message printed by the caller.
pub(crate) fn run(
    rt: &Runtime,
    cfg: &Config,
    mut after_scope: impl FnMut(&Report) -> bool,
) -> std::result::Result<Report, String> {
    let start = Instant::now();
    let counters = rt.counters();
    let races_before = rt.races().len();
    let mut gen = Generator::new(cfg);
    let ctx = |what: &str, scope: usize, e: gpu::Error| {
        format!("seed {} scope {scope}: {what}: {e}", cfg.seed)
    };
    // Load the kernels now, not in a first launch inside a graph capture.
    rt.cu_function(k::GATE)
        .map_err(|e| ctx("loading the kernels", 0, e))?;
    let setup = rt.begin_task().map_err(|e| ctx("begin_task", 0, e))?;
    let mut bufs = gen
        .model()
        .iter()
        .map(|m| setup.from_host(m))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("allocating", 0, e))?;
    drop(setup);
    let events = (0..cfg.events)
        .map(|_| rt.event())
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("taking events", 0, e))?;
    let stats = Stats::default();
    let mut report = Report::default();
    while report.tasks < cfg.tasks {
        let scope = report.scopes + 1;
        let ops = gen.next_scope();
        let env = Env {
            events: &events,
            backend: rt.backend(),
            stats: &stats,
            scope,
        };
        let mut held = Held(
            bufs.iter_mut()
                .enumerate()
                .map(|(i, b)| (i, Ref::Buf(b)))
                .collect(),
        );
        stats.tasks.fetch_add(1, Relaxed);
        gpu::scope_on(rt, |s| {
            let mut h = held.reborrow();
            run_body(s, &ops, &mut h, &env)
        })
        .map_err(|e| ctx("the scope failed", scope, e))?;
        drop(held);
        // Now and then drop a buffer whose work may still be queued (X4)
        // and start it again from the model.
        if gen.rng().chance(20) {
            let i = gen.rng().below(bufs.len());
            let t = rt.begin_task().map_err(|e| ctx("begin_task", scope, e))?;
            bufs[i] = t
                .from_host(&gen.model()[i])
                .map_err(|e| ctx("reallocating", scope, e))?;
        }
        for (i, (b, want)) in bufs.iter().zip(gen.model()).enumerate() {
            let got = b.to_vec().map_err(|e| ctx("to_vec", scope, e))?;
            stats.compare(
                &format!("scope {scope}: buffer {i} after the scope"),
                &got,
                want,
            );
        }
        report.scopes = scope;
        report.tasks = stats.tasks.load(Relaxed);
        report.ops = stats.ops.load(Relaxed);
        report.wrong = stats.wrong.load(Relaxed);
        report.races = rt.races().len() - races_before;
        report.elapsed = start.elapsed();
        if !after_scope(&report) {
            break;
        }
    }
    drop(bufs);
    drop(events);
    let d = rt.counters().since(&counters);
    report.device_waits = d.device_waits;
    report.host_syncs = d.host_syncs;
    report.waits_avoided = d.switches_avoided();
    report.first_wrong = stats
        .first_wrong
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    report.first_race = rt.races().get(races_before).cloned();
    report.elapsed = start.elapsed();
    Ok(report)
}
