//! A task's results of library operations (a factorization's `info`,
//! DESIGN "Numerical libraries and foreign work"), checked at the task's
//! next host wait rather than with a wait of their own: the fast path never
//! waits. A task's unchecked results travel with its final fence (or, for a
//! task that queued nothing of its own, as [`Unchecked`]) to the task that
//! joins it (`gpu`'s scopes), up to the API that ended the tasks, which
//! checks them before it returns (DESIGN "Where a failure goes"). What a
//! check is, how checks are concluded and how a dropped task's or fence's
//! are deferred to the runtime: `fence/checks.rs`, below; here,
//! `TaskContext`'s methods, which call down.

use super::TaskContext;
use crate::error::Result;
use crate::fence::{conclude, defer, Check, Fence, Pending};
use crate::runtime::{StatusJudge, StatusWord};

impl TaskContext {
    /// A status word of this task's runtime, zeroed, for a library's
    /// device work to write its result into: pass its
    /// [`StatusWord::device_ptr`] to the call (or have the host twin write
    /// [`StatusWord::host_ptr`]), then hand it to
    /// [`TaskContext::check_status_later`]. Words are pooled per runtime
    /// (pages of mapped page-locked memory): taking one allocates only when
    /// every word of the pages is in use.
    ///
    /// # Errors
    ///
    /// Driver errors from allocating a page of words.
    pub fn status_word(&self) -> Result<StatusWord> {
        self.runtime().status_word()
    }

    /// A run of `len` status words, each zeroed, for a batched library
    /// call that writes one result per problem into an array (cuSOLVER's
    /// `infoArray`): pass [`StatusWord::device_ptr`] (the first word's
    /// address), then hand it to [`TaskContext::check_status_later`], whose
    /// failure is the first nonzero word's, with the problem's index and
    /// the others that failed as its context
    /// ([`Error::Context`](crate::Error::Context)). `len <= 1` is a single
    /// word. A run of more than one takes a block of its own, reused by
    /// later runs of its size.
    ///
    /// # Errors
    ///
    /// Driver errors from allocating a block;
    /// [`Error::TooLarge`](crate::Error::TooLarge) for a run beyond
    /// `i32::MAX / 4` words.
    pub fn status_words(&self, len: usize) -> Result<StatusWord> {
        self.runtime().status_words(len)
    }

    /// Registers `word` to be read at this task's next host wait
    /// ([`TaskContext::synchronize`] and every wait built on it), after
    /// the work queued on this task's stream so far: a nonzero value is
    /// `judge(op, value)`, that wait's error. Call it once the work that
    /// writes `word` is queued on this task's stream (a foreign
    /// operation's device closure ran, or its host twin was queued); a
    /// word that nothing was queued to write is simply dropped instead.
    ///
    /// The check is never lost, and never waits by itself: if the task
    /// ends unwaited, it travels with the task's final fence to the task
    /// that joins it (`gpu`'s scopes), which checks it at its own next
    /// wait; a task or fence dropped with it unchecked defers it to the
    /// runtime, whose next [`crate::Runtime::synchronize`] reports a
    /// failure (DESIGN "Where a failure goes"). Whether results are
    /// pending: [`TaskContext::has_unchecked_results`].
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`](crate::Error::WrongDevice) for a word of
    /// another runtime (which may be gone when this task's wait reads it);
    /// the word is dropped.
    pub fn check_status_later(
        &self,
        word: StatusWord,
        op: &'static str,
        judge: StatusJudge,
    ) -> Result<()> {
        self.runtime()
            .check_same(word.runtime_id(), "a status word of another runtime")?;
        self.check_later(Check {
            word,
            op,
            judge,
            task: None,
        });
        Ok(())
    }

    /// Checks `check` at this task's next host wait.
    pub(crate) fn check_later(&self, mut check: Check) {
        if let Some(name) = self.name.borrow().clone() {
            check.task = Some((name, self.rt.ordinal()));
        }
        self.checks.borrow_mut().push(Pending::own(check));
    }

    /// Whether results of this task's library operations (or of tasks it
    /// joined) are still to be checked: the next host wait checks them
    /// ([`TaskContext::synchronize`] and every wait built on it).
    pub fn has_unchecked_results(&self) -> bool {
        !self.checks.borrow().is_empty()
    }

    /// After a synchronize of this task's stream: every pending result,
    /// the first failure as the error. Failures of other work nobody took
    /// (dropped tasks and fences) are not this task's: they go to the
    /// runtime's next [`crate::Runtime::synchronize`].
    pub(crate) fn conclude_checks(&self) -> Result<()> {
        if self.checks.borrow().is_empty() {
            return Ok(());
        }
        let checks = std::mem::take(&mut *self.checks.borrow_mut());
        conclude(checks, true)
    }

    /// A fence of this task's stream that carries the task's unchecked
    /// results to whoever waits for it ([`TaskContext::after_fence`] and
    /// [`TaskContext::wait_fence`] take them over, checked at that task's
    /// next host wait; [`Fence::synchronize`] checks them): a task's last
    /// fence, handed to its joiner. For `gpu`'s scopes.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::fence`] (the results then stay with this task).
    pub(crate) fn final_fence(&self) -> Result<Fence> {
        let f = self.fence()?;
        if f.shared.ev.is_none() {
            // A fence of a scope capture stands for graph nodes, not for
            // queued work: nobody could wait for the results with it. They
            // stay with this task.
            return Ok(f);
        }
        let all = std::mem::take(&mut *self.checks.borrow_mut());
        // The task's own results are covered by the fence's record; the
        // ones taken over from other tasks keep their own fences.
        f.shared.checks.lock().extend(all);
        Ok(f)
    }

    /// Takes over the results `fence` carries (a task's
    /// [`TaskHooks::final_fence`](crate::plumbing::TaskHooks::final_fence)) without waiting for it: checked at
    /// this task's next host wait, after a host wait for the fence. For
    /// `gpu`'s scopes, whose end drops the fences it need not wait for.
    pub(crate) fn take_results_of(&self, fence: &Fence) {
        self.adopt_checks(fence);
    }

    /// Takes over the results `fence` carries: checked at this task's next
    /// host wait, after a wait for the fence.
    pub(crate) fn adopt_checks(&self, fence: &Fence) {
        let carried = std::mem::take(&mut *fence.shared.checks.lock());
        if carried.is_empty() {
            return;
        }
        self.checks
            .borrow_mut()
            .extend(carried.into_iter().map(|p| p.carried_by(fence)));
    }

    /// Checks every pending result now: waits for the work that writes
    /// them (this task's stream, the fences of the tasks they came from).
    /// `gpu`'s top-level scope calls it at its end when its tasks left
    /// results unchecked, so a failure is never lost.
    ///
    /// # Errors
    ///
    /// The first failed result
    /// ([`Error::NotPositiveDefinite`](crate::Error::NotPositiveDefinite),
    /// [`Error::Singular`](crate::Error::Singular), ...); driver errors
    /// from the waits.
    pub fn check_results(&self) -> Result<()> {
        if !self.has_unchecked_results() {
            return Ok(());
        }
        if self.checks.borrow().iter().any(|p| p.after().is_none()) {
            // Its own results: a synchronize concludes every check.
            return self.synchronize();
        }
        let checks = std::mem::take(&mut *self.checks.borrow_mut());
        conclude(checks, true)
    }

    /// The results this task took over from tasks it joined (each with
    /// the fence of its work), for its own joiner: what a task that
    /// queued nothing of its own hands on instead of a final fence. Its
    /// own results (none without work of its own) stay.
    pub(crate) fn take_unchecked(&self) -> Unchecked {
        let mut mine = self.checks.borrow_mut();
        if mine.iter().all(|p| p.after().is_some()) {
            return Unchecked(std::mem::take(&mut *mine));
        }
        let (taken, own) = std::mem::take(&mut *mine)
            .into_iter()
            .partition(|p| p.after().is_some());
        *mine = own;
        Unchecked(taken)
    }

    /// Takes over `results` ([`TaskHooks::take_unchecked`](crate::plumbing::TaskHooks::take_unchecked) of a task
    /// this one joined): checked at this task's next host wait.
    pub(crate) fn adopt_unchecked(&self, mut results: Unchecked) {
        if !results.0.is_empty() {
            self.checks.borrow_mut().append(&mut results.0);
        }
    }

    /// At the task's drop: its results, deferred to the runtime's reclaim
    /// path (never waited for here: a drop does not block). Its own ones
    /// are covered by a fence recorded now on its stream.
    pub(crate) fn conclude_at_drop(&mut self) {
        let checks = std::mem::take(self.checks.get_mut());
        if checks.is_empty() {
            return;
        }
        let mut own = None;
        if checks.iter().any(|p| p.after().is_none()) && self.slot.get().is_some() {
            // A record, not a wait; in a capture (no event) or failing,
            // none: `defer` then reports them unchecked.
            own = self.fence().ok().filter(|f| f.shared.ev.is_some());
        }
        defer(&self.rt, checks, own);
    }
}

/// Results of tasks a task joined, handed to its joiner (a task that
/// queued nothing of its own has no final fence to carry them). For
/// `gpu`'s scopes; dropped unchecked, they are deferred like a dropped
/// task's.
#[doc(hidden)]
#[derive(Default)]
pub struct Unchecked(Vec<Pending>);

impl Unchecked {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s.
    pub fn append(&mut self, mut other: Unchecked) {
        self.0.append(&mut other.0);
    }
}

impl std::fmt::Debug for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unchecked")
            .field("results", &self.0.len())
            .finish()
    }
}

impl Drop for Unchecked {
    fn drop(&mut self) {
        if let Some(rt) = self
            .0
            .iter()
            .find_map(|p| p.after().map(|f| f.shared.rt.clone()))
        {
            defer(&rt, std::mem::take(&mut self.0), None);
        }
    }
}
