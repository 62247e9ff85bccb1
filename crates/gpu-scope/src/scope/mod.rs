//! `scope`, `spawn` and `join` (the chunk iterators, `crate::iter`, run
//! their chunks as the tasks of a scope of this module).

use crate::registry;
use gpu_sched::{CaptureHandle, Error, Fence, Graph, Result, Runtime, TaskContext};
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[cfg(test)]
mod test;

/// The fences a spawned task is ordered after.
type Fences = smallvec::SmallVec<[Fence; 1]>;

/// A spawned task's body, taken by whoever runs it first: a worker thread,
/// or the scope's own thread when it reaches the end of the scope first.
type JobBody = Box<dyn FnOnce() + Send + 'static>;

/// Locks `m`, ignoring poisoning: each critical section here is one take,
/// pop, push or store, never a task's body, so the data is whole even when a
/// panic passed through it (`finish` re-raises a task's panic holding the
/// `panic` lock), and a scope whose task panicked still joins the others.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Job {
    body: Mutex<Option<JobBody>>,
}

impl Job {
    fn take(&self) -> Option<JobBody> {
        lock(&self.body).take()
    }
}

/// What a scope collects from its tasks: their final fences, and the first
/// panic or error; and the tasks not finished yet.
#[derive(Default)]
struct ScopeState {
    /// Jobs spawned and not finished.
    outstanding: AtomicUsize,
    /// The scope's thread sleeps on `wake` (set and cleared under
    /// `finished`): only then does a finishing job notify, which costs a
    /// system call.
    sleeping: std::sync::atomic::AtomicBool,
    /// Set by anything that leaves work for the end of the scope (a spawn,
    /// a final fence, an error, a panic): a scope with none ends with one
    /// load (a `join` of two tasks with no GPU work, Rayon's common case).
    touched: std::sync::atomic::AtomicBool,
    /// The rest, made at its first use: a join that leaves nothing for its
    /// end makes none, and keeps a few words on its stack rather than
    /// all of it (a chain of joins keeps one state a level).
    more: std::sync::OnceLock<Box<Collected>>,
}

/// The part of a [`ScopeState`] made at its first use.
#[derive(Default)]
struct Collected {
    finals: Mutex<Vec<Fence>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    error: Mutex<Option<Error>>,
    /// Spawned jobs, possibly not started.
    pending: Mutex<Vec<Arc<Job>>>,
    finished: Mutex<()>,
    wake: Condvar,
}

impl ScopeState {
    /// The collected part, made if this is its first use.
    fn more(&self) -> &Collected {
        self.more.get_or_init(Default::default)
    }

    /// The last touch of the state by a job. The count drops under the
    /// lock, and `wait_all` returns only while holding that lock, so the
    /// scope (and this state, on its stack) cannot end before this job has
    /// let go of the lock: nothing of the state is used after it is gone.
    fn job_finished(&self) {
        let more = self.more();
        let _g = lock(&more.finished);
        if self.outstanding.fetch_sub(1, Ordering::AcqRel) == 1
            && self.sleeping.load(Ordering::Relaxed)
        {
            more.wake.notify_all();
        }
    }

    /// Returns once every job spawned into the scope has finished, running
    /// the ones no worker has started yet on this thread (rayon's "help
    /// while you wait"): each still takes a stream of its own. Only jobs
    /// spawned from a join's sides are listed here, and only on a worker
    /// (see `Scope::spawn_in`), so this thread is a worker of their pool.
    fn wait_all(&self) {
        // A spawn makes the collected part before it counts its job: with
        // none, nothing was spawned.
        let Some(more) = self.more.get() else {
            debug_assert_eq!(self.outstanding.load(Ordering::Acquire), 0);
            return;
        };
        loop {
            let next = lock(&more.pending).pop();
            if let Some(job) = next {
                if let Some(body) = job.take() {
                    body();
                }
                continue;
            }
            // A job a worker took is usually short: spin a little before
            // sleeping, so its end costs no futex wake-up on this thread.
            let spin_until = std::time::Instant::now() + Duration::from_micros(50);
            while self.outstanding.load(Ordering::Acquire) != 0
                && std::time::Instant::now() < spin_until
                && more.pending.lock().map_or(true, |p| p.is_empty())
            {
                std::hint::spin_loop();
            }
            let g = lock(&more.finished);
            if self.outstanding.load(Ordering::Acquire) == 0 {
                return;
            }
            // A running job may spawn more into this scope: look again soon.
            self.sleeping.store(true, Ordering::Relaxed);
            let (g, _) = more
                .wake
                .wait_timeout(g, Duration::from_micros(200))
                .unwrap_or_else(|p| p.into_inner());
            self.sleeping.store(false, Ordering::Relaxed);
            drop(g);
        }
    }

    fn touch(&self) {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
    }

    /// Whether nothing was left for the end of the scope. Read by the
    /// scope's thread after every task it ran returned; a task run by
    /// another thread touched the state before it was counted done, so a
    /// spawned task (which counts) is seen through `outstanding`.
    fn untouched(&self) -> bool {
        !self.touched.load(Ordering::Acquire) && self.outstanding.load(Ordering::Acquire) == 0
    }

    fn fail(&self, e: Error) {
        self.touch();
        let mut g = lock(&self.more().error);
        if g.is_none() {
            *g = Some(e);
        }
    }

    fn panicked(&self, p: Box<dyn Any + Send>) {
        self.touch();
        let mut g = lock(&self.more().panic);
        if g.is_none() {
            *g = Some(p);
        }
    }

    /// `join`'s `a` panicked: its panic is the one re-raised, whichever came
    /// first (as Rayon's `join` does).
    fn panicked_first(&self, p: Box<dyn Any + Send>) {
        self.touch();
        *lock(&self.more().panic) = Some(p);
    }

    fn push_final(&self, f: Fence) {
        self.touch();
        lock(&self.more().finals).push(f);
    }

    fn finals(&self) -> Vec<Fence> {
        match self.more.get() {
            Some(more) => std::mem::take(&mut *lock(&more.finals)),
            None => Vec::new(),
        }
    }

    /// Orders `ctx` after every task of the scope: a device wait on each
    /// final fence when all went well (when `ctx` binds a stream, if it has
    /// none yet: §9); a host wait for each when a task failed, so the
    /// failure surfaces after every sibling's GPU work.
    fn join_into(&self, ctx: &TaskContext, failed: bool) -> Result<()> {
        let mut first = None;
        for f in self.finals() {
            let r = if failed {
                f.synchronize()
            } else {
                ctx.after_fence(f)
            };
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        if failed && ctx.has_stream() {
            if let Err(e) = ctx.synchronize() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn failed(&self) -> bool {
        self.more
            .get()
            .is_some_and(|m| lock(&m.panic).is_some() || lock(&m.error).is_some())
    }

    /// The end of a scope whose body returned: waits for every task, orders
    /// `ctx` after their GPU work (see [`Join`]), then re-raises the first
    /// panic or returns the first error.
    fn end(&self, ctx: &TaskContext, join: Join) -> Result<()> {
        self.wait_all();
        let failed = self.failed();
        if failed || join == Join::Always || ctx.has_submitted() {
            if let Err(e) = self.join_into(ctx, failed) {
                self.fail(e);
            }
        } else {
            // The fences' events go back to the pool; their records stand.
            drop(self.finals());
        }
        self.finish()
    }

    /// The end of a join whose side's panic unwinds through it: waits for
    /// every task spawned into it, then on the host for their and `b`'s GPU
    /// work and `ctx`'s, so the panic surfaces after all of it. The panic
    /// going on is the one re-raised; what the tasks reported is dropped
    /// with the state.
    #[cold]
    #[inline(never)]
    fn end_unwinding(&self, ctx: &TaskContext) {
        self.wait_all();
        let _ = self.join_into(ctx, true);
    }

    /// Re-raises the first panic, else returns the first error.
    fn finish(&self) -> Result<()> {
        let Some(more) = self.more.get() else {
            return Ok(());
        };
        if let Some(p) = lock(&more.panic).take() {
            resume_unwind(p);
        }
        match lock(&more.error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

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
fn hand_over_final(ctx: &TaskContext, state: &ScopeState) {
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
fn run_scope_with<'scope, OP, R>(
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
fn extend<'scope>(s: &ScopeState) -> &'scope ScopeState {
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

    /// Runs `a` on this task and `b` as a spawned task, and returns both
    /// results once both returned, this task ordered after `b`'s GPU work.
    ///
    /// # Errors
    ///
    /// The first error of either.
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> Result<(RA, RB)>
    where
        A: FnOnce(&Scope<'_, '_>) -> Result<RA>,
        B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB> + Send,
        RB: Send,
    {
        if registry::on_worker() {
            join_in_worker(self.ctx, a, b, Join::Always)
        } else {
            join_off_worker(self.ctx, a, b, Join::Always)
        }
    }
}

/// A value that `rayon_core::join` requires to be `Send` but that never
/// leaves the calling thread: `join`'s `a` side.
struct Here<T>(T);

// SAFETY: only used for `rayon_core::join`'s first operand (it holds a
// reference to the join's `a` side: the joining task's context, which is
// not `Sync`, and `a`, which need not be `Send`), and only on a worker
// thread of a pool, where rayon runs that operand on the calling thread
// (rayon-core's `join_context`: `oper_a` runs inside `in_worker` on the
// current worker thread; only `oper_b` may be stolen). So the value is
// never used from another thread.
unsafe impl<T> Send for Here<T> {}

/// Hands a task's final over to its joiner when it ends, by returning or
/// by a panic unwinding through it (`join`'s `b`): a guard, not a
/// `catch_unwind`, which would cost stack at every level of a chain.
struct HandOver<'a> {
    ctx: &'a TaskContext,
    state: &'a ScopeState,
}

impl Drop for HandOver<'_> {
    fn drop(&mut self) {
        hand_over_final(self.ctx, self.state);
    }
}

/// While armed, a panic of a join side unwinding through the join (Rayon
/// re-raises it once both sides returned) first waits for what the join
/// must wait for: the tasks spawned from its sides, and their and `b`'s GPU
/// work (as a scope's end does when a task failed). Disarmed (forgotten)
/// when the sides returned.
struct EndOnUnwind<'a> {
    ctx: &'a TaskContext,
    state: &'a ScopeState,
}

impl Drop for EndOnUnwind<'_> {
    fn drop(&mut self) {
        self.state.end_unwinding(self.ctx);
    }
}

/// `join`'s `b` task: a [`TaskContext`] of its own (a stream only if it
/// submits GPU work), ordered after `fences`. Not generic, so none of it is
/// repeated in the frames of each `b`. A failure is the join's (its end returns it), so the caller's frame
/// keeps no error of its own.
#[inline(never)]
fn begin_join_b(
    rt: &Runtime,
    cap: &CaptureHandle,
    fences: Fences,
    state: &ScopeState,
) -> Option<TaskContext> {
    let begun = rt.begin_task_in(cap).and_then(|ctx| {
        for fence in fences {
            ctx.after_fence(fence)?;
        }
        Ok(ctx)
    });
    begun.map_err(|e| state.fail(e)).ok()
}

/// `join`'s `a` side as `rayon_core::join` runs it: the closure given to
/// Rayon holds only a reference to this (in the join's frame) and returns
/// nothing, so Rayon's frames, at every level of a chain, stay as small as
/// for a join of Rayon's own.
struct SideA<'a, A, RA> {
    ctx: &'a TaskContext,
    state: &'a ScopeState,
    a: Option<A>,
    out: Option<Result<RA>>,
}

impl<A, RA> SideA<'_, A, RA>
where
    A: FnOnce(&Scope<'_, '_>) -> Result<RA>,
{
    fn run(&mut self) {
        if let Some(a) = self.a.take() {
            self.out = Some(a(&Scope {
                ctx: self.ctx,
                state: self.state,
                rayon: None,
                _invariant: std::marker::PhantomData,
            }));
        }
    }
}

/// `join`'s `b` side, as [`SideA`]: a task of its own, ordered after
/// `fences`; its final fence goes to the join's state when it returns or
/// panics (then before the panic reaches the join, so the join's end waits
/// for `b`'s GPU work).
struct SideB<'a, B, RB> {
    rt: &'a Runtime,
    cap: CaptureHandle,
    state: &'a ScopeState,
    fences: Fences,
    b: Option<B>,
    out: Option<Result<RB>>,
}

impl<B, RB> SideB<'_, B, RB>
where
    B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB>,
{
    fn run(&mut self) {
        let Some(b) = self.b.take() else { return };
        let fences = std::mem::take(&mut self.fences);
        // Matched by reference: the context is not moved into a slot of
        // its own (a debug build keeps every such copy on the stack).
        let task = begin_join_b(self.rt, &self.cap, fences, self.state);
        let Some(ctx) = &task else { return };
        let _hand_over = HandOver {
            ctx,
            state: self.state,
        };
        self.out = Some(b(&Scope {
            ctx,
            state: self.state,
            rayon: None,
            _invariant: std::marker::PhantomData,
        }));
    }
}

/// What a join does before its sides run (not generic): refuses a level
/// that would start too close to the end of a worker's stack, and takes
/// the fences `b` is ordered after.
#[inline(never)]
fn join_prelude(ctx: &TaskContext) -> Result<Fences> {
    registry::check_stack()?;
    ctx.fences_for_child()
}

/// `join` on a worker thread of a pool: rayon's own `join` (a job on the
/// stack, `b` run here when no worker steals it), with `b` a task of its
/// own. Spawns from either side go to one scope, run on this pool and
/// waited for before the join returns; `a`'s panic wins, then `b`'s, as in
/// Rayon (whose `join` re-raises it after both sides returned).
///
/// A chain of joins recursing in a side runs on one worker's stack, so
/// what a level keeps there is kept small: no `catch_unwind` (guards
/// instead), the sides' closures and results moved as little as possible,
/// the rest in functions that are not generic or not on the way down.
fn join_in_worker<A, B, RA, RB>(ctx: &TaskContext, a: A, b: B, join: Join) -> Result<(RA, RB)>
where
    A: FnOnce(&Scope<'_, '_>) -> Result<RA>,
    B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB> + Send,
    RB: Send,
{
    let fences = join_prelude(ctx)?;
    let state = ScopeState::default();
    let st = extend(&state);
    let mut side_a = SideA {
        ctx,
        state: st,
        a: Some(a),
        out: None,
    };
    let mut side_b = SideB {
        rt: ctx.runtime(),
        // `b` joins this task's scope capture, if any.
        cap: ctx.capture_handle(),
        state: st,
        fences,
        b: Some(b),
        out: None,
    };
    let guard = EndOnUnwind { ctx, state: st };
    let run_a = Here(&mut side_a);
    let run_b = &mut side_b;
    rayon_core::join(
        move || {
            // The whole `Here` moves in, not only its field (which is not
            // `Send`).
            let run_a = run_a;
            run_a.0.run()
        },
        move || run_b.run(),
    );
    std::mem::forget(guard);
    finish_join(side_a.out, side_b.out, &state, ctx, join)
}

/// A join's end, once both sides returned (not on the way down a chain of
/// joins: a frame of its own, called after the sides): nothing to do when
/// nothing touched the state (no spawn, no GPU work to join, no failure),
/// else the end of a scope.
#[inline(never)]
fn finish_join<RA, RB>(
    ra: Option<Result<RA>>,
    rb: Option<Result<RB>>,
    state: &ScopeState,
    ctx: &TaskContext,
    join: Join,
) -> Result<(RA, RB)> {
    match (ra, rb) {
        (Some(Ok(ra)), Some(Ok(rb))) if state.untouched() => Ok((ra, rb)),
        (ra, rb) => {
            // `a`'s error first: the state keeps the first.
            let ra = ra.and_then(|r| r.map_err(|e| state.fail(e)).ok());
            let rb = rb.and_then(|r| r.map_err(|e| state.fail(e)).ok());
            state.end(ctx, join)?;
            // Both are `Some` here: an error of either was returned by `end`.
            ra.zip(rb).ok_or(Error::TaskPanicked)
        }
    }
}

/// `Scope::join` from outside every pool (in a scope's body there): `b`
/// a spawned task, on the global pool. A frame of its own, so a chain of
/// joins on a worker does not carry its locals.
#[inline(never)]
fn join_off_worker<A, B, RA, RB>(ctx: &TaskContext, a: A, b: B, join: Join) -> Result<(RA, RB)>
where
    A: FnOnce(&Scope<'_, '_>) -> Result<RA>,
    B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB> + Send,
    RB: Send,
{
    let mut rb = None;
    let ra = run_scope_with(
        ctx,
        |s| {
            let slot = &mut rb;
            s.spawn(move |t| {
                *slot = Some(b(t)?);
                Ok(())
            });
            a(s)
        },
        join,
        true,
    )?;
    Ok((ra, rb.ok_or(Error::TaskPanicked)?))
}

/// Runs `a` and `b` as two tasks, potentially in parallel on two streams,
/// and returns both results (rayon's `join`).
///
/// ```
/// use gpu_kernels as k;
/// # fn main() -> gpu::Result<()> {
/// let x = gpu::Buffer::from_host(&[1.0f32; 1024])?;
/// let (sum, max) = gpu::join(
///     |a| k::reduce::sum(a, &x), // both read x: neither waits for the other
///     |b| k::reduce::max(b, &x),
/// )?;
/// assert_eq!((sum, max), (1024.0, 1.0));
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// The first error of either; the runtime's start error.
///
/// # Panics
///
/// Re-raises a panic of either after both finished.
pub fn join<A, B, RA, RB>(a: A, b: B) -> Result<(RA, RB)>
where
    A: FnOnce(&Scope<'_, '_>) -> Result<RA> + Send,
    B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB> + Send,
    RA: Send,
    RB: Send,
{
    // On a worker thread of the pool, as Rayon's `join` does from outside
    // its pool: `a` runs there, `b` waits to be stolen or run after it.
    if registry::on_worker() {
        join_task(a, b)
    } else {
        registry::install(|| join_task(a, b))
    }
}

/// [`join`] on a worker: the join's own task, then the join.
fn join_task<A, B, RA, RB>(a: A, b: B) -> Result<(RA, RB)>
where
    A: FnOnce(&Scope<'_, '_>) -> Result<RA>,
    B: for<'r2, 's2> FnOnce(&Scope<'r2, 's2>) -> Result<RB> + Send,
    RB: Send,
{
    // Matched by reference: the context is not moved into a slot of its
    // own (a debug build keeps every such copy on the stack).
    match &begin_join_task() {
        Ok(ctx) => join_in_worker(ctx, a, b, Join::IfSubmitted),
        Err(e) => Err(e.clone()),
    }
}

/// The task of a [`join`] (not generic: none of it is repeated in the
/// frames of each join).
#[inline(never)]
fn begin_join_task() -> Result<TaskContext> {
    Runtime::global()?.begin_task()
}
