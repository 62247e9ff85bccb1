//! `join` (Rayon's): two tasks, potentially in parallel on two streams,
//! as rayon-core's `join/` sits beside its `scope/`; on a worker thread it
//! is `rayon_core::join`, with `b` a task of its own.

use crate::registry;
use crate::scope::{
    end_top_level, extend, hand_over_final, run_scope_with, Fences, Join, Scope, ScopeState,
};
use gpu_sched::plumbing::{RuntimeHooks, TaskHooks};
use gpu_sched::{CaptureHandle, Error, Result, Runtime, TaskContext};

impl Scope<'_, '_> {
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
        let ctx = self.context();
        if ctx.records_serially() {
            // `b` spawned after `a`: run at once on this thread, then.
            join_in_scope(ctx, a, b, Join::Always, false)
        } else if registry::on_worker() {
            join_in_worker(ctx, a, b, Join::Always)
        } else {
            join_in_scope(ctx, a, b, Join::Always, true)
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

/// `join`'s `b` task's fences: `ctx` ordered after each. Not generic, so
/// none of it is repeated in the frames of each `b`. A failure is the
/// join's (its end returns it): `false` then.
#[inline(never)]
fn after_fences(ctx: &TaskContext, fences: Fences, state: &ScopeState) -> bool {
    for fence in fences {
        if let Err(e) = ctx.after_fence(fence) {
            state.fail(e);
            return false;
        }
    }
    true
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
            self.out = Some(a(&Scope::of_side(self.ctx, self.state)));
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
        // Made in place and matched by reference: the context (240 bytes)
        // is never moved (each move was a `memmove`, a fifth of a join of
        // empty tasks, B10).
        let task = self.rt.begin_task_in(&self.cap);
        let ctx = match &task {
            Ok(ctx) => ctx,
            Err(_) => {
                if let Err(e) = task {
                    self.state.fail(e);
                }
                return;
            }
        };
        if !after_fences(ctx, fences, self.state) {
            return;
        }
        let _hand_over = HandOver {
            ctx,
            state: self.state,
        };
        self.out = Some(b(&Scope::of_side(ctx, self.state)));
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

/// `Scope::join` as a scope of its own: `b` a spawned task. From outside
/// every pool (in a scope's body there), `b` is spawned first (`b_first`),
/// a job of the global pool, and `a` runs meanwhile. In a serial graphed
/// scope, `b` is spawned after `a` returned or panicked, so it runs then,
/// on this thread; `a`'s panic is re-raised after it, as Rayon does. A
/// frame of its own, so a chain of joins on a worker does not carry its
/// locals.
#[inline(never)]
fn join_in_scope<A, B, RA, RB>(
    ctx: &TaskContext,
    a: A,
    b: B,
    join: Join,
    b_first: bool,
) -> Result<(RA, RB)>
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
            let spawn_b = move || {
                s.spawn(move |t| {
                    *slot = Some(b(t)?);
                    Ok(())
                })
            };
            if b_first {
                spawn_b();
                return a(s);
            }
            let ra = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a(s)));
            spawn_b();
            ra.unwrap_or_else(|p| std::panic::resume_unwind(p))
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
/// # Guarantees
///
/// **Ordering.** When `join` returns, the caller's later work is ordered after
/// all GPU work of both sides and of the tasks spawned from them; this ordering
/// is on the device (the join returns once both sides' host code returned, not
/// when the GPU is done). The rest is a scope's (see [`crate::scope`]).
///
/// **Panics.** A side's panic is caught; the join waits until both sides
/// returned and all their GPU work finished, then re-raises the panic on the
/// caller's thread: `a`'s when both panic, as in Rayon.
///
/// **Like Rayon, and not.** On a worker thread, `join` is Rayon's own `join`
/// (`a` here, `b` a task of its own, run here unless stolen). Differences from
/// Rayon: no `join_context`, and the workers' default stack is 16 MiB (a level
/// of `join` takes more stack than Rayon's; past the stack,
/// `Error::StackExhausted`).
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
        Ok(ctx) => {
            let r = join_in_worker(ctx, a, b, Join::IfSubmitted);
            end_top_level(ctx, r)
        }
        Err(e) => Err(e.clone()),
    }
}

/// The task of a [`join`] (not generic: none of it is repeated in the
/// frames of each join).
#[inline(never)]
fn begin_join_task() -> Result<TaskContext> {
    Runtime::global()?.begin_task()
}
