//! `Graphed`: a scope run many times that becomes a CUDA graph by itself
//! (DESIGN "Graphs without capture by hand"; the machinery is `gpu_sched`'s `TaskContext::graphed_scope`).

use super::{end_top_level, run_scope, Join, Scope};
use gpu_sched::{GraphCache, GraphStats, Result, Runtime};

/// A scope that becomes a CUDA graph by itself when it runs again and
/// again with the same shape: a solver's iteration, a time step, a task
/// DAG replayed. No capture by hand, no buffers to list.
///
/// Each [`Graphed::scope`] runs its body as [`crate::scope`] would (the
/// tasks it spawns, their spawns, joins and nested scopes), but records
/// their GPU operations instead of submitting them one by one, then
/// launches them as one graph on the scope's stream. The first run builds
/// the graph through the explicit graph API, its dependencies those the
/// tasks would have had on their own streams (each task's operations in
/// order, after its spawner's work before the spawn and the tasks it
/// joined, and after every earlier operation whose memory conflicts with
/// its own). A later run whose operations have the same shape (kernels,
/// launch configurations, dependencies) launches the same graph again,
/// after setting in place the arguments of the kernels whose pointers or
/// scalars changed; a run of another shape builds a new graph. Operations
/// are named by their task (its place among its spawner's children) and
/// their place in it, so the order in which the tasks ran does not matter.
///
/// ```
/// use gpu_kernels as k;
///
/// # fn main() -> gpu::Result<()> {
/// let mut u = gpu::Buffer::<f32>::zeros(1 << 16)?;
/// let mut v = gpu::Buffer::<f32>::zeros(1 << 16)?;
/// let mut step = gpu::Graphed::new()?;
/// for _ in 0..10 {
///     step.scope(|s| {
///         s.spawn(|t| k::scale(t, &mut u, 0.5)); // two branches of one graph
///         s.spawn(|t| k::fill(t, &mut v, 1.0));
///         Ok(())
///     })?; // launched: one graph, built at the first run
/// }
/// let st = step.stats();
/// assert_eq!((st.builds, st.replays), (1, 9));
/// assert_eq!(v.to_vec()?[5], 1.0);
/// # Ok(()) }
/// ```
///
/// # Guarantees
///
/// What [`crate::scope`] guarantees, with these differences:
///
/// - Host code in the body (the tasks' control flow) runs at every run;
///   the GPU operations run when the body has returned, all of them or,
///   if the body or a task failed or panicked, none (the error or panic
///   reaches the caller; nothing was queued).
/// - The graph takes kernel launches (built-in and your own), device
///   copies within the device, `memset_zero` of whole words, and foreign
///   operations declared capture-safe: cuBLAS's calls (its reductions,
///   `dot` and `nrm2`, with a 4 MiB workspace of their own, a temporary
///   of the scope), cuFFT's and cuSPARSE's, and your own
///   (`Foreign::capture_safe`), each captured at every run into a child
///   graph node set in place, so the scalars it passes are each run's.
///   Sibling gemms of one shape become one batched call
///   ([`Graphed::batching`]).
/// - Allocations in the body (a temporary, a library's workspace) take
///   the memory the same allocation had in the last run, once its buffer
///   was dropped: the graph's pointers stay put. A buffer dropped in the
///   body goes back to the `Graphed`, which frees its memory when it is
///   dropped itself; one kept past the run is yours as any buffer (the
///   next run allocates anew).
/// - Everything else [`crate::capture`] refuses is refused here too (host
///   memory, records, synchronizes, gates, raw pointers), and so are
///   foreign operations not declared capture-safe (cuSOLVER's
///   factorizations: they report through a status word the host reads;
///   cuRAND's fills, whose
///   capture failed on an H100), collectives and peer copies: each is `Error::Capturing` before
///   anything is queued.
/// - Like a scope, it returns once the graph is launched, not run; later
///   work on its buffers is ordered after it.
/// - Work outside the scope that gets hold of a buffer the scope used
///   (through a lock, while the body still runs) gets `Error::Capturing`
///   for it: the graph that uses the buffer is not launched yet. A buffer
///   dropped in the body is freed after the graph.
/// - As with [`crate::capture`], only what goes through a [`Scope`] handle
///   joins the graph: a top-level [`crate::scope`], or another `Graphed`,
///   started inside a task of the body runs on its own, at once (and is
///   refused the buffers the body used, as outside work is).
pub struct Graphed {
    rt: Runtime,
    cache: GraphCache,
}

impl std::fmt::Debug for Graphed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graphed")
            .field("stats", &self.cache.stats())
            .finish_non_exhaustive()
    }
}

impl Graphed {
    /// A graphed scope on the global runtime (nothing is built until its
    /// first run).
    ///
    /// # Errors
    ///
    /// The global runtime's (no device, and the host backend refused).
    pub fn new() -> Result<Self> {
        Ok(Self::on(Runtime::global()?))
    }

    /// A graphed scope on `rt`.
    pub fn on(rt: &Runtime) -> Self {
        Graphed {
            rt: rt.clone(),
            cache: GraphCache::default(),
        }
    }

    /// Runs the body's tasks at their spawn, on the spawning thread, in
    /// program order, rather than as jobs of the pool (`serial` false is
    /// the default); a [`Scope::join`] runs `a`, then `b`, on the joining
    /// thread.
    ///
    /// In a graphed scope a task's host code only records its GPU
    /// operations: the graph overlaps them on the device whichever thread
    /// recorded them, so threads add hand-offs and no overlap. A body of
    /// many small tasks (B13's DAG of 10,000) records faster serially.
    /// Dependencies come from the tasks' structure and their buffers, so
    /// the graph is the one the threads would record, except where tasks
    /// that may run in either order share a buffer through a lock: threads
    /// may then record their two uses either way round, serially they are
    /// in program order.
    ///
    /// What changes is the order tasks run in, as in Rayon with one
    /// thread, but the other way round: a task runs before the code after
    /// its `spawn`, so a task must not wait on the host for anything that
    /// its spawner or a later sibling does after spawning it (a channel
    /// from a later task, a lock the spawner holds, a barrier across
    /// siblings): that deadlocks. A spawn nested more than 16 spawns deep
    /// (a task spawned from a task spawned from ...) is a job of the pool,
    /// so that the stack stays bounded, and its own spawns run at once on
    /// the thread that runs it: where a chain is that deep, the order past
    /// that level is not program order, and a task must not wait for an
    /// earlier sibling either.
    #[must_use]
    pub fn serial(mut self, serial: bool) -> Self {
        self.cache.set_serial(serial);
        self
    }

    /// Builds graphs with at most `lanes` chains of nodes side by side (0:
    /// no limit; 64 by default): each node also follows the last one of
    /// the lane it is put in, as if the work ran on `lanes` streams. A
    /// graph of many small independent kernels launches several times
    /// faster so (B13's 30,046 nodes on an H100: `cuGraphLaunch` 23 ms
    /// with no limit, 8 ms with 64 lanes). The cost: the added edges can
    /// make a node wait for one it does not depend on, which lengthens
    /// the graph's critical path where more than `lanes` nodes are ready
    /// at once. Applies to graphs built from then on (a cached graph
    /// replays as it was built until the shape changes).
    #[must_use]
    pub fn lanes(mut self, lanes: usize) -> Self {
        self.cache.set_lanes(lanes);
        self
    }

    /// Whether graphs built from now on merge sibling library calls into
    /// batched calls (on by default): independent calls of one routine
    /// with one shape that sibling tasks record (`gpu::blas::Gemm`, and
    /// any foreign operation declared `Foreign::batchable`) become one
    /// batched call (`cublasSgemmBatched`), which launches one kernel
    /// where the separate calls launch one each. cuBLAS does not promise
    /// the batched call the same rounding as the separate ones (it may
    /// choose other kernels); turn batching off where the graph must give
    /// the bits of the plain scope.
    #[must_use]
    pub fn batching(mut self, batching: bool) -> Self {
        self.cache.set_batching(batching);
        self
    }

    /// Runs `op` as a scope whose GPU operations are launched as one graph
    /// when it returns (see the type).
    ///
    /// # Errors
    ///
    /// The first error of the body or of a task (nothing is launched);
    /// `Error::Capturing` for what a graph cannot take; driver errors from
    /// building, updating or launching the graph (after a failed update the
    /// next run builds anew).
    ///
    /// # Panics
    ///
    /// Re-raises a task's panic, as [`crate::scope`] does (nothing is
    /// launched).
    pub fn scope<'scope, OP>(&mut self, op: OP) -> Result<()>
    where
        OP: FnOnce(&Scope<'_, 'scope>) -> Result<()> + Send,
    {
        let ctx = self.rt.begin_task()?;
        let r = ctx.graphed_scope(&mut self.cache, || run_scope(&ctx, op, Join::IfSubmitted));
        end_top_level(&ctx, r)
    }

    /// What the runs did so far: graphs built, replays, kernel nodes set
    /// in place.
    pub fn stats(&self) -> GraphStats {
        self.cache.stats()
    }
}
