//! [`ThreadPool`], a pool of worker threads of its own, and
//! [`ThreadPoolBuilder`], which builds one or the global pool (Rayon's
//! types of these names; the pool itself is [`crate::registry`]'s).

use crate::registry;

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
            rayon: registry::build(self.num_threads, self.stack_size)
                .map_err(ThreadPoolBuildError::threads)?,
        })
    }

    /// Builds the global pool.
    ///
    /// # Errors
    ///
    /// [`ThreadPoolBuildError`] if the global pool already exists (it
    /// starts on first use) or its threads cannot be started.
    pub fn build_global(self) -> Result<(), ThreadPoolBuildError> {
        if registry::global_started() {
            return Err(ThreadPoolBuildError::already_started());
        }
        let pool = registry::build(self.num_threads, self.stack_size)
            .map_err(ThreadPoolBuildError::threads)?;
        registry::set_global(pool).map_err(|_| ThreadPoolBuildError::already_started())
    }
}

/// A pool of worker threads of its own (Rayon's `ThreadPool`): `gpu` calls
/// made inside [`ThreadPool::install`] (and its `scope` and `join`) run
/// their tasks on its workers. Every pool's tasks share the runtime's
/// streams. Dropping it ends its workers once their work is done.
#[derive(Debug)]
pub struct ThreadPool {
    rayon: rayon_core::ThreadPool,
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
        self.rayon.install(op)
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
        self.rayon.current_num_threads()
    }

    /// This thread's index among the pool's workers, if it is one.
    pub fn current_thread_index(&self) -> Option<usize> {
        self.rayon.current_thread_index()
    }
}
