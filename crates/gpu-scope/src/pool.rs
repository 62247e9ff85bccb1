//! The worker-thread pool.
//!
//! Design note (§9): the pool is rayon-core's thread pool, and a task is a
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
//! A [`ThreadPool`] of its own works as Rayon's: `gpu` calls inside its
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

/// Why [`ThreadPoolBuilder::build`] or [`ThreadPoolBuilder::build_global`]
/// failed (Rayon's `ThreadPoolBuildError`).
#[derive(Debug)]
pub struct ThreadPoolBuildError {
    kind: BuildErrorKind,
}

#[derive(Debug)]
enum BuildErrorKind {
    /// The global pool was built, or started by a first use, before.
    GlobalPoolAlreadyStarted,
    /// The worker threads could not be started.
    Threads(rayon_core::ThreadPoolBuildError),
}

impl ThreadPoolBuildError {
    fn already_started() -> Self {
        ThreadPoolBuildError {
            kind: BuildErrorKind::GlobalPoolAlreadyStarted,
        }
    }

    fn threads(e: rayon_core::ThreadPoolBuildError) -> Self {
        ThreadPoolBuildError {
            kind: BuildErrorKind::Threads(e),
        }
    }

    /// Whether the error is that the global pool already exists (built
    /// before, or started by a first use of `gpu`).
    pub fn is_global_pool_already_started(&self) -> bool {
        matches!(self.kind, BuildErrorKind::GlobalPoolAlreadyStarted)
    }
}

impl std::fmt::Display for ThreadPoolBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            BuildErrorKind::GlobalPoolAlreadyStarted => f.write_str(
                "the global gpu pool was already started (build it before the first use of gpu)",
            ),
            BuildErrorKind::Threads(e) => write!(f, "the gpu pool's threads did not start: {e}"),
        }
    }
}

impl std::error::Error for ThreadPoolBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            BuildErrorKind::GlobalPoolAlreadyStarted => None,
            BuildErrorKind::Threads(e) => Some(e),
        }
    }
}

/// Configures the global worker pool (like rayon's `ThreadPoolBuilder`).
#[derive(Debug, Default, Clone)]
pub struct ThreadPoolBuilder {
    num_threads: Option<usize>,
    stack_size: Option<usize>,
}

impl ThreadPoolBuilder {
    /// A builder with defaults: `GPU_THREADS` if set, else the number of
    /// CPUs, at least 8 (tasks block on host synchronizes).
    pub fn new() -> Self {
        ThreadPoolBuilder::default()
    }

    /// The number of worker threads; 0 means the default (as in Rayon):
    /// `GPU_THREADS` if set, else the number of CPUs, at least 8.
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = (n != 0).then_some(n);
        self
    }

    /// The stack size of each worker thread, in bytes (as Rayon's). The
    /// default is 16 MiB (or `RUST_MIN_STACK` where that is more), where
    /// Rayon's is Rust's 2 MiB: a level of `join` nesting takes more stack
    /// than Rayon's. Nesting depth is bounded by the stack: a deep
    /// recursion of `join`s runs on the workers' stacks, and a `join` or
    /// scope that would start too close to a worker's stack end returns
    /// [`gpu_sched::Error::StackExhausted`] instead of overflowing it.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Builds a pool of its own (Rayon's `ThreadPoolBuilder::build`): `gpu`
    /// calls made inside [`ThreadPool::install`] run their tasks on its
    /// workers.
    ///
    /// # Errors
    ///
    /// [`ThreadPoolBuildError`] if the worker threads cannot be started.
    pub fn build(self) -> Result<ThreadPool, ThreadPoolBuildError> {
        Ok(ThreadPool {
            inner: self.try_build().map_err(ThreadPoolBuildError::threads)?,
        })
    }

    /// Builds the global pool.
    ///
    /// # Errors
    ///
    /// [`ThreadPoolBuildError`] if the global pool already exists (it
    /// starts on first use) or its threads cannot be started.
    pub fn build_global(self) -> Result<(), ThreadPoolBuildError> {
        if POOL.get().is_some() {
            return Err(ThreadPoolBuildError::already_started());
        }
        let pool = self.try_build().map_err(ThreadPoolBuildError::threads)?;
        POOL.set(pool)
            .map_err(|_| ThreadPoolBuildError::already_started())
    }

    fn try_build(self) -> Result<rayon_core::ThreadPool, rayon_core::ThreadPoolBuildError> {
        let n = self.num_threads.unwrap_or_else(|| {
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
        let stack = self.stack_size.unwrap_or_else(default_stack_size);
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("gpu-worker-{i}"))
            .stack_size(stack)
            .start_handler(move |_| arm_stack_check(stack))
            .build()
    }
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

pub(crate) fn global() -> &'static rayon_core::ThreadPool {
    POOL.get_or_init(|| {
        ThreadPoolBuilder::new()
            .try_build()
            .expect("starting the gpu worker threads (the default pool)")
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

/// A pool of worker threads of its own (Rayon's `ThreadPool`): `gpu` calls
/// made inside [`ThreadPool::install`] (and its `scope` and `join`) run
/// their tasks on its workers. Every pool's tasks share the runtime's
/// streams. Dropping it ends its workers once their work is done.
#[derive(Debug)]
pub struct ThreadPool {
    inner: rayon_core::ThreadPool,
}

impl ThreadPool {
    /// Runs `op` on a worker of this pool and returns its result.
    ///
    /// # Panics
    ///
    /// Re-raises a panic of `op`.
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.inner.install(op)
    }

    /// [`crate::scope`] on a worker of this pool: its spawns run on this
    /// pool's workers.
    ///
    /// # Errors
    ///
    /// As [`crate::scope`].
    pub fn scope<'scope, OP, R>(&self, op: OP) -> crate::Result<R>
    where
        OP: FnOnce(&crate::Scope<'_, 'scope>) -> crate::Result<R> + Send,
        R: Send,
    {
        self.install(|| crate::scope(op))
    }

    /// [`crate::join`] on a worker of this pool.
    ///
    /// # Errors
    ///
    /// As [`crate::join`].
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> crate::Result<(RA, RB)>
    where
        A: FnOnce(&crate::Scope<'_, '_>) -> crate::Result<RA> + Send,
        B: for<'r2, 's2> FnOnce(&crate::Scope<'r2, 's2>) -> crate::Result<RB> + Send,
        RA: Send,
        RB: Send,
    {
        self.install(|| crate::join(a, b))
    }

    /// The number of worker threads.
    pub fn current_num_threads(&self) -> usize {
        self.inner.current_num_threads()
    }

    /// This thread's index among the pool's workers, if it is one.
    pub fn current_thread_index(&self) -> Option<usize> {
        self.inner.current_thread_index()
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
