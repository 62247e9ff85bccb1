//! `scope`, `spawn` and `capture` (the chunk iterators, `crate::iter`, run
//! their chunks as the tasks of a scope of this module; `crate::join` is a
//! scope of two sides).

use crate::registry;
use gpu_sched::plumbing::{RuntimeHooks, TaskHooks};
use gpu_sched::{CaptureHandle, Error, Fence, Result, Runtime, TaskContext};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

mod async_scope;
mod builder;
mod capture;
mod graphed;
mod state;
#[cfg(test)]
mod test;

pub use async_scope::{scope_async, scope_on_async};
pub use builder::TaskBuilder;
use builder::TaskOptions;
pub use capture::{capture, capture_on};
pub use graphed::Graphed;
pub(crate) use state::ScopeState;
use state::{lock, Job, JobBody};

/// The fences a spawned task is ordered after.
pub(crate) type Fences = smallvec::SmallVec<[Fence; 1]>;

/// How many serial graphed scopes' tasks run inline on this thread, one
/// inside another (a task spawning from a task spawned inline): past
/// [`InlineDepth::MAX`] a spawn is a job again, so that a chain of spawns
/// does not grow the stack without bound (that job's own spawns run inline
/// again, on the thread that runs it).
struct InlineDepth;

thread_local! {
    static INLINE_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl InlineDepth {
    const MAX: u32 = 16;

    /// One level more, unless this thread is at the limit.
    fn enter() -> Option<InlineDepth> {
        INLINE_DEPTH.with(|d| {
            let n = d.get();
            (n < Self::MAX).then(|| {
                d.set(n + 1);
                InlineDepth
            })
        })
    }
}

impl Drop for InlineDepth {
    fn drop(&mut self) {
        INLINE_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// A spawned task's life: a stream of its own, ordered after the spawn's
/// fence; the body; a final fence for the joiner.
fn run_child<'scope, F>(
    rt: &Runtime,
    cap: &CaptureHandle,
    state: &'scope ScopeState,
    rayon: Option<&rayon_core::Scope<'scope>>,
    (fences, opts): (Fences, &TaskOptions),
    f: F,
) where
    F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()>,
{
    let ctx = match rt.begin_task_in(cap) {
        Ok(c) => c,
        Err(e) => return state.fail(e),
    };
    // Before its first operation, which takes its stream (a no-op in a
    // capture: the task's work goes into the graph).
    ctx.set_priority(opts.priority);
    if let Some(name) = &opts.name {
        ctx.set_name(name.clone());
    }
    // Waited for on the device when the task binds a stream (its first GPU
    // operation); a task that submits nothing takes no stream (DESIGN "Streams are a resource").
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
        Ok(Err(e)) => state.fail(match &opts.name {
            Some(name) => e.in_task(name.clone(), rt.ordinal()),
            None => e,
        }),
        Err(p) => state.panicked(p),
    }
    hand_over_final(&ctx, state);
}

/// A task's end: what its joiner must be ordered after goes to the scope's
/// state. A task that submitted hands a fence of its stream; one that did
/// not hands the fences it was itself to wait for (its nested scopes'
/// tasks', DESIGN "Streams are a resource"), which would otherwise go with it.
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
        // The results it took over from the tasks it joined (a nested
        // scope's, a join's), each with its own fence: no final fence of
        // its own carries them.
        state.push_unchecked(ctx.take_unchecked());
        return;
    }
    // The final fence carries the task's unchecked library results (a
    // factorization's info) to its joiner.
    match ctx.final_fence() {
        Ok(fin) => state.push_final(fin),
        Err(e) => {
            // Without a final fence the joiner cannot order after this
            // task: wait here so nothing is left running (which also
            // checks its results: a failure among them is reported too).
            state.fail(e);
            if let Err(e) = ctx.synchronize() {
                state.fail(e);
            }
        }
    }
    // What a fence could not carry (in a scope capture, whose fences stand
    // for graph nodes): the results taken over from other tasks.
    state.push_unchecked(ctx.take_unchecked());
}

/// The end of every API that begins a task of its own and ends it before
/// it returns (`scope`, `in_place_scope`, `join`, the chunk iterators'
/// terminals, `with_task`, `capture`, `Graphed::scope`; `par_map` and
/// `ThreadPool::install` through these): the one place where the library
/// results of every task the call covered are checked, so a failure is
/// never lost (DESIGN "Where a failure goes"). They reached `ctx` through
/// the tasks' final fences and [`ScopeState`]'s results; a nested scope or
/// join hands them on to its own task instead, up to here.
///
/// The body's error comes first; the checks run also after one (a wait
/// for the results' work), and their failure is returned when the body
/// succeeded.
pub(crate) fn end_top_level<R>(ctx: &TaskContext, r: Result<R>) -> Result<R> {
    ctx.runtime().trace_flush();
    let checked = ctx.check_results();
    let r = r?;
    checked?;
    Ok(r)
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
    pub(crate) fn context(&self) -> &'r TaskContext {
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
/// # Guarantees
///
/// What every `gpu` scope guarantees: this one, a nested [`Scope::scope`], and
/// the scopes that [`crate::join`], the chunk iterators ([`crate::iter`]) and
/// [`crate::par_map`] open. What a spawned task is ordered after, and its
/// stream, are on [`Scope::spawn`]; what a join adds, on [`crate::join`]; what
/// a capture refuses, on [`capture`].
///
/// **Ordering.** A task's GPU work runs in program order on its own stream.
/// When `scope`, `join`, a chunk iterator's `for_each` (or `sum`, `collect`,
/// ..) or `par_map` returns, the caller's later work is ordered after all GPU
/// work of the scope's tasks; this ordering is on the device (the scope returns
/// once every task's host code returned, not when the GPU is done). `&Buffer`
/// is a read and `&mut Buffer` a write: readers never wait for each other, a
/// writer is ordered after the last writer and every reader since; disjoint
/// chunks never wait for each other. `to_vec`, `copy_to_host`, `synchronize`
/// and `host_sync_ptr` return only once the data they cover is complete;
/// `host_sync_ptr` waits only for what orders that buffer plus the task's own
/// work.
///
/// **Panics.** A task's panic is caught; the scope waits until every task
/// returned and all of the scope's GPU work finished, then re-raises the first
/// panic on the caller's thread.
///
/// **Errors.** Every fallible call returns `gpu::Result`; the library does not
/// panic on bad input or driver failure, and misuse is caught before anything
/// is submitted. A task's error reaches the caller like a panic: after all
/// sibling GPU work finished, the first error winning (a panic wins over an
/// error). After any error but `StickyDeviceError` nothing leaked and the
/// runtime keeps working; after a kernel fault the context is broken for good,
/// every later call returns `StickyDeviceError`, and nothing hangs.
///
/// **Library failures.** A failure the device reports after the fact (a
/// factorization's `info`) is returned by the call that ends the task it
/// happened in, wherever that task sits below it (a child, a grandchild, a
/// nested scope, a join, a chunk, another device): this `scope`, `join`,
/// a chunk iterator's terminal, `with_task`, ... A failure of a task or
/// fence the user dropped unchecked goes to the runtime's next
/// `synchronize` only, never to an unrelated task's wait (design note
/// "Where a failure goes").
///
/// **Memory.** Dropping a buffer, view, event, fence, task or scope never
/// blocks, also with library results unchecked (they are checked later, on
/// the runtime's reclaim path); memory is freed in stream order, after every
/// queued operation that uses it.
/// Streams and events come from pools; `Runtime::live()` reports what exists
/// and what is in use.
///
/// **Soundness.** Safe code, through the public API, cannot make two unordered
/// accesses to one buffer where one writes, read or free memory still in use,
/// read or write outside a buffer, or leave the runtime in a state that
/// silently drops work (design note DESIGN "Soundness"; tests `sound01`-`sound17` in
/// `crates/gpu-sched/tests/soundness.rs`, on both backends, each shown to fail
/// with its fix taken out). What the runtime cannot check is `unsafe`, with its
/// contract written on the function:
///
/// | `unsafe` call | what the caller promises |
/// |---|---|
/// | `Kernel::launch`, `Builtin::launch` | the kernel reads only the buffers passed as `&`/`&mut` and writes only those passed as `&mut`, within their lengths (scalar lengths tell the truth); `Untracked` pointers are valid for what the kernel does and ordered by the caller; the launch configuration is one the kernel is written for. The wrappers of `gpu-kernels` take their lengths from their buffers and are safe. |
/// | `Foreign::run` (a library call, `TaskContext::foreign`) | the device closure queues work on the stream it is given and no other, touches only the declared buffers (writes only those declared as writes) besides memory it owns, and returns once the work is queued; declared capture-safe only if stream capture records all it does |
/// | `TaskContext::block_on` | the kernel passed is a gate kernel (`gpu_kernels::gate` passes its own) |
/// | `copy_from_host_async`, `copy_to_host_async` | the host memory stays alive, and untouched by others, until the stream reached the copy |
/// | `DeviceRepr` (implementing it) | the type is plain old data |
///
/// The rest is checked: `DeviceSlice` and `DeviceSliceMut` are sealed (no user
/// type can claim an address, length or stamps), and a read-only `View` is not
/// `DeviceSliceMut`; the runtime's ledger is read-only to users
/// (`Runtime::ledger()` answers questions and changes nothing); every pooled
/// event that the runtime records with a call the ledger does not see covers
/// nothing, and so does a new event; a split (`Buffer::split_chunks`) hands its
/// views' stamps back at `rejoin`, and a split dropped or leaked without one
/// leaves the buffer's uses unknown, so its next use (or its free) waits for
/// every stream; operations on host memory, and records (events, the fences of
/// `spawn` and `join`), are refused inside a capture before anything is
/// submitted; a capture ends when its body errs or panics; a copy from
/// page-locked memory (the runtime's own, another runtime's, or memory another
/// library pinned: the driver is asked) waits for the device; a view of bytes
/// off a word boundary is zeroed byte by byte; sizes are computed with checked
/// arithmetic. Raw handles (`raw_ptr`, `cu_stream`, `cu_event`) are safe to
/// take, and using them is the caller's `unsafe` FFI: an event whose handle was
/// taken gives no facts.
///
/// **Not guaranteed.** Which of several concurrent panics or errors is
/// reported; ordering of work submitted through a raw pointer or handle
/// (`raw_ptr`, `cu_stream`, `cu_event`) after the buffer moved to another task
/// (order it yourself); that the GPU has finished when `scope` returns; race
/// detection on CUDA (the detector is the host backend's); bit-identical `sum`
/// or scan results across GPU runs (atomic adds).
///
/// **Like Rayon, and not.** `in_place_scope` takes a body that is not `Send`;
/// `ThreadPoolBuilder::num_threads(0)` is the default and `stack_size` sets the
/// workers' stacks (nesting is bounded by the stack, as in Rayon); a
/// `ThreadPool` of its own (`ThreadPoolBuilder::build`) runs the tasks of the
/// `gpu` calls made inside its `install`, `scope` or `join`. Differences from
/// Rayon that remain: no FIFO spawns, broadcast or yield, no start and exit
/// handlers, and tasks return `gpu::Result`; and a scope opened outside every
/// pool runs, at its end, the tasks no worker has started on the calling thread
/// (see above).
///
/// **Misuse and what it gives.** Each is a typed error, returned before
/// anything is submitted (the capture's own are on [`capture`]):
///
/// | misuse | error | message (what to do) |
/// |---|---|---|
/// | lengths that must agree differ (`axpy`, `copy`, `copy_from_host`, `par_map` output) | `Error::LengthMismatch` | "length mismatch: axpy's x has 4 elements, 8 expected; pass buffers (or views) of equal length" |
/// | a range outside its buffer or view (`slice`, `slice_mut`, `split_at_mut`) | `Error::OutOfRange` | "Buffer::slice: the range 5..12 is not within 0..10; ask for start <= end <= 10" |
/// | chunk size 0 (`par_chunks_mut(&mut b, 0)`, `PipelineOptions { chunk: 0, .. }`) | `Error::ZeroChunk` | "chunk size must be at least 1" |
/// | `zip` of chunk iterators with different numbers of chunks | `Error::LengthMismatch` | "length mismatch: zip's second side (its number of chunks) has 5 elements, 4 expected; ..." |
/// | a buffer, view, event, gate or graph of another runtime | `Error::WrongDevice` | "a kernel argument belongs to another device or runtime; copy it to this device first (`TaskContext::copy_peer` within a group of devices)" |
/// | a kernel signature that disagrees with its PTX entry (argument lists that disagree with the signature do not compile) | `Error::BadKernelArgs` | "kernel `fill_f32`: takes 3 parameters; the signature declares 2", "parameter 1 is a 4-byte float" |
/// | a foreign operation without a host twin on the host backend, or not declared capture-safe in a capture | `Error::NoHostImplementation`, `Error::Capturing` | "kernel `cublasSgemm` has no host implementation...", "a foreign operation not declared capture-safe ..." |
/// | any call after a kernel faulted | `Error::StickyDeviceError` | "the device context is broken by an earlier error (...); every call fails until the process restarts" |
/// | `share_stream_of` a task of another runtime | `Error::WrongDevice` | "the task whose stream is shared belongs to another device or runtime; ..." |
/// | `par_map_pinned` with staging buffers of two runtimes | `Error::WrongDevice` | "par_map_pinned's output (a staging buffer of another runtime than the input's) belongs to another device or runtime; ..." |
/// | a size that does not fit in the address space (`alloc`, `zeros`, `Staging::new` of `usize::MAX / 4` elements) | `Error::TooLarge` | "N elements of 8 bytes overflow the address space while computing an allocation size; ask for fewer" |
/// | more memory than the device has | `Error::OutOfMemory` | "out of device memory: asked for N bytes while ...; free buffers no longer needed or ask for less" |
///
/// Each is tested (`crates/gpu-scope/tests/bad_input.rs`,
/// `crates/gpu-sched/tests/errors.rs`, `crates/gpu-sched/tests/soundness.rs`,
/// `crates/gpu-sched/tests/ranges.rs`).
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
    end_top_level(&ctx, r)
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
    ///
    /// # Guarantees
    ///
    /// **Ordering.** A spawned task is ordered after everything its spawner
    /// submitted *before* the `spawn` (and everything that was ordered before
    /// that), and overlaps what the spawner submits afterwards. The order in
    /// which sibling tasks run, on the host or the device, is not guaranteed.
    ///
    /// **Streams are a resource (DESIGN "Streams are a resource").** A task takes a stream at its first GPU
    /// operation and gives it back when it ends; a task that submits nothing (a
    /// CPU-only Rayon program, any nesting) holds none, and waits on the device
    /// for what it is ordered after only when it binds one. A scope's spawns
    /// are Rayon jobs on a worker thread (in a serial graphed scope,
    /// [`crate::Graphed::serial`], they run at once on the spawning thread);
    /// after a burst of live tasks, the
    /// streams beyond the pool's warm size are destroyed once idle, so
    /// `Runtime::live()` falls back to the warm size plus what is in use. Not
    /// guaranteed: that a task has a stream to itself when more tasks submit
    /// GPU work at once than the runtime tracks streams (`max_streams`, at most
    /// 256: streams are then shared, their work serialized and their facts
    /// dropped, never an error).
    ///
    /// **Hardware queues.** CUDA maps streams onto
    /// `CUDA_DEVICE_MAX_CONNECTIONS` hardware queues (8 by default); with more
    /// busy streams than queues, one stream's kernel can wait behind another's.
    /// The library sets it to 32 (the most CUDA allows) when it starts CUDA, if
    /// the environment does not set it; a value you set is kept (set it before
    /// the first CUDA call of the process). The project's own gated CUDA tests
    /// set 32 whatever the environment says. On the H200 with 32, 33 streams
    /// made one after another, the first blocked by a gate kernel, the other 32
    /// all ran their kernels: no two shared a queue
    /// (`benches/results/investigations/2026-12-01-siblings-dip/`). What does
    /// order streams is CUDA's implicit synchronization: a page-locked
    /// allocation issued between two streams' commands makes the later wait for
    /// the earlier. `Gate::new`, `Staging::new` and a first `par_map` of a size
    /// (its pinned buffers) make one; make gates and staging buffers before the
    /// work they should run beside, not while a gate kernel is pending (later
    /// work would wait behind that gate until it opens or times out).
    pub fn spawn<F>(&self, f: F)
    where
        F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()> + Send + 'scope,
    {
        self.spawn_in(self.ctx.runtime().clone(), TaskOptions::default(), f)
    }

    /// A spawn with options: its stream's priority, its device
    /// (`s.task().priority(gpu::Priority::High).spawn(|s| ..)`). See
    /// [`TaskBuilder`].
    pub fn task(&self) -> TaskBuilder<'_, 'r, 'scope> {
        TaskBuilder {
            scope: self,
            opts: TaskOptions::default(),
            device: None,
        }
    }

    /// [`Scope::spawn`] with the task placed on device `device` of the
    /// runtime's group (DESIGN "Beyond one GPU"): its stream and the buffers it allocates are
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
        self.task().device(device).spawn(f)
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

    fn spawn_in<F>(&self, rt: Runtime, opts: TaskOptions, f: F)
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
        if cap.serial() {
            if let Some(_depth) = InlineDepth::enter() {
                // A serial graphed scope's task runs now, here (its host
                // code only records; the graph overlaps its GPU work).
                state.touch();
                let run =
                    AssertUnwindSafe(|| run_child(&rt, &cap, state, None, (fences, &opts), f));
                if let Err(p) = catch_unwind(run) {
                    state.panicked(p);
                }
                return;
            }
            // Nested too deep on this thread's stack: a job, as anywhere.
        }
        if let Some(rs) = self.rayon {
            // A job of the Rayon scope, which runs it (on a worker, or on
            // the scope's thread while it waits) and waits for it.
            state.touch();
            rs.spawn(move |rs| {
                // The task's own panic is caught inside; this catches one
                // from the runtime around it.
                let run =
                    AssertUnwindSafe(|| run_child(&rt, &cap, state, Some(rs), (fences, &opts), f));
                if let Err(p) = catch_unwind(run) {
                    state.panicked(p);
                }
            });
            return;
        }
        let body = move || {
            // The task's own panic is caught inside; this catches one from
            // the runtime around it, so the count always drops.
            let run = AssertUnwindSafe(|| run_child(&rt, &cap, state, None, (fences, &opts), f));
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
