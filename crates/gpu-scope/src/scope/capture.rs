//! `capture`: a scope recorded into one graph instead of run.

use super::{end_top_level, run_scope, Join, Scope};
use gpu_sched::{Graph, Result, Runtime};
#[allow(unused_imports)] // named by the docs
use {
    super::scope,
    gpu_sched::{Error, TaskContext},
};

/// Captures a scope into one graph instead of running it: the body and
/// every task it spawns (their spawns, joins and nested `s.scope`s too:
/// whatever goes through a [`Scope`] handle) submit into the graph, each operation ordered after its task's previous one, after its
/// spawner's work before the spawn, and after every earlier operation whose
/// buffers conflict with its own, as the tasks would have been on their own
/// streams. Nothing runs until the graph is launched, as often as wanted,
/// with [`TaskContext::launch_graph`], passing every buffer the scope
/// touched (`&` where it only read, `&mut` where it wrote): the launch is
/// one operation on the launching task's stream, ordered with everything
/// else through the buffers (R12). A repeated task graph then costs one
/// launch instead of one driver call per operation (B13).
///
/// Inside the capture nothing may touch host memory, allocate device
/// memory, synchronize or record an event (each is
/// [`Error::Capturing`]), and the tasks share one stream, so
/// [`RawTask::cu_stream`](crate::raw::RawTask::cu_stream) panics there. Host work in the tasks (their
/// control flow) runs once, now; only the GPU operations are replayed. A
/// task started otherwise inside a captured task (a top-level
/// [`scope`] or [`crate::join`], [`crate::with_task`], a plain Rayon job) is not
/// part of the capture: it runs at once, outside the graph.
///
/// # Guarantees
///
/// A capture is a scope (see [`scope`]), with these refused inside it, each a
/// typed error before anything is submitted:
///
/// | misuse | error | message (what to do) |
/// |---|---|---|
/// | a graph launch without a buffer the graph touches | `Error::BadKernelArgs` | "the graph writes 0x...; pass that buffer with .write(&mut buf)" |
/// | `host_sync_ptr` inside a capture | `Error::Capturing` | "taking a host-sync pointer is not allowed while work is being recorded into a graph (in a capture or a graphed scope); do it before or after the recording" |
/// | synchronizing a capturing stream | `Error::Capturing` | "synchronizing the stream is not allowed while ...; do it before or after the recording" |
/// | a record inside a capture (an event, or the fence of a `spawn` or `join`: another stream waiting on it would join the capture) | `Error::Capturing` | "recording an event is not allowed while work is being recorded into a graph (in a capture or a graphed scope); do it before or after the recording" |
/// | host memory in a capture (`copy_to_host`, `to_vec`, `copy_from_host`, staging copies, `memset_zero` of an odd byte count or offset) | `Error::Capturing` | "copying to host memory is not allowed while work is being recorded into a graph (in a capture or a graphed scope); do it before or after the recording" |
/// | in any capture (`TaskContext::capture`, `gpu::capture`): allocating (also a kernel's temporary, e.g. `inclusive_scan`), blocking on a gate, a nested capture | `Error::Capturing` | "allocating device memory (allocate before the recording) is not allowed while work is being recorded into a graph (in a capture or a graphed scope); do it before or after the recording" |
/// | in `gpu::capture`: `raw_ptr`, waiting outside it for a fence of its tasks | `Error::Capturing` | "taking a raw pointer in a scope capture (take it before the capture) is not allowed while ..." |
/// | a task of a `gpu::capture`, kept and used after the capture ended | `Error::CaptureEnded` | "this task joined a scope capture that has ended, so it submits nothing more; begin a new task" |
///
/// # Examples
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// use gpu_kernels as k;
/// let mut a = gpu::Buffer::<f32>::zeros(1024)?;
/// let mut b = gpu::Buffer::<f32>::zeros(1024)?;
/// let graph = gpu::capture(|s| {
///     s.spawn(|t| k::fill(t, &mut a, 1.0));
///     s.spawn(|t| k::fill(t, &mut b, 2.0));
///     Ok(())
/// })?;
/// for _ in 0..3 {
///     gpu::with_task(|t| t.launch_graph(&graph).write(&mut a).write(&mut b).submit())?;
/// }
/// assert_eq!(b.to_vec()?[7], 2.0);
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// The first error of the body or of a task (the capture is discarded);
/// [`Error::Capturing`] inside another capture; the runtime's errors.
///
/// # Panics
///
/// Re-raises a task's panic, as [`scope`] does (the capture is discarded).
pub fn capture<'scope, OP>(op: OP) -> Result<Graph>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<()> + Send,
{
    capture_on(Runtime::global()?, op)
}

/// [`capture`] on a given runtime.
///
/// # Errors
///
/// As [`capture`].
pub fn capture_on<'scope, OP>(rt: &Runtime, op: OP) -> Result<Graph>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<()> + Send,
{
    let ctx = rt.begin_task()?;
    let g = ctx.capture_scope(|| run_scope(&ctx, op, Join::IfSubmitted));
    end_top_level(&ctx, g)
}
