//! A scope whose device work is awaited: [`scope_async`], [`scope_on_async`].

use super::{run_scope, Join, Scope};
use gpu_sched::plumbing::TaskHooks;
use gpu_sched::{Fence, Result, Runtime};

/// [`crate::scope`] for async code: the scope's host part runs when the
/// future is first polled, on the polling thread (the body and the tasks
/// it spawns queue their work, as in [`crate::scope`]); the future then
/// completes once the device has run all of that work, without blocking
/// the polling thread (it awaits the scope's final [`Fence`]: see
/// [`gpu_sched::FenceFuture`] for how it is woken). The results of the
/// scope's library operations (a factorization's failure) are checked
/// then, as [`crate::scope`] checks them at its end: its error is returned
/// when the body succeeded.
///
/// So after `scope_async(..).await` the host may read, through raw
/// pointers or foreign libraries, what the scope wrote, and a latency
/// measured around it includes the device's work. (With
/// [`crate::scope`], later work is ordered after the scope's through the
/// buffers, and the scope returns as soon as its host part is done.)
///
/// The host part does not yield: a body that computes long on the CPU
/// holds the polling thread as long (use the executor's blocking pool for
/// such a body, e.g. tokio's `spawn_blocking`).
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// use gpu_kernels as k;
/// let mut a = gpu::Buffer::<f32>::zeros(1024)?;
/// let work = gpu::scope_async(|s| {
///     s.spawn(|t| k::fill(t, &mut a, 2.0));
///     Ok(())
/// });
/// # let _ = work;
/// // work.await?; // in an async fn: the fill is done on the device
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// As [`crate::scope`]; a failed wait for the device (a driver error).
/// When the final fence cannot be recorded the scope's unchecked results
/// are deferred to the runtime's next [`Runtime::synchronize`] (never
/// lost, never waited for here).
pub async fn scope_async<'scope, OP, R>(op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R> + Send,
    R: Send,
{
    let rt = Runtime::global()?;
    scope_on_async(rt, op).await
}

/// [`scope_async`] on a given runtime.
///
/// # Errors
///
/// As [`scope_async`].
pub async fn scope_on_async<'scope, OP, R>(rt: &Runtime, op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R> + Send,
    R: Send,
{
    let (r, fence) = run_fenced(rt, op);
    // The checks run also after the body's error, which comes first (as
    // `end_top_level`).
    let checked = match fence {
        Ok(Some(f)) => f.await,
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    let r = r?;
    checked?;
    Ok(r)
}

/// The scope's host part: its result, and a fence after all of its work
/// (its task's stream waits for every task it spawned) that carries the
/// results of its library operations (none when no task began).
fn run_fenced<'scope, OP, R>(rt: &Runtime, op: OP) -> (Result<R>, Result<Option<Fence>>)
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R>,
{
    let ctx = match rt.begin_task() {
        Ok(ctx) => ctx,
        Err(e) => return (Err(e), Ok(None)),
    };
    // `Join::Always`: the scope's stream waits for each task's final fence
    // (and takes its results over), so its own final fence covers them all.
    let r = run_scope(&ctx, op, Join::Always);
    ctx.runtime().trace_flush();
    // Without a fence, the results stay with the task, whose drop defers
    // them to the runtime's reclaim path (no wait here).
    (r, ctx.final_fence().map(Some))
}
