//! The global worker pool and what a scope asks of it: which pool a
//! thread works for ([`on_worker`], [`global`], [`install`]) and how much
//! stack a worker has left ([`check_stack`]). Below `scope` and `join`;
//! [`crate::ThreadPool`] and its builder are above them (rayon-core's
//! `registry.rs` and `thread_pool/`).
//!
//! Design note (DESIGN "Streams are a resource"): the pool is rayon-core's thread pool, and a task is a
//! Rayon job plus a [`gpu_sched::TaskContext`]. A task takes a stream from
//! the runtime's recyclable pool only at its first GPU operation, and gives
//! it back when it finishes (R13); a task that submits nothing costs no
//! stream, so a CPU-only Rayon program runs with any nesting. When every
//! stream is held and the ledger tracks no more, a held stream is shared
//! (R3: its closes stop counting) rather than fail: depth is bounded by the
//! stack, as in Rayon.
//!
//! On a worker thread, `join` is `rayon_core::join` (its `b` a task of its
//! own, run on this thread unless another worker steals it) and a scope's
//! spawns are jobs of a Rayon scope, whose end runs the jobs no worker took.
//! A join's sides have no Rayon scope: a task spawned from one goes to the
//! pool of the thread (as a Rayon spawn does) *and* to the join's list,
//! whoever takes it first runs it, and the join's end runs the tasks no
//! worker has started yet on its own thread, a worker of that pool.
//!
//! From outside every pool, `join` moves to a worker (as Rayon's does),
//! and a scope's body runs on the calling thread (as Rayon's
//! `in_place_scope`'s; Rayon's `scope` moves its body to a worker): its
//! tasks are jobs of the global pool, and the scope's end runs on the
//! calling thread those no worker has started (unlike Rayon: no thread
//! wake-up for a scope of one small task; `gpu::scope`'s docs give the
//! measured cost and what a task there sees). The body stays on the
//! calling thread so that a body which blocks on its own tasks (a channel,
//! a host wait) holds no worker.
//!
//! A [`crate::ThreadPool`] of its own works as Rayon's: `gpu` calls inside its
//! `install` run their tasks on its workers (a scope opened outside every
//! pool spawns into the global one).
//!
//! Stacks: a chain of nested joins runs on a worker's stack. A level
//! takes more than Rayon's (the `stack_depth.rs` test measures both: about
//! 3.1 KB against 1.3 KB in a debug build, 1.4 KB against 256 bytes in a
//! release build), so the workers' default
//! stack is 16 MiB rather than Rayon's 2 MiB, and a join or scope that would
//! start too close to the end of a worker's stack returns
//! [`gpu_sched::Error::StackExhausted`] rather than overflow it.
//!
//! Differences from Rayon: tasks return `gpu::Result` and the first error
//! (or panic) of a scope is reported at its end, after all of the scope's GPU
//! work finished; no `join_context`, FIFO spawns, broadcast or yield; no
//! start and exit handlers.

use std::sync::OnceLock;

static POOL: OnceLock<rayon_core::ThreadPool> = OnceLock::new();

/// Whether the global pool exists (built, or started by a first use).
pub(crate) fn global_started() -> bool {
    POOL.get().is_some()
}

/// Makes `pool` the global pool; `Err` (giving it back) if there is one.
pub(crate) fn set_global(pool: rayon_core::ThreadPool) -> Result<(), rayon_core::ThreadPool> {
    POOL.set(pool)
}

/// A Rayon pool of `num_threads` workers (`None`: `GPU_THREADS` if set,
/// else the number of CPUs, at least 8) with stacks of `stack_size` bytes
/// (`None`: [`default_stack_size`]), each armed for [`check_stack`]
/// ([`crate::ThreadPoolBuilder`]'s settings).
pub(crate) fn build(
    num_threads: Option<usize>,
    stack_size: Option<usize>,
) -> Result<rayon_core::ThreadPool, rayon_core::ThreadPoolBuildError> {
    let n = num_threads.unwrap_or_else(|| {
        std::env::var("GPU_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
                    .max(8)
            })
    });
    // Always given, so each worker knows how much stack it has.
    let stack = stack_size.unwrap_or_else(default_stack_size);
    rayon_core::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("gpu-worker-{i}"))
        .stack_size(stack)
        .start_handler(move |_| arm_stack_check(stack))
        .build()
}

/// The default stack of a worker thread: [`DEFAULT_STACK`], or
/// `RUST_MIN_STACK` where that asks for more (Rust's default for new
/// threads, and so Rayon's, is `RUST_MIN_STACK` or 2 MiB).
fn default_stack_size() -> usize {
    let env = std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    DEFAULT_STACK.max(env)
}

/// The default stack of a worker, 16 MiB: a level of `gpu::join` nesting
/// takes about twice Rayon's stack (a task of its own for each side), and
/// a debug build's frames are several times a release build's, so a
/// 4,096-deep chain of joins fits in a debug build (the test
/// `stack_depth.rs`) and far more in a release build. Only the pages a
/// thread touches take memory.
const DEFAULT_STACK: usize = 16 << 20;

thread_local! {
    /// On a worker of a pool of this crate: the lowest stack address a new
    /// level of nesting may start at, and the reserve below it (0 and 0
    /// elsewhere: no check).
    static STACK_LIMIT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// The address of a local of the caller's frame: where the stack is now.
#[inline(always)]
fn stack_here() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

/// Stack kept free below the last level that may start: for the
/// deepest task's own work (its GPU calls, a panic's unwinding), and for
/// what is above the worker's first frame (its thread-local storage),
/// which the estimate of the stack's end leaves out.
fn stack_reserve(stack: usize) -> usize {
    (stack / 8).clamp(32 << 10, 1 << 20).min(stack / 2)
}

/// Run first on each worker (the pool's start handler): the stack's end
/// is `stack` bytes below a frame near its top.
fn arm_stack_check(stack: usize) {
    let end = stack_here().saturating_sub(stack);
    let reserve = stack_reserve(stack);
    STACK_LIMIT.with(|l| l.set((end.saturating_add(reserve), reserve)));
}

/// Refuses a new level of `join` or scope nesting on a worker of this
/// crate's pools whose stack is nearly used up: a typed error rather than
/// a stack overflow, which aborts the process. Elsewhere (another thread,
/// a Rayon pool of the user's) the stack's size is not known and nothing
/// is checked.
///
/// # Errors
///
/// [`gpu_sched::Error::StackExhausted`].
#[inline]
pub(crate) fn check_stack() -> gpu_sched::Result<()> {
    let (limit, reserve) = STACK_LIMIT.with(|l| l.get());
    let here = stack_here();
    if here < limit {
        return Err(stack_exhausted(here + reserve - limit));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn stack_exhausted(left: usize) -> gpu_sched::Error {
    gpu_sched::Error::StackExhausted { left }
}

/// The global pool, started at its first use unless built before
/// ([`crate::ThreadPoolBuilder::build_global`]).
pub(crate) fn global() -> &'static rayon_core::ThreadPool {
    POOL.get_or_init(|| {
        build(None, None).expect("starting the gpu worker threads (the default pool)")
    })
}

/// Whether this thread is a worker of a Rayon pool (this crate's or a
/// user's): there `join` is Rayon's own and a scope's spawns are Rayon jobs
/// of that pool.
pub(crate) fn on_worker() -> bool {
    rayon_core::current_thread_index().is_some()
}

/// The number of worker threads of the pool this thread works for, or of the
/// global pool from outside every pool (as Rayon's).
pub fn current_num_threads() -> usize {
    if on_worker() {
        rayon_core::current_num_threads()
    } else {
        global().current_num_threads()
    }
}

/// Runs `op` on a worker thread of the global pool and returns its result
/// (rayon's `ThreadPool::install`). A scope opened there spawns onto that
/// worker's own queue rather than injecting from outside. (On the H200 a
/// loop of one-spawn scopes ran no faster there: benchmark
/// `B8/spawn-join-in-pool`.)
///
/// # Panics
///
/// Re-raises a panic of `op`.
pub fn install<OP, R>(op: OP) -> R
where
    OP: FnOnce() -> R + Send,
    R: Send,
{
    global().install(op)
}
