//! A seeded generator of random task DAGs, and the harness that runs them
//! and checks every value.
//!
//! Shared by `tests/stress.rs` (CI-sized, host backend),
//! the test kit's binaries `stress` (`cargo xtask stress`) and `soak`
//! (`cargo xtask soak`); the examples use the global runtime: the GPU when
//! there is one.
//!
//! The generator builds one top-level scope at a time: a tree of tasks
//! (spawns, nested scopes, joins, `par_chunks_mut`, splits) over a fixed set
//! of buffers and the temporaries tasks allocate, each task holding some
//! buffers to write (`&mut`, moved to it) and some to read (`&`, shared by
//! several tasks and written by none while they are shared), exactly as the
//! borrow rules allow. It simulates every operation on a host model as it
//! goes, so the expected value of every element is known; the harness
//! checks them after each top-level scope (and in the middle, through
//! `to_vec`, `host_sync_ptr` and `sum`). Values are small integers held in
//! `f32`, kept below [`LIMIT`] in magnitude, so every result is exact on any
//! device.
//!
//! Besides the borrow-checked structure, the programs do what the runtime
//! does behind it, so that its soundness rules are exercised at random:
//!
//! - pooled events: tasks take events of their own from the runtime's pool
//!   ([`Runtime::event`]), wait for, synchronize and query them before and
//!   after recording them, hand them to children and drop them at random
//!   times, so that they go back to the pool and are reused by the
//!   runtime's hand-offs (and the harness replaces shared events between
//!   scopes);
//! - splits ([`Buffer::split_chunks`]): views handed to tasks, then the
//!   split rejoined, dropped or leaked (`mem::forget`), and the parent used
//!   again at once, inside tasks and, between top-level scopes, by the
//!   harness (where nothing but the parent's stamps orders its next use
//!   after the views' work);
//! - frees: temporaries allocated inside tasks, handed to children (one
//!   writer, or readers on several streams) and dropped with their work
//!   queued; buffers dropped and reallocated between top-level scopes, some
//!   right after a split that was not rejoined;
//! - captures that end badly: a body that submits work and then returns an
//!   error, panics, tries a host copy, or tries to allocate (`alloc`,
//!   `zeros`, `from_host`, or a kernel that needs a temporary:
//!   `inclusive_scan`, `reduce::sum`), which must fail with
//!   `Error::Capturing`; the captured work never runs, and the task goes on
//!   on its stream. Besides `TaskContext::capture`, scope captures
//!   (`gpu::capture_on`) whose body, or a task spawned in it, allocates.
//!
//! With [`Config::devices`] above 1 (a runtime of several devices, the
//! host backend's `host_devices`), the buffers are spread over the devices
//! and the programs also place tasks (`spawn_on`, top-level scopes of
//! another device's runtime), copy between devices (`copy_peer`), copy
//! from `Staging` memory of one device into buffers of another (each
//! `copy_from_host` from page-locked memory must wait for its copy: the
//! host writes the staging memory right after), and, with
//! [`Config::comms`] communicators, run collectives (`all_reduce`,
//! `broadcast`, `send`/`recv` groups) from tasks on several threads. That
//! part is in [`multi`] (`dag_multi.rs`); with one device the programs are
//! as before.
//!
//! Same seed, same programs: a failure names its seed and scope.
//! [`run_watched`] runs [`run`] on a thread of its own and fails, naming
//! the seed and scope, when no top-level scope ends for a while (a hang).

#![allow(dead_code)] // each user takes the part it needs

pub mod multi;

use gpu::kernel::LaunchConfig;
use gpu::memory::DeviceSliceMut;
use gpu::raw::RawTask;
use gpu::sync::Event;
use gpu::{BackendKind, Buffer, Error, Result, Runtime, Scope, Split, TaskContext, ViewMut};
use gpu_kernels as k;
#[allow(unused_imports)] // each user takes the part it needs
pub use multi::run_watched;
use multi::{MultiEnv, MultiOp};
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Largest magnitude of a value: sums over 1024 elements stay below 2^24,
/// where `f32` holds every integer exactly.
pub const LIMIT: f32 = 4096.0;

/// Event slots of a task's own (taken from the pool by the task).
pub const LOCAL_EVENTS: usize = 3;

/// The first key of a split's view (buffers and temporaries are keyed by
/// their index in the model, below this).
const VIEW_KEYS: usize = 1 << 20;

/// SplitMix64: small, fast, reproducible everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A small integer in `lo..=hi`, as `f32`.
    fn int(&mut self, lo: i32, hi: i32) -> f32 {
        (lo + self.below((hi - lo + 1) as usize) as i32) as f32
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed: same seed, same programs.
    pub seed: u64,
    /// Stop after the top-level scope that brings the tasks run to this.
    pub tasks: usize,
    /// Elements per buffer.
    pub len: usize,
    /// Buffers the programs work on.
    pub buffers: usize,
    /// User events the programs record, wait for, synchronize and query.
    pub events: usize,
    /// How deep tasks nest.
    pub max_depth: usize,
    /// About how many tasks one top-level scope has.
    pub scope_tasks: usize,
    /// Devices the buffers and tasks are spread over (the runtime's group
    /// must have as many); 1: one device, none of [`multi`]'s operations.
    pub devices: usize,
    /// Communicators over all devices that tasks run collectives through
    /// (with `devices` above 1); 0: no collectives.
    pub comms: usize,
}

impl Config {
    /// Defaults for `tasks` tasks from `seed`.
    pub fn new(seed: u64, tasks: usize) -> Self {
        Config {
            seed,
            tasks,
            len: 256,
            buffers: 12,
            events: 6,
            max_depth: 4,
            scope_tasks: 40,
            devices: 1,
            comms: 0,
        }
    }
}

/// How a split ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitEnd {
    /// `rejoin(split)` once the views' tasks joined.
    Rejoin,
    /// `drop(split)`: the parent's uses become unknown.
    Drop,
    /// `mem::forget(split)`: the same, and a small `Vec` leaks.
    Forget,
}

/// What a task does with one of its own events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvAct {
    /// `rt.event()` into the slot (the event there, if any, is dropped and
    /// goes back to the pool).
    New,
    /// `record`.
    Record,
    /// `wait`; `fresh`: not recorded since it came from the pool.
    Wait { fresh: bool },
    /// `synchronize`.
    Sync { fresh: bool },
    /// `query`.
    Query { fresh: bool },
    /// `drop`: back to the pool.
    Drop,
}

/// How a temporary starts.
#[derive(Clone, Debug, PartialEq)]
pub enum TempInit {
    /// `alloc`, then `fill(v)`.
    Fill(f32),
    /// `zeros`.
    Zeros,
    /// `from_host(values)`.
    FromHost(Vec<f32>),
}

/// What a task does with its temporary after the temporary's scope, before
/// dropping it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TempAfter {
    /// `axpy(a, &tmp, &mut y)`.
    Axpy { a: f32, y: usize },
    /// `copy(&tmp, &mut y)` (the runtime's device copy).
    Copy { y: usize },
}

/// How a capture ends badly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureEnd {
    /// The body returns an error.
    Error,
    /// The body panics (caught around the `capture` call).
    Panic,
    /// The body tries `to_vec(&x)`: it must fail with `Error::Capturing`,
    /// which the body returns.
    ToVec(usize),
    /// The body tries `copy_to_host(&x, ..)`: likewise.
    CopyToHost(usize),
    /// The body tries `copy_from_host(&mut y, ..)`: likewise.
    CopyFromHost(usize),
    /// The body tries `alloc`: it must fail with `Error::Capturing` (an
    /// allocation in a capture would be the graph's, freed with it).
    Alloc,
    /// The body tries `zeros`: likewise.
    Zeros,
    /// The body tries `from_host`: likewise.
    FromHost,
    /// The body tries `inclusive_scan(&x, &mut y)`, which allocates its
    /// tiles' sums: likewise, and nothing of it queued.
    Scan { x: usize, y: usize },
    /// The body tries `reduce::sum(&x)`, which allocates its result (and,
    /// past one part, its partials): likewise.
    Reduce(usize),
}

impl CaptureEnd {
    /// Whether the ending is an allocation that must be refused.
    pub fn allocates(self) -> bool {
        matches!(
            self,
            CaptureEnd::Alloc
                | CaptureEnd::Zeros
                | CaptureEnd::FromHost
                | CaptureEnd::Scan { .. }
                | CaptureEnd::Reduce(_)
        )
    }
}

/// What captures a [`Op::BadCapture`]'s work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureHow {
    /// `TaskContext::capture` of the task's stream.
    Task,
    /// A scope capture (`gpu::capture_on` the task's runtime): its body
    /// submits the work and ends as the capture's end says.
    Scope,
    /// A scope capture whose body submits the work and spawns a task that
    /// ends as the capture's end says (an allocating ending only).
    ScopeTask,
}

/// One operation of a task. Buffers are named by their key in the task's
/// holdings: a buffer's index in the harness's buffer list, a temporary's
/// index in the model, a chunk task's view by its buffer's index, and a
/// split's view by a key of its own.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
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
    /// An event of the task's own, in slot `e` (< [`LOCAL_EVENTS`]).
    Ev { e: usize, act: EvAct },
    /// `spawn` (`spawn_on(d)` if `device` is `Some(d)`): the child gets
    /// `writes` (moved to it), `reads` (shared; read-only for everyone
    /// until the scope ends) and the task's own events in slots `events`
    /// (moved to it, same slots).
    Spawn {
        device: Option<usize>,
        writes: Vec<usize>,
        reads: Vec<usize>,
        events: Vec<usize>,
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
    /// `split_chunks(b, chunk)`; a nested scope runs `body` holding the
    /// views (keys `views`, in order) in place of `b`; then the split ends
    /// as `end` says, and the task holds `b` again. `used_after`: the
    /// task's next operation uses `b`.
    Split {
        b: usize,
        chunk: usize,
        views: Vec<usize>,
        body: Vec<Op>,
        end: SplitEnd,
        used_after: bool,
    },
    /// A temporary of `len` elements (key `key`), made as `init`; a nested
    /// scope runs `body` holding it too (it hands it to children); then
    /// `after`, and the temporary is dropped, its work maybe still queued.
    TempScope {
        key: usize,
        len: usize,
        init: TempInit,
        body: Vec<Op>,
        after: Option<TempAfter>,
    },
    /// A capture (`how`) whose body submits `ops` and then ends as `end`
    /// says: no graph, and none of `ops` ever runs. Then, if `check` says
    /// so, `to_vec` of that buffer, compared.
    BadCapture {
        how: CaptureHow,
        ops: Vec<Op>,
        end: CaptureEnd,
        check: Option<(usize, Vec<f32>)>,
    },
    /// An operation across devices ([`multi`]).
    Multi(MultiOp),
}

impl Op {
    /// The operation's name, for censuses.
    pub fn kind(&self) -> &'static str {
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
            Op::Ev { act, .. } => match act {
                EvAct::New => "own event taken",
                EvAct::Record => "own event record",
                EvAct::Wait { fresh: true } => "own event wait before a record",
                EvAct::Wait { fresh: false } => "own event wait",
                EvAct::Sync { fresh: true } => "own event synchronize before a record",
                EvAct::Sync { fresh: false } => "own event synchronize",
                EvAct::Query { fresh: true } => "own event query before a record",
                EvAct::Query { fresh: false } => "own event query",
                EvAct::Drop => "own event dropped",
            },
            Op::Spawn { device: None, .. } => "spawn",
            Op::Spawn {
                device: Some(_), ..
            } => "spawn_on",
            Op::Scope(_) => "nested scope",
            Op::Join { .. } => "join",
            Op::Chunks { .. } => "par_chunks_mut",
            Op::Split { end, .. } => match end {
                SplitEnd::Rejoin => "split rejoined",
                SplitEnd::Drop => "split dropped",
                SplitEnd::Forget => "split forgotten",
            },
            Op::TempScope { .. } => "temporary handed to tasks",
            Op::BadCapture {
                how: CaptureHow::Task,
                end,
                ..
            } => match end {
                CaptureEnd::Error => "capture returns an error",
                CaptureEnd::Panic => "capture panics",
                CaptureEnd::ToVec(_) => "to_vec in a capture",
                CaptureEnd::CopyToHost(_) => "copy_to_host in a capture",
                CaptureEnd::CopyFromHost(_) => "copy_from_host in a capture",
                CaptureEnd::Alloc => "alloc in a capture",
                CaptureEnd::Zeros => "zeros in a capture",
                CaptureEnd::FromHost => "from_host in a capture",
                CaptureEnd::Scan { .. } => "inclusive_scan in a capture",
                CaptureEnd::Reduce(_) => "reduce::sum in a capture",
            },
            Op::BadCapture {
                how: CaptureHow::Scope,
                end,
                ..
            } => match end {
                CaptureEnd::Error => "scope capture returns an error",
                _ => "allocation in a scope capture",
            },
            Op::BadCapture {
                how: CaptureHow::ScopeTask,
                ..
            } => "allocation in a task of a scope capture",
            Op::Multi(m) => m.kind(),
        }
    }
}

/// Counts the operations of `ops` and everything below them, by kind.
pub fn census(ops: &[Op], into: &mut BTreeMap<&'static str, usize>) {
    for op in ops {
        *into.entry(op.kind()).or_default() += 1;
        match op {
            Op::Spawn { ops, events, .. } => {
                if !events.is_empty() {
                    *into.entry("own events handed to a child").or_default() += events.len();
                }
                census(ops, into)
            }
            Op::Scope(ops) => census(ops, into),
            Op::Join { a, b, .. } => {
                census(a, into);
                census(b, into);
            }
            Op::Chunks { per_chunk, .. } => per_chunk.iter().for_each(|c| census(c, into)),
            Op::Split {
                body,
                end,
                used_after,
                ..
            } => {
                if *end != SplitEnd::Rejoin && *used_after {
                    *into
                        .entry("split not rejoined, parent used next")
                        .or_default() += 1;
                }
                census(body, into)
            }
            Op::TempScope { body, .. } => census(body, into),
            Op::BadCapture { ops, .. } => {
                *into.entry("operations captured and discarded").or_default() += ops.len()
            }
            _ => {}
        }
    }
}

/// The depth of the deepest task below `ops` (a top-level scope is 0).
pub fn depth(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Spawn { ops, .. } | Op::Scope(ops) => 1 + depth(ops),
            Op::Split { body, .. } | Op::TempScope { body, .. } => 1 + depth(body),
            Op::Join { a, b, .. } => 1 + depth(a).max(depth(b)),
            Op::Chunks { per_chunk, .. } => {
                1 + per_chunk.iter().map(|c| depth(c)).max().unwrap_or(0)
            }
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// A split the harness makes before a top-level scope and ends after it:
/// the scope holds the views (keys `views`) in place of buffer `b`. The
/// buffer is next used by the harness's check right after the split ends
/// (or, if `realloc`, dropped at once and made again from the model), with
/// no scope joining the views' tasks into the user: only the parent's
/// stamps order that use after the views' work.
#[derive(Clone, Debug, PartialEq)]
pub struct OuterSplit {
    pub b: usize,
    pub chunk: usize,
    pub views: Vec<usize>,
    pub end: SplitEnd,
    pub realloc: bool,
}

/// One top-level scope: the splits around it, the device whose runtime it
/// runs on, and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub splits: Vec<OuterSplit>,
    pub device: usize,
    pub ops: Vec<Op>,
}

impl Plan {
    /// Counts the scope's operations (see [`census`]) and its splits.
    pub fn census(&self, into: &mut BTreeMap<&'static str, usize>) {
        if self.device != 0 {
            *into
                .entry(multi::kinds::SCOPE_ON_ANOTHER_DEVICE)
                .or_default() += 1;
        }
        for s in &self.splits {
            let kind = match s.end {
                SplitEnd::Rejoin => "top-level split rejoined",
                SplitEnd::Drop => "top-level split dropped",
                SplitEnd::Forget => "top-level split forgotten",
            };
            *into.entry(kind).or_default() += 1;
            if s.realloc {
                *into
                    .entry("top-level split not rejoined, parent freed")
                    .or_default() += 1;
            }
        }
        census(&self.ops, into);
    }
}

/// A buffer (or part of one) a task holds while the generator plans it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// How the task names it (see [`Op`]).
    key: usize,
    /// Its model: `model[id][start..start + len]`.
    id: usize,
    start: usize,
    len: usize,
    write: bool,
    whole: bool,
    /// The device whose memory it is.
    dev: usize,
}

/// A task's own event slot, as the generator plans it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EvState {
    Empty,
    /// Taken from the pool, not recorded since.
    Fresh,
    Recorded,
}

type EvSlots = [EvState; LOCAL_EVENTS];

const NO_EVENTS: EvSlots = [EvState::Empty; LOCAL_EVENTS];

/// The generator and its host model of every buffer.
#[derive(Debug)]
pub struct Generator {
    rng: Rng,
    cfg: Config,
    /// The buffers (`0..cfg.buffers`), then this scope's temporaries.
    model: Vec<Vec<f32>>,
    scopes: usize,
    next_view: usize,
    /// The own events of the task bodies being planned, innermost last.
    ev: Vec<EvSlots>,
    /// The device of the task being planned.
    cur_dev: usize,
}

impl Generator {
    /// A generator for `cfg`; the buffers start as [`Generator::model`].
    pub fn new(cfg: &Config) -> Self {
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
            next_view: VIEW_KEYS,
            ev: Vec::new(),
            cur_dev: 0,
        }
    }

    /// Every buffer's expected contents after the scopes generated so far.
    pub fn model(&self) -> &[Vec<f32>] {
        &self.model[..self.cfg.buffers]
    }

    /// The generator's own random numbers (for the harness's choices
    /// between scopes, so that they too follow the seed).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// The next top-level scope: its body holds every buffer, or the views
    /// of the ones the harness splits around it.
    pub fn next_scope(&mut self) -> Plan {
        self.scopes += 1;
        self.model.truncate(self.cfg.buffers);
        let mut held: Vec<Slot> = (0..self.cfg.buffers)
            .map(|id| Slot {
                key: id,
                id,
                start: 0,
                len: self.cfg.len,
                write: true,
                whole: true,
                dev: id % self.cfg.devices.max(1),
            })
            .collect();
        // With several devices, some scopes run on another device's runtime.
        let device = if self.cfg.devices > 1 && self.rng.chance(35) {
            self.rng.below(self.cfg.devices)
        } else {
            0
        };
        self.cur_dev = device;
        let mut budget = self.cfg.scope_tasks / 2 + self.rng.below(self.cfg.scope_tasks + 1);
        let mut splits = Vec::new();
        let mut ops = Vec::new();
        if self.cfg.len >= 2 && self.rng.chance(30) {
            for _ in 0..1 + self.rng.below(2) {
                let i = self.rng.below(held.len());
                if !held[i].whole {
                    continue;
                }
                let target = held.remove(i);
                let chunk = target
                    .len
                    .div_ceil(2 + self.rng.below(5.min(target.len - 1)));
                let views = self.views(&target, chunk);
                held.extend(views.iter().copied());
                let end = self.split_end(40);
                splits.push(OuterSplit {
                    b: target.key,
                    chunk,
                    views: views.iter().map(|v| v.key).collect(),
                    end,
                    realloc: end != SplitEnd::Rejoin && self.rng.chance(30),
                });
            }
            // Most views go to tasks of their own at once.
            if self.cfg.max_depth > 1 {
                let keys: Vec<usize> = splits.iter().flat_map(|s| s.views.clone()).collect();
                for key in keys {
                    // (An earlier child may have taken it, or be reading it.)
                    if held.iter().any(|s| s.key == key && s.write) && self.rng.chance(60) {
                        ops.push(self.spawn(&mut held, 0, &mut budget, Some((key, true)), false));
                    }
                }
            }
        }
        ops.extend(self.body(&mut held, 0, budget, NO_EVENTS));
        Plan {
            splits,
            device,
            ops,
        }
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

    /// A task body over `held`, with about `budget` tasks below it, starting
    /// with its own events `ev`.
    fn body(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        mut budget: usize,
        ev: EvSlots,
    ) -> Vec<Op> {
        self.ev.push(ev);
        let mut ops = Vec::new();
        let mut steps = 1 + self.rng.below(6);
        while steps > 0 || (budget > 0 && ops.len() < 64) {
            steps = steps.saturating_sub(1);
            let structural = budget > 0 && depth < self.cfg.max_depth && self.rng.chance(45);
            if structural {
                self.structural(held, depth, &mut budget, &mut ops);
            } else if let Some(op) = self.plain(held) {
                ops.push(op);
            }
            if !structural && budget > 0 && ops.len() >= 64 {
                break;
            }
        }
        self.ev.pop();
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

    /// The views of `target` split in chunks of `chunk`, with new keys.
    fn views(&mut self, target: &Slot, chunk: usize) -> Vec<Slot> {
        (0..target.len.div_ceil(chunk))
            .map(|c| {
                self.next_view += 1;
                Slot {
                    key: self.next_view,
                    id: target.id,
                    start: target.start + c * chunk,
                    len: chunk.min(target.len - c * chunk),
                    write: true,
                    whole: false,
                    dev: target.dev,
                }
            })
            .collect()
    }

    /// How a split ends: rejoined `rejoin` times in a hundred, else mostly
    /// dropped, now and then leaked.
    fn split_end(&mut self, rejoin: usize) -> SplitEnd {
        let r = self.rng.below(100);
        if r < rejoin {
            SplitEnd::Rejoin
        } else if r < 88 {
            SplitEnd::Drop
        } else {
            SplitEnd::Forget
        }
    }

    /// A spawn from a task holding `held` at `depth`. `must`: a slot the
    /// child must get (its key, and whether to write it); the child's first
    /// operation then uses it. `events`: whether the child may get some of
    /// the task's own events.
    fn spawn(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        budget: &mut usize,
        must: Option<(usize, bool)>,
        events: bool,
    ) -> Op {
        *budget = budget.saturating_sub(1);
        let sub = self.sub_budget(budget);
        // The child's device: the one of the slot it must use, or now and
        // then another (`spawn_on`), with several devices.
        let parent_dev = self.cur_dev;
        let device = if self.cfg.devices <= 1 {
            None
        } else if let Some((key, _)) = must {
            let d = held
                .iter()
                .find(|s| s.key == key)
                .expect("the slot it must get")
                .dev;
            (d != parent_dev || self.rng.chance(20)).then_some(d)
        } else if self.rng.chance(30) {
            Some(self.rng.below(self.cfg.devices))
        } else {
            None
        };
        let child_dev = device.unwrap_or(parent_dev);
        // A task's own events are of its device: recorded only there.
        let events = events && child_dev == parent_dev;
        let mut child = Vec::new();
        let mut writes = Vec::new();
        let mut reads = Vec::new();
        for i in (0..held.len()).rev() {
            let key = held[i].key;
            if !held[i].write || must == Some((key, false)) {
                continue;
            }
            if must == Some((key, true)) || self.rng.chance(35) {
                let s = held.remove(i);
                writes.push(s.key);
                child.push(s);
            }
        }
        for s in held.iter_mut() {
            let forced = must == Some((s.key, false));
            if forced || self.rng.chance(20) {
                s.write = false;
                reads.push(s.key);
                child.push(*s);
            }
        }
        let mut ev = NO_EVENTS;
        let mut moved = Vec::new();
        if events {
            let mut mine = *self.ev.last().expect("inside a body");
            for (e, m) in mine.iter_mut().enumerate() {
                if *m != EvState::Empty && self.rng.chance(30) {
                    ev[e] = *m;
                    *m = EvState::Empty;
                    moved.push(e);
                }
            }
            *self.ev.last_mut().expect("inside a body") = mine;
        }
        let mut ops = Vec::new();
        self.cur_dev = child_dev;
        if let Some((key, write)) = must {
            let s = *child
                .iter()
                .find(|s| s.key == key)
                .expect("the slot it must get");
            ops.push(self.touch(&child, &s, write));
        }
        ops.extend(self.body(&mut child, depth + 1, sub, ev));
        self.cur_dev = parent_dev;
        Op::Spawn {
            device,
            writes,
            reads,
            events: moved,
            ops,
        }
    }

    /// An operation that writes `s` (if `write`) or reads it.
    fn touch(&mut self, held: &[Slot], s: &Slot, write: bool) -> Op {
        if write {
            return self.value_op(s);
        }
        let ys: Vec<Slot> = held
            .iter()
            .filter(|y| y.write && y.key != s.key && y.len == s.len && y.dev == s.dev)
            .copied()
            .collect();
        match self.rng.below(3) {
            0 if !ys.is_empty() => {
                let y = ys[self.rng.below(ys.len())];
                let v = self.values(s).to_vec();
                self.values_mut(&y).copy_from_slice(&v);
                Op::Copy {
                    src: s.key,
                    dst: y.key,
                    kernel: self.rng.chance(50),
                }
            }
            1 => Op::Sum {
                b: s.key,
                expect: self.values(s).iter().sum(),
            },
            _ => Op::Check {
                b: s.key,
                expect: self.values(s).to_vec(),
            },
        }
    }

    /// An operation that uses `s` on the task that holds it: written, or
    /// read and checked.
    fn use_now(&mut self, held: &[Slot], s: &Slot) -> Op {
        let write = self.rng.chance(50);
        self.touch(held, s, write)
    }

    fn structural(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        budget: &mut usize,
        out: &mut Vec<Op>,
    ) {
        match self.rng.below(40) {
            0..=20 => out.push(self.spawn(held, depth, budget, None, true)),
            // nested scope
            21..=26 => {
                let sub = self.sub_budget(budget);
                let mut inner = held.clone();
                out.push(Op::Scope(self.body(&mut inner, depth + 1, sub, NO_EVENTS)));
            }
            // join
            27..=30 => {
                *budget -= 1;
                let (sa, sb) = (self.sub_budget(budget), self.sub_budget(budget));
                let mut a_held = held.clone();
                let mut b_held = Vec::new();
                let (mut b_writes, mut b_reads) = (Vec::new(), Vec::new());
                for i in (0..a_held.len()).rev() {
                    if a_held[i].write && self.rng.chance(40) {
                        let s = a_held.remove(i);
                        b_writes.push(s.key);
                        b_held.push(s);
                    }
                }
                for s in a_held.iter_mut() {
                    if self.rng.chance(25) {
                        s.write = false;
                        b_reads.push(s.key);
                        b_held.push(*s);
                    }
                }
                let a = self.body(&mut a_held, depth + 1, sa, NO_EVENTS);
                let b = self.body(&mut b_held, depth + 1, sb, NO_EVENTS);
                out.push(Op::Join {
                    b_writes,
                    b_reads,
                    a,
                    b,
                });
            }
            // par_chunks_mut
            31..=34 => {
                if let Some(op) = self.chunks(held, depth, budget) {
                    out.push(op);
                }
            }
            35..=36 => self.split(held, depth, budget, out),
            _ => out.push(self.temp_scope(held, depth, budget)),
        }
    }

    fn chunks(&mut self, held: &mut [Slot], depth: usize, budget: &mut usize) -> Option<Op> {
        let whole: Vec<usize> = Self::writable(held)
            .into_iter()
            .filter(|&i| held[i].whole && held[i].dev == self.cur_dev)
            .collect();
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
            .filter(|s| s.key != target.key && self.rng.chance(25))
            .map(|s| Slot { write: false, ..*s })
            .collect();
        let reads = readers.iter().map(|s| s.key).collect();
        let mut per_chunk = Vec::new();
        for c in 0..count {
            let start = c * chunk;
            let mut h = vec![Slot {
                key: target.key,
                id: target.id,
                start: target.start + start,
                len: chunk.min(target.len - start),
                write: true,
                whole: false,
                dev: target.dev,
            }];
            h.extend(readers.iter().copied());
            let sub = if *budget > 0 {
                self.sub_budget(budget).min(4)
            } else {
                0
            };
            per_chunk.push(self.body(&mut h, depth + 1, sub, NO_EVENTS));
        }
        Some(Op::Chunks {
            b: target.key,
            chunk,
            reads,
            per_chunk,
        })
    }

    /// A split of a whole buffer the task holds: most views to tasks of
    /// their own, the rest to the task itself, in a nested scope; then the
    /// split ends, and the parent is used again at once (mostly).
    fn split(&mut self, held: &mut Vec<Slot>, depth: usize, budget: &mut usize, out: &mut Vec<Op>) {
        let whole: Vec<usize> = Self::writable(held)
            .into_iter()
            .filter(|&i| held[i].whole && held[i].dev == self.cur_dev)
            .collect();
        if whole.is_empty() {
            return;
        }
        let i = whole[self.rng.below(whole.len())];
        let target = held.remove(i);
        let chunk = target.len.div_ceil(1 + self.rng.below(6.min(target.len)));
        let views = self.views(&target, chunk);
        *budget = budget.saturating_sub(1);
        let mut sub = self.sub_budget(budget);
        let mut inner = held.clone();
        inner.extend(views.iter().copied());
        let mut body = Vec::new();
        if depth + 1 < self.cfg.max_depth {
            for v in &views {
                // (An earlier child may have taken it.)
                if inner.iter().any(|s| s.key == v.key && s.write) && self.rng.chance(70) {
                    body.push(self.spawn(
                        &mut inner,
                        depth + 1,
                        &mut sub,
                        Some((v.key, true)),
                        false,
                    ));
                }
            }
        }
        body.extend(self.body(&mut inner, depth + 1, sub, NO_EVENTS));
        // Inside a task the scope's join orders the parent's next use after
        // the views' work whatever the stamps say; an abandoned split costs
        // a wait for every stream: rejoin more of these.
        let end = self.split_end(55);
        let used_after = self.rng.chance(80);
        held.push(target);
        out.push(Op::Split {
            b: target.key,
            chunk,
            views: views.iter().map(|v| v.key).collect(),
            body,
            end,
            used_after,
        });
        if used_after {
            let op = self.use_now(held, &target);
            out.push(op);
        }
    }

    /// A temporary handed to tasks: one writer, or a few readers on streams
    /// of their own, then the task's own work; after the scope, maybe read
    /// into a buffer of the task's; then dropped.
    fn temp_scope(&mut self, held: &mut [Slot], depth: usize, budget: &mut usize) -> Op {
        *budget = budget.saturating_sub(1);
        let mut sub = self.sub_budget(budget);
        let len = if !held.is_empty() && self.rng.chance(50) {
            held[self.rng.below(held.len())].len
        } else {
            self.cfg.len
        };
        let key = self.model.len();
        let init = match self.rng.below(3) {
            0 => {
                let v = self.rng.int(-8, 8);
                self.model.push(vec![v; len]);
                TempInit::Fill(v)
            }
            1 => {
                self.model.push(vec![0.0; len]);
                TempInit::Zeros
            }
            _ => {
                let v: Vec<f32> = (0..len)
                    .map(|i| ((i * 5 + key) % 13) as f32 - 6.0)
                    .collect();
                self.model.push(v.clone());
                TempInit::FromHost(v)
            }
        };
        let tmp = Slot {
            key,
            id: key,
            start: 0,
            len,
            write: true,
            whole: true,
            dev: self.cur_dev,
        };
        let mut inner = held.to_vec();
        inner.push(tmp);
        let mut body = Vec::new();
        if depth + 1 < self.cfg.max_depth {
            if self.rng.chance(40) {
                body.push(self.spawn(&mut inner, depth + 1, &mut sub, Some((key, true)), false));
            } else {
                if self.rng.chance(50) {
                    // Written on this task's stream before the readers.
                    body.push(self.value_op(&tmp));
                }
                for _ in 0..1 + self.rng.below(3) {
                    body.push(self.spawn(
                        &mut inner,
                        depth + 1,
                        &mut sub,
                        Some((key, false)),
                        false,
                    ));
                }
            }
        }
        body.extend(self.body(&mut inner, depth + 1, sub, NO_EVENTS));
        let ys: Vec<Slot> = held
            .iter()
            .filter(|s| s.write && s.len == len && s.dev == self.cur_dev)
            .copied()
            .collect();
        let after = if !ys.is_empty() && self.rng.chance(70) {
            let y = ys[self.rng.below(ys.len())];
            let a: f32 = [-1.0, 1.0, 2.0][self.rng.below(3)];
            if self.rng.chance(30) || self.max_abs(&y) + a.abs() * self.max_abs(&tmp) > LIMIT {
                let v = self.values(&tmp).to_vec();
                self.values_mut(&y).copy_from_slice(&v);
                Some(TempAfter::Copy { y: y.key })
            } else {
                let xv = self.values(&tmp).to_vec();
                for (yi, xi) in self.values_mut(&y).iter_mut().zip(xv) {
                    *yi += a * xi;
                }
                Some(TempAfter::Axpy { a, y: y.key })
            }
        } else {
            None
        };
        Op::TempScope {
            key,
            len,
            init,
            body,
            after,
        }
    }

    /// A capture that submits a few operations on `held` and ends badly;
    /// the model is left as it was.
    fn bad_capture(&mut self, held: &[Slot], y: &Slot) -> Op {
        let saved: Vec<Vec<f32>> = held.iter().map(|s| self.values(s).to_vec()).collect();
        let w = Self::writable(held);
        let mut ops = Vec::new();
        for _ in 0..1 + self.rng.below(3) {
            let z = held[w[self.rng.below(w.len())]];
            let xs: Vec<Slot> = held
                .iter()
                .filter(|s| s.key != z.key && s.len == z.len)
                .copied()
                .collect();
            if xs.is_empty() || self.rng.chance(60) {
                ops.push(self.value_op(&z));
            } else {
                let x = xs[self.rng.below(xs.len())];
                ops.push(if self.rng.chance(50) {
                    Op::Copy {
                        src: x.key,
                        dst: z.key,
                        kernel: self.rng.chance(50),
                    }
                } else {
                    Op::Axpy {
                        a: 1.0,
                        x: x.key,
                        y: z.key,
                    }
                });
            }
        }
        for (s, v) in held.iter().zip(saved) {
            self.values_mut(s).copy_from_slice(&v);
        }
        let any = held[self.rng.below(held.len())].key;
        let how = match self.rng.below(10) {
            0..=6 => CaptureHow::Task,
            7 | 8 => CaptureHow::Scope,
            _ => CaptureHow::ScopeTask,
        };
        let roll = match how {
            CaptureHow::Task => self.rng.below(16),
            CaptureHow::Scope => [0, 9, 10, 11, 12, 14][self.rng.below(6)],
            CaptureHow::ScopeTask => 9 + self.rng.below(3),
        };
        let end = match roll {
            0..=3 => CaptureEnd::Error,
            4 | 5 => CaptureEnd::Panic,
            6 => CaptureEnd::ToVec(any),
            7 => CaptureEnd::CopyToHost(any),
            8 => CaptureEnd::CopyFromHost(y.key),
            9 => CaptureEnd::Alloc,
            10 => CaptureEnd::Zeros,
            11 => CaptureEnd::FromHost,
            12 | 13 => {
                let xs: Vec<usize> = held
                    .iter()
                    .filter(|s| s.key != y.key && s.len == y.len)
                    .map(|s| s.key)
                    .collect();
                if xs.is_empty() {
                    CaptureEnd::Alloc
                } else {
                    CaptureEnd::Scan {
                        x: xs[self.rng.below(xs.len())],
                        y: y.key,
                    }
                }
            }
            _ => CaptureEnd::Reduce(any),
        };
        let check = if self.rng.chance(30) {
            let s = held[self.rng.below(held.len())];
            Some((s.key, self.values(&s).to_vec()))
        } else {
            None
        };
        Op::BadCapture {
            how,
            ops,
            end,
            check,
        }
    }

    /// An operation on buffers or events, applied to the model: on the
    /// buffers of the task's device, or, with several devices, now and then
    /// one across devices ([`multi`]).
    fn plain(&mut self, held: &[Slot]) -> Option<Op> {
        if self.cfg.devices > 1 {
            if self.rng.chance(if self.cfg.comms > 0 { 20 } else { 12 }) {
                if let Some(op) = self.multi_op(held) {
                    return Some(Op::Multi(op));
                }
            }
            let here: Vec<Slot> = held
                .iter()
                .filter(|s| s.dev == self.cur_dev)
                .copied()
                .collect();
            return self.plain_here(&here);
        }
        self.plain_here(held)
    }

    /// [`Generator::plain`] over `held`, all of the task's device.
    fn plain_here(&mut self, held: &[Slot]) -> Option<Op> {
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
                    .filter(|s| s.key != y.key && s.len == y.len)
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
                        src: x.key,
                        dst: y.key,
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
                        x: x.key,
                        y: y.key,
                    }
                }
            }
            35..=44 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Temp { b: y.key, v }
            }
            45..=52 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::RawAdd { b: y.key, v }
            }
            53..=57 => Op::HostSync {
                b: y.key,
                expect: self.values(&y).to_vec(),
            },
            58..=62 => {
                let x = held[self.rng.below(held.len())];
                Op::Check {
                    b: x.key,
                    expect: self.values(&x).to_vec(),
                }
            }
            63..=66 => {
                let x = held[self.rng.below(held.len())];
                Op::Sum {
                    b: x.key,
                    expect: self.values(&x).iter().sum(),
                }
            }
            67..=71 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Graph { b: y.key, v }
            }
            72 | 73 => self.bad_capture(held, &y),
            _ => self.value_op(&y),
        })
    }

    fn sync_op(&mut self) -> Option<Op> {
        if !self.ev.is_empty() && self.rng.chance(45) {
            return Some(self.own_event_op());
        }
        let e = self.cfg.events;
        if e == 0 {
            return Some(Op::Sync);
        }
        Some(match self.rng.below(10) {
            // The shared events are device 0's: recorded only there.
            0..=3 if self.cur_dev != 0 => Op::Wait(self.rng.below(e)),
            0..=3 => Op::Record(self.rng.below(e)),
            4..=6 => Op::Wait(self.rng.below(e)),
            7 => Op::EventSync(self.rng.below(e)),
            8 => Op::EventQuery(self.rng.below(e)),
            _ => Op::Sync,
        })
    }

    /// An operation on one of the task's own events.
    fn own_event_op(&mut self) -> Op {
        let mine = *self.ev.last().expect("inside a body");
        // Mostly an event the task has, if it has one.
        let live: Vec<usize> = (0..LOCAL_EVENTS)
            .filter(|&e| mine[e] != EvState::Empty)
            .collect();
        let e = if !live.is_empty() && self.rng.chance(75) {
            live[self.rng.below(live.len())]
        } else {
            self.rng.below(LOCAL_EVENTS)
        };
        let st = mine[e];
        let fresh = st == EvState::Fresh;
        let (act, next) = match st {
            EvState::Empty => (EvAct::New, EvState::Fresh),
            // A fresh event is recorded sooner.
            _ => match self.rng.below(100) + if fresh { 0 } else { 15 } {
                0..=34 => (EvAct::Record, EvState::Recorded),
                35..=59 => (EvAct::Wait { fresh }, st),
                60..=74 => (EvAct::Sync { fresh }, st),
                75..=89 => (EvAct::Query { fresh }, st),
                90..=104 => (EvAct::Drop, EvState::Empty),
                _ => (EvAct::New, EvState::Fresh),
            },
        };
        self.ev.last_mut().expect("inside a body")[e] = next;
        Op::Ev { e, act }
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
        Op::Fill { b: s.key, v }
    }

    fn value_op(&mut self, s: &Slot) -> Op {
        match self.rng.below(3) {
            0 => self.fill(s),
            1 => {
                let v = self.rng.int(-5, 5);
                if !self.add(s, v) {
                    return self.fill(s);
                }
                Op::Add { b: s.key, v }
            }
            _ => {
                let a: f32 = [-1.0, 2.0, -2.0, 3.0][self.rng.below(4)];
                if self.max_abs(s) * a.abs() > LIMIT {
                    return self.fill(s);
                }
                self.values_mut(s).iter_mut().for_each(|x| *x *= a);
                Op::Scale { b: s.key, a }
            }
        }
    }
}

// ----- running the programs ----------------------------------------------

type Dyn<'a> = dyn DeviceSliceMut<f32> + Send + Sync + 'a;

/// How a running task holds a buffer.
enum Ref<'a> {
    /// A whole buffer, to write (and split into chunks).
    Buf(&'a mut Buffer<f32>),
    /// A chunk's view, to write.
    View(&'a mut Dyn<'a>),
    /// Shared, to read.
    Read(&'a Dyn<'a>),
}

/// The buffers a running task holds, by key.
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
            .unwrap_or_else(|| {
                panic!(
                    "generator bug: buffer {id} is not held: {:?}",
                    self.0.iter().map(|x| x.0).collect::<Vec<_>>()
                )
            })
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

/// A task's own events, by slot.
type Locals = [Option<Event>; LOCAL_EVENTS];

fn own(locals: &Locals, e: usize) -> &Event {
    locals[e]
        .as_ref()
        .unwrap_or_else(|| panic!("generator bug: no event in slot {e}"))
}

/// Counters the running tasks share.
#[derive(Debug, Default)]
struct Stats {
    tasks: AtomicUsize,
    ops: AtomicUsize,
    wrong: AtomicUsize,
    first_wrong: Mutex<Option<String>>,
    /// Captures refused because the task's stream was shared (§9: the
    /// pool ran out).
    shared_captures: AtomicUsize,
}

impl Stats {
    fn compare(&self, what: &str, got: &[f32], want: &[f32]) {
        let bad =
            got.iter().zip(want).filter(|(g, w)| g != w).count() + got.len().abs_diff(want.len());
        if bad > 0 {
            self.wrong.fetch_add(bad, Relaxed);
            let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
            self.note(format!(
                "{what}: {bad} wrong value(s); first at [{i}]: got {:?}, expected {:?}",
                got.get(i),
                want.get(i)
            ));
        }
    }

    /// Counts one wrong outcome (an operation that must fail succeeded, or
    /// failed otherwise).
    fn fail(&self, what: String) {
        self.wrong.fetch_add(1, Relaxed);
        self.note(what);
    }

    fn note(&self, what: String) {
        let mut f = self.first_wrong.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(what);
        }
    }
}

/// What the running tasks share.
struct Env<'e> {
    events: &'e [Event],
    backend: BackendKind,
    stats: &'e Stats,
    scope: usize,
    /// The devices' runtimes, staging memory and communicators, with
    /// several devices.
    multi: Option<&'e MultiEnv>,
}

/// Whether `e` is the refusal of a capture on a stream that another live
/// task shares (§9: more tasks than streams), a typed error the programs
/// expect on a small stream pool.
fn shared_stream(e: &Error) -> bool {
    matches!(e, Error::Unsupported(m) if m.contains("stream shared"))
}

/// The error a capture body returns on purpose.
const CAPTURE_ERROR: &str = "the stress test's capture body fails on purpose";

/// The payload of a capture body's panic on purpose.
struct IntendedPanic;

/// Keeps the panic hook quiet for [`IntendedPanic`]s; any other panic is
/// reported as before.
fn quiet_intended_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<IntendedPanic>() {
                previous(info)
            }
        }));
    });
}

/// A kernel or device copy on `held` (the operations a capture body
/// submits), or `None` for any other operation.
fn kernel_op(c: &TaskContext, op: &Op, held: &mut Held<'_>) -> Option<Result<()>> {
    Some(match op {
        Op::Fill { b, v } => k::fill(c, held.w(*b), *v),
        Op::Add { b, v } => k::add_scalar(c, held.w(*b), *v),
        Op::Scale { b, a } => k::scale(c, held.w(*b), *a),
        Op::Axpy { a, x, y } => {
            let (x, y) = held.pair(*x, *y);
            k::axpy(c, *a, x, y)
        }
        Op::Copy { src, dst, kernel } => {
            let (x, y) = held.pair(*src, *dst);
            if *kernel {
                k::copy(c, x, y)
            } else {
                c.copy(x, y)
            }
        }
        _ => return None,
    })
}

/// A host copy tried inside a capture: it must fail with
/// `Error::Capturing`, which the body then returns.
fn refused(r: Result<()>, env: &Env<'_>, what: &str) -> Result<()> {
    match r {
        // Refused only by the synchronize that follows a copy to the host:
        // the copy itself was submitted into the graph.
        Err(Error::Capturing { what: refused }) if refused.contains("synchroniz") => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture was submitted, then refused \
                 when {refused}",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        Err(e @ Error::Capturing { .. }) => Err(e),
        Ok(()) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture succeeded",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        Err(e) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture failed with {e}, not Error::Capturing",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
    }
}

/// An allocation tried inside a capture: it must fail with
/// `Error::Capturing` for the allocation, which the body then returns.
fn refused_alloc<T>(r: Result<T>, env: &Env<'_>, what: &str) -> Result<()> {
    match r {
        Err(e @ Error::Capturing { what: m }) if m.contains("allocat") => Err(e),
        Err(Error::Capturing { what: m }) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture was refused, but not for its \
                 allocation: {m}",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        r => refused(r.map(drop), env, what),
    }
}

/// How a capture body (or, for [`CaptureHow::ScopeTask`], the task it
/// spawns) ends: `end` on `c`, holding `held`.
fn capture_end(c: &TaskContext, end: CaptureEnd, held: &mut Held<'_>, env: &Env<'_>) -> Result<()> {
    match end {
        CaptureEnd::Error => Err(Error::Unsupported(CAPTURE_ERROR)),
        CaptureEnd::Panic => std::panic::panic_any(IntendedPanic),
        CaptureEnd::ToVec(x) => refused(c.to_vec(held.r(x)).map(drop), env, "to_vec"),
        CaptureEnd::CopyToHost(x) => {
            let src = held.r(x);
            let mut v = vec![0.0; src.len()];
            refused(c.copy_to_host(src, &mut v), env, "copy_to_host")
        }
        CaptureEnd::CopyFromHost(y) => {
            let dst = held.w(y);
            let v = vec![1.0; dst.len()];
            refused(c.copy_from_host(dst, &v), env, "copy_from_host")
        }
        CaptureEnd::Alloc => refused_alloc(c.alloc::<f32>(64), env, "alloc"),
        CaptureEnd::Zeros => refused_alloc(c.zeros::<f32>(64), env, "zeros"),
        CaptureEnd::FromHost => refused_alloc(c.from_host(&[1.0f32; 64]), env, "from_host"),
        CaptureEnd::Scan { x, y } => {
            let (x, y) = held.pair(x, y);
            refused_alloc(k::inclusive_scan(c, x, y), env, "inclusive_scan")
        }
        CaptureEnd::Reduce(x) => refused_alloc(k::reduce::sum(c, held.r(x)), env, "reduce::sum"),
    }
}

/// Ends a split as `end` says: rejoined on `ctx`'s stream, or abandoned.
fn end_split(ctx: &TaskContext, split: Split<'_, f32>, end: SplitEnd) -> Result<()> {
    match end {
        SplitEnd::Rejoin => ctx.rejoin(split),
        _ => {
            abandon(split, end);
            Ok(())
        }
    }
}

/// Ends a split without a rejoin: dropped, or leaked (a small `Vec` of
/// stamps). Either way the parent's uses are unknown from now on.
fn abandon(split: Split<'_, f32>, end: SplitEnd) {
    if end == SplitEnd::Forget {
        std::mem::forget(split);
    } else {
        drop(split);
    }
}

/// Whether a use of a view may still be queued, as far as the ledger knows:
/// its stream was not recycled since, and its epoch is not known complete.
fn views_busy(rt: &Runtime, views: &[ViewMut<'_, f32>]) -> bool {
    let l = rt.ledger();
    views.iter().any(|v| {
        let u = v.uses();
        let w = u.writer();
        w.iter()
            .chain(u.readers())
            .any(|x| l.generation(x.stream) == x.generation && l.completed(x.stream) < x.epoch)
    })
}

/// Runs one task body (`ops`) holding `held` and its own events `locals`,
/// spawning into `s`'s scope.
fn run_body<'sc>(
    s: &Scope<'_, 'sc>,
    ops: &'sc [Op],
    held: &mut Held<'sc>,
    env: &'sc Env<'sc>,
    mut locals: Locals,
) -> Result<()> {
    for op in ops {
        env.stats.ops.fetch_add(1, Relaxed);
        if let Some(r) = kernel_op(s, op, held) {
            r?;
            continue;
        }
        match op {
            Op::Fill { .. }
            | Op::Add { .. }
            | Op::Scale { .. }
            | Op::Axpy { .. }
            | Op::Copy { .. } => unreachable!("run by kernel_op"),
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
                // SAFETY: the kernel touches only the buffers passed, within their
                // lengths (its length arguments are theirs), or the launch is refused
                // before anything is submitted.
                unsafe {
                    k::ADD_SCALAR_F32.launch(
                        s,
                        LaunchConfig::for_elements(n, k::BLOCK),
                        (gpu::kernel::Untracked::new(p, n), *v, n),
                    )
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
                k::sum_atomic_into(s, held.r(*b), &mut out)?;
                let got = s.to_vec(&out)?;
                env.stats.compare(
                    &format!("scope {}: sum of buffer {b}", env.scope),
                    &got,
                    &[*expect],
                );
            }
            Op::Graph { b, v } => {
                let y = held.w(*b);
                match s.capture(|c| k::add_scalar(c, &mut *y, *v)) {
                    Ok(g) => s.launch_graph(&g).write(y).submit()?,
                    // Nothing captured: the same work, uncaptured.
                    Err(e) if shared_stream(&e) => {
                        env.stats.shared_captures.fetch_add(1, Relaxed);
                        k::add_scalar(s, y, *v)?
                    }
                    Err(e) => return Err(e),
                }
            }
            Op::Record(e) => s.record(&env.events[*e])?,
            Op::Wait(e) => s.wait(&env.events[*e])?,
            Op::EventSync(e) => env.events[*e].synchronize()?,
            Op::EventQuery(e) => {
                env.events[*e].query()?;
            }
            Op::Sync => s.synchronize()?,
            Op::Ev { e, act } => match act {
                // The event there before, if any, goes back to the pool.
                EvAct::New => locals[*e] = Some(s.runtime().event()?),
                EvAct::Record => s.record(own(&locals, *e))?,
                EvAct::Wait { .. } => s.wait(own(&locals, *e))?,
                EvAct::Sync { .. } => own(&locals, *e).synchronize()?,
                EvAct::Query { .. } => {
                    own(&locals, *e).query()?;
                }
                EvAct::Drop => locals[*e] = None,
            },
            Op::Spawn {
                device,
                writes,
                reads,
                events,
                ops,
            } => {
                let mut child = Held(Vec::new());
                for &id in writes {
                    child.0.push((id, held.take(id)));
                }
                for &id in reads {
                    child.0.push((id, Ref::Read(held.share(id))));
                }
                let mut theirs = Locals::default();
                for &e in events {
                    theirs[e] = locals[e].take();
                }
                let body = move |t: &Scope<'_, 'sc>| {
                    env.stats.tasks.fetch_add(1, Relaxed);
                    run_body(t, ops, &mut child, env, theirs)
                };
                match device {
                    Some(d) => s.spawn_on(*d, body),
                    None => s.spawn(body),
                }
            }
            Op::Scope(body) => s.scope(|inner| {
                let mut h = held.reborrow();
                run_body(inner, body, &mut h, env, Locals::default())
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
                            run_body(x, a, &mut h, env, Locals::default())
                        })
                    },
                    move |sb| {
                        env.stats.tasks.fetch_add(1, Relaxed);
                        sb.scope(|x| {
                            let mut h = hb.reborrow();
                            run_body(x, b, &mut h, env, Locals::default())
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
                            run_body(x, ops, &mut h, env, Locals::default())
                        })
                    })
                };
                held.0.push((*b, Ref::Buf(buf)));
                r?
            }
            Op::Split {
                b,
                chunk,
                views,
                body,
                end,
                ..
            } => {
                let Ref::Buf(buf) = held.take(*b) else {
                    panic!("generator bug: a split of a view or a shared buffer")
                };
                let r = (|| {
                    let mut split = buf.split_chunks(*chunk)?;
                    let r = {
                        let mut vs = split.views();
                        s.scope(|inner| {
                            let mut h = held.reborrow();
                            for (&key, v) in views.iter().zip(vs.iter_mut()) {
                                h.0.push((key, Ref::View(v as &mut Dyn<'_>)));
                            }
                            run_body(inner, body, &mut h, env, Locals::default())
                        })
                    };
                    end_split(s, split, *end)?;
                    r
                })();
                held.0.push((*b, Ref::Buf(buf)));
                r?
            }
            Op::TempScope {
                key,
                len,
                init,
                body,
                after,
            } => {
                let mut tmp = match init {
                    TempInit::Fill(v) => {
                        let mut t = s.alloc::<f32>(*len)?;
                        k::fill(s, &mut t, *v)?;
                        t
                    }
                    TempInit::Zeros => s.zeros::<f32>(*len)?,
                    TempInit::FromHost(v) => s.from_host(v)?,
                };
                s.scope(|inner| {
                    let mut h = held.reborrow();
                    h.0.push((*key, Ref::Buf(&mut tmp)));
                    run_body(inner, body, &mut h, env, Locals::default())
                })?;
                match after {
                    Some(TempAfter::Axpy { a, y }) => k::axpy(s, *a, &tmp, held.w(*y))?,
                    Some(TempAfter::Copy { y }) => s.copy(&tmp, held.w(*y))?,
                    None => {}
                }
                // Freed in stream order, after the readers on the children's
                // streams and this task's work, which may all be queued (X4).
                drop(tmp);
            }
            Op::BadCapture {
                how,
                ops,
                end,
                check,
            } => {
                let submit = |c: &TaskContext, held: &mut Held<'sc>| -> Result<()> {
                    for op in ops {
                        kernel_op(c, op, held).expect("generator bug: not a kernel")?;
                    }
                    Ok(())
                };
                let r = catch_unwind(AssertUnwindSafe(|| match how {
                    CaptureHow::Task => s.capture(|c| {
                        submit(c, held)?;
                        capture_end(c, *end, held, env)
                    }),
                    CaptureHow::Scope => gpu::capture_on(s.runtime(), |cs| {
                        submit(cs, held)?;
                        capture_end(cs, *end, held, env)
                    }),
                    CaptureHow::ScopeTask => gpu::capture_on(s.runtime(), |cs| {
                        submit(cs, held)?;
                        let end = *end;
                        cs.spawn(move |t| capture_end(t, end, &mut Held(Vec::new()), env));
                        Ok(())
                    }),
                }));
                let what = format!("scope {}: a capture ({how:?}) ending as {end:?}", env.scope);
                match r {
                    Ok(Ok(_graph)) => env.stats.fail(format!("{what} returned a graph")),
                    Ok(Err(e)) if shared_stream(&e) => {
                        env.stats.shared_captures.fetch_add(1, Relaxed);
                    }
                    Ok(Err(e)) => match (end, &e) {
                        (CaptureEnd::Error, Error::Unsupported(m)) if *m == CAPTURE_ERROR => {}
                        (
                            CaptureEnd::ToVec(_)
                            | CaptureEnd::CopyToHost(_)
                            | CaptureEnd::CopyFromHost(_),
                            Error::Capturing { .. } | Error::Unsupported(CAPTURE_ERROR),
                        ) => {}
                        (_, Error::Capturing { what: m })
                            if end.allocates() && m.contains("allocat") => {}
                        // Counted already, by `refused_alloc`.
                        (_, Error::Unsupported(CAPTURE_ERROR)) if end.allocates() => {}
                        _ => env.stats.fail(format!("{what} failed with {e}")),
                    },
                    Err(p) if *end == CaptureEnd::Panic && p.is::<IntendedPanic>() => {}
                    Err(p) => resume_unwind(p),
                }
                if let Some((x, expect)) = check {
                    let got = s.to_vec(held.r(*x))?;
                    env.stats.compare(
                        &format!("{what}: to_vec of buffer {x} after it"),
                        &got,
                        expect,
                    );
                }
            }
            Op::Multi(m) => multi::run_op(s, m, held, env)?,
        }
    }
    Ok(())
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Tasks run (scope bodies, spawns, joins' second halves, chunks).
    pub tasks: usize,
    /// Top-level scopes run.
    pub scopes: usize,
    /// Operations submitted.
    pub ops: usize,
    /// Values that differed from the model, and outcomes that differed
    /// from the expected (must be 0).
    pub wrong: usize,
    /// The first wrong value, described.
    pub first_wrong: Option<String>,
    /// Races the host backend's detector found (must be 0).
    pub races: usize,
    /// The first race found.
    pub first_race: Option<String>,
    /// Hand-offs that waited on the device, and that synchronized the host.
    pub device_waits: u64,
    /// Hand-offs that synchronized the old stream on the host.
    pub host_syncs: u64,
    /// Stream switches whose wait the ledger's facts avoided.
    pub waits_avoided: u64,
    /// Operations of the scopes run, by kind (see [`census`]), and the
    /// harness's own between scopes.
    pub census: BTreeMap<&'static str, usize>,
    /// Wall time.
    pub elapsed: Duration,
}

impl Report {
    /// Whether every value was right and no race was found.
    pub fn ok(&self) -> bool {
        self.wrong == 0 && self.races == 0
    }

    /// How many operations of `kind` ran.
    pub fn count(&self, kind: &str) -> usize {
        self.census.get(kind).copied().unwrap_or(0)
    }
}

/// Operations the harness counts itself (besides the generator's kinds).
pub mod harness_kinds {
    /// A parent used (checked, or freed) right after a top-level split that
    /// was not rejoined, while the ledger did not know all the views' work
    /// complete: only the parent's stamps order the use after it.
    pub const USED_AFTER_SPLIT_BUSY: &str =
        "top-level split not rejoined, parent used while the views' work may be queued";
    /// A buffer dropped and made again from the model between scopes.
    pub const REALLOC: &str = "buffer dropped and reallocated";
    /// A shared event dropped (back to the pool) and a new one taken.
    pub const EVENT_REPLACED: &str = "shared event replaced";
    /// A capture refused because its task's stream was shared (the pool
    /// ran out, §9); a graph's work then ran uncaptured.
    pub const CAPTURE_ON_SHARED_STREAM: &str = "capture refused on a shared stream";
}

/// The operations that exercise the runtime's soundness rules (pooled
/// events, splits, frees, captures that end badly), by kind: the
/// generator's and the harness's.
pub const SOUNDNESS_KINDS: &[&str] = &[
    "own event taken",
    "own event record",
    "own event wait before a record",
    "own event wait",
    "own event synchronize before a record",
    "own event synchronize",
    "own event query before a record",
    "own event query",
    "own event dropped",
    "own events handed to a child",
    harness_kinds::EVENT_REPLACED,
    "split rejoined",
    "split dropped",
    "split forgotten",
    "split not rejoined, parent used next",
    "top-level split rejoined",
    "top-level split dropped",
    "top-level split forgotten",
    harness_kinds::USED_AFTER_SPLIT_BUSY,
    "top-level split not rejoined, parent freed",
    "temporary handed to tasks",
    harness_kinds::REALLOC,
    "capture returns an error",
    "capture panics",
    "to_vec in a capture",
    "copy_to_host in a capture",
    "copy_from_host in a capture",
    "alloc in a capture",
    "zeros in a capture",
    "from_host in a capture",
    "inclusive_scan in a capture",
    "reduce::sum in a capture",
    "scope capture returns an error",
    "allocation in a scope capture",
    "allocation in a task of a scope capture",
    "operations captured and discarded",
];

impl Report {
    /// The counts of [`SOUNDNESS_KINDS`], one per line.
    pub fn soundness_census(&self) -> String {
        SOUNDNESS_KINDS
            .iter()
            .map(|k| format!("  {:>6}  {k}", self.count(k)))
            .collect::<Vec<_>>()
            .join("\n")
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
pub fn run(
    rt: &Runtime,
    cfg: &Config,
    mut after_scope: impl FnMut(&Report) -> bool,
) -> std::result::Result<Report, String> {
    quiet_intended_panics();
    let start = Instant::now();
    let counters = rt.counters();
    let races_before = rt.races().len();
    let mut gen = Generator::new(cfg);
    let ctx = |what: &str, scope: usize, e: gpu::Error| {
        format!("seed {} scope {scope}: {what}: {e}", cfg.seed)
    };
    let multi = if cfg.devices > 1 {
        Some(MultiEnv::new(rt, cfg).map_err(|e| ctx("opening the devices", 0, e))?)
    } else {
        None
    };
    let devs: Vec<Runtime> = match &multi {
        Some(m) => m.devices.clone(),
        None => vec![rt.clone()],
    };
    // Buffer `i` is device `i % devices`'s (as the generator's model).
    let dev_of = |i: usize| &devs[i % devs.len()];
    // Load the kernels now, not in a first launch inside a graph capture.
    for d in &devs {
        d.cu_function(&k::FILL_F32)
            .map_err(|e| ctx("loading the kernels", 0, e))?;
    }
    let mut bufs = gen
        .model()
        .iter()
        .enumerate()
        .map(|(i, m)| dev_of(i).begin_task()?.from_host(m))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("allocating", 0, e))?;
    let mut events = (0..cfg.events)
        .map(|_| rt.event())
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("taking events", 0, e))?;
    let stats = Stats::default();
    let mut report = Report::default();
    while report.tasks < cfg.tasks {
        let scope = report.scopes + 1;
        let plan = gen.next_scope();
        plan.census(&mut report.census);
        let env = Env {
            events: &events,
            backend: rt.backend(),
            stats: &stats,
            scope,
            multi: multi.as_ref(),
        };
        // The buffers split around the scope, and the others.
        let mut outer = Vec::new();
        let mut splits = Vec::new();
        let mut whole = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            match plan.splits.iter().find(|s| s.b == i) {
                Some(s) => {
                    outer.push(s);
                    splits.push(
                        b.split_chunks(s.chunk)
                            .map_err(|e| ctx("split_chunks", scope, e))?,
                    );
                }
                None => whole.push((i, Ref::Buf(b))),
            }
        }
        let mut views: Vec<Vec<ViewMut<'_, f32>>> = splits.iter_mut().map(|s| s.views()).collect();
        let mut held = Held(whole);
        for (s, vs) in outer.iter().zip(views.iter_mut()) {
            for (&key, v) in s.views.iter().zip(vs.iter_mut()) {
                held.0.push((key, Ref::View(v as &mut Dyn<'_>)));
            }
        }
        stats.tasks.fetch_add(1, Relaxed);
        gpu::scope_on(&devs[plan.device], |s| {
            let mut h = held.reborrow();
            run_body(s, &plan.ops, &mut h, &env, Locals::default())
        })
        .map_err(|e| ctx("the scope failed", scope, e))?;
        drop(held);
        // No scope orders what comes next after the views' tasks: only the
        // parent's stamps do, once the split ends. So each parent is used
        // at once: checked (a read) or, if `realloc`, dropped (its free)
        // and made again from the model.
        let busy: Vec<bool> = outer
            .iter()
            .zip(&views)
            .map(|(s, vs)| s.end != SplitEnd::Rejoin && views_busy(rt, vs))
            .collect();
        drop(views);
        for (s, split) in outer.iter().zip(splits) {
            if s.end == SplitEnd::Rejoin {
                let t = dev_of(s.b)
                    .begin_task()
                    .map_err(|e| ctx("begin_task", scope, e))?;
                t.rejoin(split).map_err(|e| ctx("rejoin", scope, e))?;
            } else {
                abandon(split, s.end);
            }
        }
        let mut realloc = Vec::new();
        for (s, busy) in outer.iter().zip(busy) {
            if busy {
                *report
                    .census
                    .entry(harness_kinds::USED_AFTER_SPLIT_BUSY)
                    .or_default() += 1;
            }
            if s.realloc {
                realloc.push(s.b);
            } else {
                let got = bufs[s.b].to_vec().map_err(|e| ctx("to_vec", scope, e))?;
                stats.compare(
                    &format!("scope {scope}: buffer {} right after its split", s.b),
                    &got,
                    &gen.model()[s.b],
                );
            }
        }
        // Now and then drop a buffer whose work may still be queued (X4)
        // and start it again from the model.
        if gen.rng().chance(20) {
            realloc.push(gen.rng().below(bufs.len()));
        }
        for i in realloc {
            let t = dev_of(i)
                .begin_task()
                .map_err(|e| ctx("begin_task", scope, e))?;
            bufs[i] = t
                .from_host(&gen.model()[i])
                .map_err(|e| ctx("reallocating", scope, e))?;
            *report.census.entry(harness_kinds::REALLOC).or_default() += 1;
        }
        // Now and then give a shared event back to the pool (where the
        // runtime's hand-offs take it next) and take another, which covers
        // nothing until recorded.
        if !events.is_empty() && gen.rng().chance(25) {
            let i = gen.rng().below(events.len());
            events[i] = rt.event().map_err(|e| ctx("taking an event", scope, e))?;
            *report
                .census
                .entry(harness_kinds::EVENT_REPLACED)
                .or_default() += 1;
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
        let shared = stats.shared_captures.load(Relaxed);
        if shared > 0 {
            report
                .census
                .insert(harness_kinds::CAPTURE_ON_SHARED_STREAM, shared);
        }
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
    drop(multi);
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
