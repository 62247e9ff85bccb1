//! A seeded generator of random task DAGs, and the harness that runs them
//! and checks every value.
//!
//! Shared by `tests/stress.rs` (CI-sized, host backend), the test kit's
//! `tests/library_failures.rs` (CI-sized, with library failures injected),
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
//! With [`Config::factorizations`] above 0, tasks also run Cholesky
//! factorizations (`gpu::solver::Potrf`) of small matrices with an exact
//! integer factor, uploaded into the buffers they hold, and in a share of
//! the top-level calls ([`Config::failing`]) some of those matrices are not
//! positive definite: failures injected at random, known only after the
//! device ran them (DESIGN "Where a failure goes"). The top-level calls then vary too
//! ([`Entry`]: `scope_on`, `in_place_scope`, `join`, a top-level chunk
//! iterator). The harness checks that each call returns
//! `Error::NotPositiveDefinite` exactly when a task it covers had a failure,
//! that a wait inside a task reports one exactly when the task holds one
//! (none reaches an unrelated task, none is lost on the way up), that
//! every value (the factors too) is the model's even in a call that
//! failed, that an unrelated task's `to_vec` after each call keeps its
//! data, and that `Runtime::synchronize` has nothing left to report.
//!
//! Same seed, same programs: a failure names its seed and scope.
//! [`run_watched`] runs [`run`] on a thread of its own and fails, naming
//! the seed and scope, when no top-level scope ends for a while (a hang).

#![allow(dead_code)] // each user takes the part it needs

mod gen;
mod gen_ops;
pub mod multi;
mod owed;
mod report;
mod run;

use gpu::kernel::LaunchConfig;
use gpu::memory::DeviceSliceMut;
use gpu::raw::RawTask;
use gpu::solver::Potrf;
use gpu::sync::Event;
use gpu::{BackendKind, Buffer, Error, Result, Runtime, Scope, Split, TaskContext, ViewMut};
use gpu_kernels as k;
#[allow(unused_imports)] // each user takes the part it needs
pub use multi::run_watched;
use multi::{MultiEnv, MultiOp};
use owed::*;
pub use report::*;
use run::*;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};
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
    /// Percent of a task's plain operations that are Cholesky
    /// factorizations ([`Op::Factor`]); 0 (the default): none, and the
    /// top-level calls are all `scope_on` (the programs are those of
    /// before).
    pub factorizations: usize,
    /// Percent of the top-level calls in which factorizations may fail
    /// (each then does one time in three): the injected failures.
    pub failing: usize,
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
            factorizations: 0,
            failing: 0,
        }
    }

    /// [`Config::new`] with library failures injected: factorizations in
    /// 6 percent of the plain operations, failing in half the top-level
    /// calls.
    pub fn with_failures(seed: u64, tasks: usize) -> Self {
        Config {
            factorizations: 6,
            failing: 50,
            ..Config::new(seed, tasks)
        }
    }
}

/// The API call a top-level plan runs under (with [`Config::factorizations`]
/// above 0; `Scope` otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `gpu::scope_on(rt, ..)`.
    Scope,
    /// `gpu::in_place_scope` (the global runtime's; `scope_on` elsewhere).
    InPlace,
    /// `gpu::join` of the plan's one [`Op::Join`] (the global runtime's;
    /// elsewhere the join nested in a `scope_on`).
    Join,
    /// A top-level chunk iterator over the plan's one [`Op::Chunks`]:
    /// `par_chunks_mut(..).for_each(..)`, or `.map(..).collect()` if
    /// `collect`.
    Chunks { collect: bool },
}

impl Entry {
    /// The entry's name, for censuses.
    pub fn kind(self) -> &'static str {
        match self {
            Entry::Scope => "top level: scope_on",
            Entry::InPlace => "top level: in_place_scope",
            Entry::Join => "top level: join",
            Entry::Chunks { collect: false } => "top level: par_chunks_mut(..).for_each",
            Entry::Chunks { collect: true } => "top level: par_chunks_mut(..).map(..).collect",
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
    /// `copy_from_host(b, upload)` (the held values with an `n x n`
    /// column-major matrix in front), then `Potrf::new(n)` of `b`'s first
    /// `n * n` elements. If `fail`, the matrix is not positive definite:
    /// the task's next wait, or the call that ends it, reports
    /// `Error::NotPositiveDefinite`, and the task then fills `b` with
    /// `refill` (the factor's values after a failure are not specified).
    Factor {
        b: usize,
        n: usize,
        upload: Vec<f32>,
        fail: bool,
        refill: f32,
    },
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
            Op::Factor { fail: false, .. } => FACTORIZATION,
            Op::Factor { fail: true, .. } => FAILING_FACTORIZATION,
        }
    }
}

/// [`Op::Factor`]'s kind, of a positive definite matrix.
pub const FACTORIZATION: &str = "factorization";
/// [`Op::Factor`]'s kind, of a matrix that is not positive definite.
pub const FAILING_FACTORIZATION: &str = "factorization that fails";

/// A spawned task with no GPU work of its own, joining grandchildren (a
/// nested scope of spawns, a join whose `a` side only spawns).
pub const IDLE_TASK: &str = "task with no GPU work of its own that joins grandchildren";
/// An [`IDLE_TASK`] with a failure below it.
pub const FAILURE_BEHIND_IDLE: &str = "failure behind a task with no GPU work of its own";

/// Whether a task body does nothing on its own task but join tasks below.
fn is_idle(ops: &[Op]) -> bool {
    let spawns = |ops: &[Op]| ops.iter().all(|op| matches!(op, Op::Spawn { .. }));
    match ops {
        [Op::Scope(body)] => spawns(body),
        [Op::Join { a, .. }] => spawns(a),
        _ => false,
    }
}

/// How many factorizations below `ops` fail (in every task, nested scope,
/// join side, chunk and split below them).
pub fn failures(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Factor { fail, .. } => usize::from(*fail),
            Op::Spawn { ops, .. } | Op::Scope(ops) => failures(ops),
            Op::Split { body, .. } | Op::TempScope { body, .. } => failures(body),
            Op::Join { a, b, .. } => failures(a) + failures(b),
            Op::Chunks { per_chunk, .. } => per_chunk.iter().map(|c| failures(c)).sum(),
            _ => 0,
        })
        .sum()
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
                if is_idle(ops) {
                    *into.entry(IDLE_TASK).or_default() += 1;
                    if failures(ops) > 0 {
                        *into.entry(FAILURE_BEHIND_IDLE).or_default() += 1;
                    }
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
    pub entry: Entry,
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
    /// Whether factorizations may fail in the scope being planned.
    failing_now: bool,
    /// Above 0 while planning the tasks below a task with no GPU work of
    /// its own: factorizations (and failures) there are more frequent.
    behind_idle: usize,
}
