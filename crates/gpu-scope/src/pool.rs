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
//! From outside the pool, `join` moves to a worker (as Rayon's does), and a
//! scope runs on the calling thread: `spawn` hands the task to the pool
//! *and* keeps it in its scope's list, whoever takes it first runs it, and
//! the scope's end runs the tasks no worker has started yet on its own
//! thread (a short task spawned and joined costs no thread wake-up on the
//! critical path).
//!
//! A [`ThreadPool`] of its own works as Rayon's: `gpu` calls inside its
//! `install` run their tasks on its workers (a scope opened outside every
//! pool spawns into the global one).
//!
//! Differences from Rayon: tasks return `gpu::Result` and the first error
//! (or panic) of a scope is reported at its end, after all of the scope's GPU
//! work finished; no `join_context`, FIFO spawns, broadcast or yield; no
//! start and exit handlers.

use std::sync::OnceLock;

static POOL: OnceLock<rayon_core::ThreadPool> = OnceLock::new();

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

    /// The stack size of each worker thread, in bytes (as Rayon's; the
    /// default is Rust's). Nesting depth is bounded by the stack: a deep
    /// recursion of `join`s runs on the workers' stacks.
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
    /// If the worker threads cannot be started.
    pub fn build(self) -> Result<ThreadPool, String> {
        Ok(ThreadPool {
            inner: self.try_build().map_err(|e| e.to_string())?,
        })
    }

    /// Builds the global pool.
    ///
    /// # Errors
    ///
    /// If the global pool already exists (it starts on first use).
    pub fn build_global(self) -> Result<(), String> {
        if POOL.get().is_some() {
            return Err("the global gpu pool was already started".into());
        }
        let pool = self.try_build().map_err(|e| e.to_string())?;
        POOL.set(pool)
            .map_err(|_| "the global gpu pool was already started".to_string())
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
        let mut b = rayon_core::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("gpu-worker-{i}"));
        if let Some(bytes) = self.stack_size {
            b = b.stack_size(bytes);
        }
        b.build()
    }
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
