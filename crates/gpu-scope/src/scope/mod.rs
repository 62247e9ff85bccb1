//! `scope`, `spawn` and `capture` (the chunk iterators, `crate::iter`, run
//! their chunks as the tasks of a scope of this module; `crate::join` is a
//! scope of two sides).

use crate::registry;
use gpu_sched::{CaptureHandle, Error, Fence, Graph, Result, Runtime, TaskContext};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

mod state;
#[cfg(test)]
mod test;

pub(crate) use state::ScopeState;
use state::{lock, Job, JobBody};

/// The fences a spawned task is ordered after.
pub(crate) type Fences = smallvec::SmallVec<[Fence; 1]>;

/// A spawned task's life: a stream of its own, ordered after the spawn's
/// fence; the body; a final fence for the joiner.
fn run_child<'scope, F>(
    rt: &Runtime,
    cap: &CaptureHandle,
    state: &'scope ScopeState,
    rayon: Option<&rayon_core::Scope<'scope>>,
    fences: Fences,
    f: F,
) where
    F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()>,
{
    let ctx = match rt.begin_task_in(cap) {
        Ok(c) => c,
        Err(e) => return state.fail(e),
    };
    // Waited for on the device when the task binds a stream (its first GPU
    // operation); a task that submits nothing takes no stream (§9).
    for fence in fences {
        if let Err(e) = ctx.after_fence(fence) {
            return state.fail(e);
        }
    }
    let s = Scope {
        ctx: &ctx,
        state,
        rayon,
        _invariant: std::marker::PhantomData,
    };
    match catch_unwind(AssertUnwindSafe(|| f(&s))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => state.fail(e),
        Err(p) => state.panicked(p),
    }
    hand_over_final(&ctx, state);
}

/// A task's end: what its joiner must be ordered after goes to the scope's
/// state. A task that submitted hands a fence of its stream; one that did
/// not hands the fences it was itself to wait for (its nested scopes'
/// tasks', §9), which would otherwise go with it.
pub(crate) fn hand_over_final(ctx: &TaskContext, state: &ScopeState) {
    if !ctx.has_submitted() {
        match ctx.fences_for_child() {
            Ok(fences) => {
                for f in fences {
                    state.push_final(f);
                }
            }
            Err(e) => state.fail(e),
        }
        return;
    }
    match ctx.fence() {
        Ok(fin) => state.push_final(fin),
        Err(e) => {
            // Without a final fence the joiner cannot order after this
            // task: wait here so nothing is left running.
            let _ = ctx.synchronize();
            state.fail(e)
        }
    }
}

/// A scope's handle inside one task: submit GPU work through it (it
/// dereferences to the task's [`TaskContext`]) and spawn tasks into the
/// scope.
///
/// ```
/// use gpu_kernels as k;
/// # fn main() -> gpu::Result<()> {
/// let (mut a, mut b) = (gpu::Buffer::<f32>::zeros(64)?, gpu::Buffer::<f32>::zeros(64)?);
/// gpu::scope(|s| {
///     k::fill(s, &mut a, 1.0)?; // this task's work, on its stream
///     s.spawn(|t| k::fill(t, &mut b, 2.0)); // a sibling, on a stream of its own
///     Ok(())
/// })?; // both done (on the device) before later work
/// assert_eq!(b.to_vec()?[0], 2.0);
/// # Ok(()) }
/// ```
pub struct Scope<'r, 'scope> {
    ctx: &'r TaskContext,
    state: &'scope ScopeState,
    /// On a worker thread of the pool: the Rayon scope that spawns go to
    /// (Rayon's jobs and its wait, which runs them while it waits).
    rayon: Option<&'r rayon_core::Scope<'scope>>,
    /// Makes `'scope` invariant: a spawned task's borrows must last for the
    /// whole scope, not for a shorter lifetime the compiler could pick.
    _invariant: std::marker::PhantomData<&'scope mut &'scope ()>,
}

impl<'r, 'scope> Scope<'r, 'scope> {
    /// The handle of a join's side on `ctx` (`crate::join`): its spawns go
    /// to `state`, the join's, with no Rayon scope.
    #[inline]
    pub(crate) fn of_side(ctx: &'r TaskContext, state: &'scope ScopeState) -> Self {
        Scope {
            ctx,
            state,
            rayon: None,
            _invariant: std::marker::PhantomData,
        }
    }

    /// The task this handle is on.
    #[inline]
    pub(crate) fn task(&self) -> &'r TaskContext {
        self.ctx
    }
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").field("task", self.ctx).finish()
    }
}

impl std::ops::Deref for Scope<'_, '_> {
    type Target = TaskContext;
    fn deref(&self) -> &TaskContext {
        self.ctx
    }
}

/// Creates a scope: `op` runs as a task on a stream of its own, may spawn
/// tasks that borrow from the enclosing stack frame, and the scope returns
/// once every task has returned. Later work on the buffers the tasks used is
/// ordered after their GPU work (through the buffers' stamps, as anywhere).
/// If `op` submitted work of its own, its stream waits on the device for
/// every task before its task ends; if it did not, that would order nothing
/// and is skipped.
///
/// A spawned task is ordered after the work its spawner submitted *before*
/// the spawn, and overlaps what the spawner submits afterwards. The order in
/// which sibling tasks run, on the host and on the device, is not
/// specified.
///
/// `op` runs on the calling thread, also from outside every pool (there
/// Rayon's `scope` moves its body to a worker; this is Rayon's
/// `in_place_scope`), so a body that blocks on its tasks holds no worker.
/// On a worker, the tasks run on that pool's workers (the scope's end runs
/// those no other worker took, as Rayon's does).
///
/// **Unlike Rayon**, from outside every pool the tasks are jobs of the
/// global pool and the scope's end runs, on the calling thread, those no
/// worker has started yet (the thread would only block): a scope of one
/// small task then costs no thread wake-up. Measured on the H200 (B8, a
/// spawn + join of one launch from outside the pool): 6.7 us this way,
/// 20.4 us with every task on a worker. Such a task may run on the
/// calling thread: it sees that thread's thread-locals, and
/// `current_thread_index()` is `None` in it. Call the scope inside
/// [`crate::ThreadPool::install`] (or from a task) for Rayon's placement.
///
/// # Panics
///
/// If a task panics, the first panic is re-raised here once every task has
/// returned and all their GPU work has finished (which panic is "first"
/// among concurrent ones is not specified).
///
/// # Errors
///
/// The first error a task returned (after all GPU work finished, as for
/// panics); the runtime's start error.
///
/// # Examples
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let mut out = vec![0usize; 4];
/// gpu::scope(|s| {
///     for (i, o) in out.iter_mut().enumerate() {
///         s.spawn(move |_t| {
///             *o = i * 2;
///             Ok(())
///         });
///     }
///     Ok(())
/// })?;
/// assert_eq!(out, [0, 2, 4, 6]);
/// # Ok(()) }
/// ```
///
/// A task cannot outlive its scope: it cannot borrow what the scope's body
/// owns, since the body returns before its tasks finish:
///
/// ```compile_fail
/// gpu::scope(|s| {
///     let local = vec![1.0f32; 8];
///     s.spawn(|_t| {
///         let _ = local.len(); // error: `local` does not live long enough
///         Ok(())
///     });
///     Ok(())
/// }).unwrap();
/// ```
///
/// Two tasks cannot write one buffer:
///
/// ```compile_fail
/// let mut a = gpu::Buffer::<f32>::zeros(8).unwrap();
/// gpu::scope(|s| {
///     s.spawn(|t| t.memset_zero(&mut a));
///     s.spawn(|t| t.memset_zero(&mut a));
///     Ok(())
/// }).unwrap();
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R> + Send,
    R: Send,
{
    let rt = Runtime::global()?;
    scope_on(rt, op)
}

/// [`scope`] whose body need not be `Send` (Rayon's `in_place_scope`): the
/// body runs on the calling thread, as every `gpu` scope's body does; the
/// spawned tasks run on the pool's workers (from outside every pool, the
/// global pool's, or the calling thread, as for [`scope`]).
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let not_send = std::rc::Rc::new(5);
/// let mut out = 0;
/// gpu::in_place_scope(|s| {
///     let v = *not_send;
///     s.spawn(|_t| {
///         out = 2 * 21;
///         Ok(())
///     });
///     assert_eq!(v, 5);
///     Ok(())
/// })?;
/// assert_eq!(out, 42);
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// As [`scope`].
pub fn in_place_scope<'scope, OP, R>(op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R>,
{
    top_level_scope(Runtime::global()?, op)
}

/// A scope of a task of its own on `rt`, its body on this thread.
fn top_level_scope<'scope, OP, R>(rt: &Runtime, op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R>,
{
    let ctx = rt.begin_task()?;
    let r = run_scope(&ctx, op, Join::IfSubmitted);
    rt.trace_flush();
    r
}

/// [`scope`] on a given runtime.
///
/// # Errors
///
/// As [`scope`].
pub fn scope_on<'scope, OP, R>(rt: &Runtime, op: OP) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R> + Send,
    R: Send,
{
    top_level_scope(rt, op)
}

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
/// [`TaskContext::cu_stream`] panics there. Host work in the tasks (their
/// control flow) runs once, now; only the GPU operations are replayed. A
/// task started otherwise inside a captured task (a top-level
/// [`scope`] or [`join`], [`crate::with_task`], a plain Rayon job) is not
/// part of the capture: it runs at once, outside the graph.
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
    rt.trace_flush();
    g
}

/// Whether a scope's task waits on the device for its tasks' final fences.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    /// Always: the task goes on (a nested scope, `Scope::join`) or restamps
    /// buffers after the join (the chunk iterators, `crate::iter`).
    Always,
    /// Only if the task submitted work of its own: the task of a top-level
    /// scope ends with the scope, and a stream that ends with nothing after
    /// the waits would only carry them to whoever takes it next. The tasks'
    /// work still orders later users of their buffers through the stamps.
    IfSubmitted,
}

pub(crate) fn run_scope<'scope, OP, R>(ctx: &TaskContext, op: OP, join: Join) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R>,
{
    run_scope_with(ctx, op, join, false)
}

/// [`run_scope`]; with `op_panic_wins`, a panic of `op` is re-raised
/// rather than an earlier one of a task (`join`'s `a` over `b`).
pub(crate) fn run_scope_with<'scope, OP, R>(
    ctx: &TaskContext,
    op: OP,
    join: Join,
    op_panic_wins: bool,
) -> Result<R>
where
    OP: FnOnce(&Scope<'_, 'scope>) -> Result<R>,
{
    // A scope nested too deep on a worker's stack is refused (elsewhere
    // nothing is checked).
    registry::check_stack()?;
    let state = ScopeState::default();
    // On a worker, spawns are jobs of a Rayon scope, whose end runs the ones
    // no other worker took (Rayon's "help while you wait"). From outside
    // every pool they are jobs of the global pool, and the scope's end runs
    // here those no worker has started (this thread would only block): a
    // scope of one small task then costs no thread wake-up (B8, spawn +
    // join of one launch from outside the pool, on the H200: 6.7 us this
    // way, 20.4 us with every task on a worker as Rayon does). The
    // difference from Rayon is documented on `scope`: such a task may see
    // the caller's thread-locals, and `current_thread_index()` is `None`
    // in it.
    let caught = if registry::on_worker() {
        rayon_core::in_place_scope(|rs| {
            let s = Scope {
                ctx,
                state: extend(&state),
                rayon: Some(rs),
                _invariant: std::marker::PhantomData,
            };
            catch_unwind(AssertUnwindSafe(|| op(&s)))
        })
    } else {
        let s = Scope {
            ctx,
            state: extend(&state),
            rayon: None,
            _invariant: std::marker::PhantomData,
        };
        catch_unwind(AssertUnwindSafe(|| op(&s)))
    };
    let result = match caught {
        Ok(Ok(r)) => Some(r),
        Ok(Err(e)) => {
            state.fail(e);
            None
        }
        Err(p) if op_panic_wins => {
            state.panicked_first(p);
            None
        }
        Err(p) => {
            state.panicked(p);
            None
        }
    };
    state.end(ctx, join)?;
    result.ok_or(Error::TaskPanicked)
}

/// Widens the state reference to the scope's lifetime.
pub(crate) fn extend<'scope>(s: &ScopeState) -> &'scope ScopeState {
    // SAFETY: the scope's owner keeps the state alive until every job
    // spawned into the scope (the only holders of `'scope` references) has
    // finished: `wait_all` has returned, or the Rayon scope the jobs were
    // spawned into has ended (it returns only after all its jobs), or
    // `rayon_core::join` has returned (after both sides).
    unsafe { &*(s as *const ScopeState) }
}

/// Erases a job body's lifetime so a worker thread can hold it.
fn erase<'scope>(body: Box<dyn FnOnce() + Send + 'scope>) -> JobBody {
    // SAFETY: the body runs (on a worker or inline) before its scope's
    // `wait_all` returns, and is dropped when it runs; a worker that comes
    // later finds the `Job` empty. So nothing borrowed for `'scope` is used
    // after `'scope` ends; only the lifetime in the type is widened.
    unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'scope>, JobBody>(body) }
}

impl<'r, 'scope> Scope<'r, 'scope> {
    /// Spawns a task into the scope. It runs on a worker thread with a
    /// stream of its own, ordered on the device after the work this task
    /// submitted so far (R8), and overlapping what this task does next.
    ///
    /// The task's error or panic is kept and reported by the scope.
    pub fn spawn<F>(&self, f: F)
    where
        F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()> + Send + 'scope,
    {
        self.spawn_in(self.ctx.runtime().clone(), f)
    }

    /// [`Scope::spawn`] with the task placed on device `device` of the
    /// runtime's group (§11): its stream and the buffers it allocates are
    /// that device's. It is ordered after this task's work on the device
    /// (a wait on this device's event), and the scope's end after its
    /// work, as for any spawn. Buffers of another device passed to its
    /// kernels are refused ([`gpu_sched::Error::WrongDevice`]): copy them
    /// with [`TaskContext::copy_peer`]. Tasks spawned from it stay on its
    /// device unless placed too.
    ///
    /// An error opening the device is the scope's.
    pub fn spawn_on<F>(&self, device: usize, f: F)
    where
        F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()> + Send + 'scope,
    {
        match self.ctx.runtime().device(device) {
            Ok(rt) => self.spawn_in(rt, f),
            Err(e) => self.state.fail(e),
        }
    }

    /// The device ordinal of this task's runtime.
    pub fn device(&self) -> usize {
        self.ctx.runtime().ordinal()
    }

    /// How many devices the runtime's group has (see
    /// [`Runtime::device_count`]).
    pub fn device_count(&self) -> usize {
        self.ctx.runtime().device_count()
    }

    fn spawn_in<F>(&self, rt: Runtime, f: F)
    where
        F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()> + Send + 'scope,
    {
        // A fence of the spawner's work if it submitted any, else the
        // fences it is itself ordered after (none for a task that has
        // nothing to order a child after).
        let fences = match self.ctx.fences_for_child() {
            Ok(f) => f,
            Err(e) => return self.state.fail(e),
        };
        let state = self.state;
        // The child joins the spawner's scope capture, if any.
        let cap = self.ctx.capture_handle();
        if let Some(rs) = self.rayon {
            // A job of the Rayon scope, which runs it (on a worker, or on
            // the scope's thread while it waits) and waits for it.
            state.touch();
            rs.spawn(move |rs| {
                // The task's own panic is caught inside; this catches one
                // from the runtime around it.
                let run = AssertUnwindSafe(|| run_child(&rt, &cap, state, Some(rs), fences, f));
                if let Err(p) = catch_unwind(run) {
                    state.panicked(p);
                }
            });
            return;
        }
        let body = move || {
            // The task's own panic is caught inside; this catches one from
            // the runtime around it, so the count always drops.
            let run = AssertUnwindSafe(|| run_child(&rt, &cap, state, None, fences, f));
            if let Err(p) = catch_unwind(run) {
                state.panicked(p);
            }
            state.job_finished();
        };
        state.touch();
        state.outstanding.fetch_add(1, Ordering::AcqRel);
        let job = Arc::new(Job {
            body: Mutex::new(Some(erase(Box::new(body)))),
        });
        lock(&state.more().pending).push(job.clone());
        let run = move || {
            if let Some(body) = job.take() {
                body();
            }
        };
        // The pool this thread works for, as Rayon's spawns from a join
        // side (a join side has no Rayon scope: see `join_in_worker`);
        // the global pool from outside every pool.
        if registry::on_worker() {
            rayon_core::spawn(run);
        } else {
            registry::global().spawn(run);
        }
    }

    /// A nested scope on this task's stream: its tasks are ordered after
    /// this task's work so far (and, through X1, after what this task was
    /// ordered after), and this task continues ordered after all of them.
    ///
    /// # Errors
    ///
    /// As [`scope`].
    pub fn scope<'inner, OP, R>(&self, op: OP) -> Result<R>
    where
        OP: FnOnce(&Scope<'_, 'inner>) -> Result<R>,
    {
        run_scope(self.ctx, op, Join::Always)
    }
}
