//! A scope's state: what it collects from its tasks (their final fences,
//! the first panic or error) and the jobs it has not seen finish, with the
//! wait at its end.

use super::Join;
use gpu_sched::plumbing::TaskHooks;
use gpu_sched::{Error, Fence, Result, TaskContext, Unchecked};
use std::any::Any;
use std::panic::resume_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A spawned task's body, taken by whoever runs it first: a worker thread,
/// or the scope's own thread when it reaches the end of the scope first.
pub(super) type JobBody = Box<dyn FnOnce() + Send + 'static>;

/// Locks `m`, ignoring poisoning: each critical section here is one take,
/// pop, push or store, never a task's body, so the data is whole even when a
/// panic passed through it (`finish` re-raises a task's panic holding the
/// `panic` lock), and a scope whose task panicked still joins the others.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) struct Job {
    pub(super) body: Mutex<Option<JobBody>>,
}

impl Job {
    pub(super) fn take(&self) -> Option<JobBody> {
        lock(&self.body).take()
    }
}

/// What a scope collects from its tasks: their final fences, and the first
/// panic or error; and the tasks not finished yet.
#[derive(Default)]
pub(crate) struct ScopeState {
    /// Jobs spawned and not finished.
    pub(super) outstanding: AtomicUsize,
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
pub(super) struct Collected {
    finals: Mutex<Vec<Fence>>,
    /// Library results of tasks that queued nothing of their own but
    /// joined tasks that did (a nested scope's, a join's): each with the
    /// fence of its work, for the scope's task to check or hand on.
    unchecked: Mutex<Unchecked>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    error: Mutex<Option<Error>>,
    /// Spawned jobs, possibly not started.
    pub(super) pending: Mutex<Vec<Arc<Job>>>,
    finished: Mutex<()>,
    wake: Condvar,
}

impl ScopeState {
    /// The collected part, made if this is its first use.
    pub(super) fn more(&self) -> &Collected {
        self.more.get_or_init(Default::default)
    }

    /// The last touch of the state by a job. The count drops under the
    /// lock, and `wait_all` returns only while holding that lock, so the
    /// scope (and this state, on its stack) cannot end before this job has
    /// let go of the lock: nothing of the state is used after it is gone.
    pub(super) fn job_finished(&self) {
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
    pub(super) fn wait_all(&self) {
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

    pub(super) fn touch(&self) {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
    }

    /// Whether nothing was left for the end of the scope. Read by the
    /// scope's thread after every task it ran returned; a task run by
    /// another thread touched the state before it was counted done, so a
    /// spawned task (which counts) is seen through `outstanding`.
    pub(crate) fn untouched(&self) -> bool {
        !self.touched.load(Ordering::Acquire) && self.outstanding.load(Ordering::Acquire) == 0
    }

    pub(crate) fn fail(&self, e: Error) {
        self.touch();
        let mut g = lock(&self.more().error);
        if g.is_none() {
            *g = Some(e);
        }
    }

    pub(crate) fn panicked(&self, p: Box<dyn Any + Send>) {
        self.touch();
        let mut g = lock(&self.more().panic);
        if g.is_none() {
            *g = Some(p);
        }
    }

    /// `join`'s `a` panicked: its panic is the one re-raised, whichever came
    /// first (as Rayon's `join` does).
    pub(super) fn panicked_first(&self, p: Box<dyn Any + Send>) {
        self.touch();
        *lock(&self.more().panic) = Some(p);
    }

    pub(super) fn push_final(&self, f: Fence) {
        self.touch();
        lock(&self.more().finals).push(f);
    }

    /// Keeps a task's results that travel without a final fence
    /// ([`TaskContext::take_unchecked`]).
    pub(super) fn push_unchecked(&self, u: Unchecked) {
        if u.is_empty() {
            return;
        }
        self.touch();
        lock(&self.more().unchecked).append(u);
    }

    /// Hands the results kept by [`ScopeState::push_unchecked`] to `ctx`.
    fn unchecked_to(&self, ctx: &TaskContext) {
        if let Some(more) = self.more.get() {
            ctx.adopt_unchecked(std::mem::take(&mut *lock(&more.unchecked)));
        }
    }

    pub(super) fn finals(&self) -> Vec<Fence> {
        match self.more.get() {
            Some(more) => std::mem::take(&mut *lock(&more.finals)),
            None => Vec::new(),
        }
    }

    /// Orders `ctx` after every task of the scope: a device wait on each
    /// final fence when all went well (when `ctx` binds a stream, if it has
    /// none yet: DESIGN "Streams are a resource"); a host wait for each when a task failed, so the
    /// failure surfaces after every sibling's GPU work.
    pub(super) fn join_into(&self, ctx: &TaskContext, failed: bool) -> Result<()> {
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

    pub(super) fn failed(&self) -> bool {
        self.more
            .get()
            .is_some_and(|m| lock(&m.panic).is_some() || lock(&m.error).is_some())
    }

    /// The end of a scope whose body returned: waits for every task, orders
    /// `ctx` after their GPU work (see [`Join`]), then re-raises the first
    /// panic or returns the first error.
    pub(crate) fn end(&self, ctx: &TaskContext, join: Join) -> Result<()> {
        self.wait_all();
        // The tasks' results that came without a fence go to `ctx` (checked
        // by whoever ends it, or carried by its final fence).
        self.unchecked_to(ctx);
        let failed = self.failed();
        if failed || join == Join::Always || ctx.has_submitted() {
            if let Err(e) = self.join_into(ctx, failed) {
                self.fail(e);
            }
        } else {
            // The fences' events go back to the pool; their records stand.
            // The library results they carry stay with `ctx`, each with its
            // fence, for its next wait.
            for f in self.finals() {
                ctx.take_results_of(&f);
            }
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
    pub(crate) fn end_unwinding(&self, ctx: &TaskContext) {
        self.wait_all();
        self.unchecked_to(ctx);
        let _ = self.join_into(ctx, true);
    }

    /// Re-raises the first panic, else returns the first error.
    pub(super) fn finish(&self) -> Result<()> {
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
