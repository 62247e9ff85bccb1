//! Results a library leaves for the host (a factorization's `info`, §14),
//! checked at the task's next host wait rather than with a wait of their
//! own: the fast path never waits. A task's unchecked results travel with
//! its final fence to the task that joins it (`gpu`'s scopes), so they
//! reach whoever waits next; one that is dropped unwaited waits for them.

use super::TaskContext;
use crate::error::{Error, Result};
use crate::fence::Fence;
use crate::runtime::InfoWord;

/// Turns a nonzero result of `op` into its error.
pub(crate) type Judge = fn(op: &'static str, value: i32) -> Error;

/// One result to check: the word the library writes, the operation, and
/// what a nonzero value means.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) word: InfoWord,
    pub(crate) op: &'static str,
    pub(crate) judge: Judge,
}

impl Check {
    /// The result as an error, if it is one. Only after a wait that
    /// covers the work that writes the word.
    fn verdict(&self) -> Result<()> {
        match self.word.get() {
            0 => Ok(()),
            v => Err((self.judge)(self.op, v)),
        }
    }
}

/// A check of this task's own work (`after: None`, covered by a
/// synchronize of its stream) or of another's, covered by `after`.
#[derive(Debug)]
pub(crate) struct Pending {
    check: Check,
    after: Option<Fence>,
}

/// The first failure of `checks`, after waiting for each one's fence;
/// every check is consumed. `own_done`: whether the wait that covers the
/// checks of the task's own stream (`after: None`) succeeded. A word whose
/// writer may still be queued (its wait failed, also past transient
/// errors) is never given back: it is leaked, so no later operation gets
/// it while the device may still write it.
fn conclude(checks: Vec<Pending>, own_done: bool) -> Result<()> {
    let mut first = None;
    for p in checks {
        let done = match &p.after {
            None => own_done,
            Some(f) => wait_for(f),
        };
        let r = match (done, p.after) {
            (true, Some(f)) => f.synchronize().and_then(|()| p.check.verdict()),
            (true, None) => p.check.verdict(),
            (false, _) => {
                std::mem::forget(p.check.word);
                Err(Error::Unsupported(
                    "a library result whose work could not be waited for (the device failed): not checked",
                ))
            }
        };
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Waits on the host for `f`'s event, past transient errors; whether the
/// fenced work is done (a fence of a scope capture stands for no queued
/// work: done).
fn wait_for(f: &Fence) -> bool {
    let Some(ev) = f.shared.ev.as_ref() else {
        return true;
    };
    let rt = &f.shared.rt;
    rt.wait_past_errors(|| rt.driver().event_sync(ev.raw))
        .is_ok()
}

impl TaskContext {
    /// Checks `check` at this task's next host wait.
    pub(crate) fn check_later(&self, check: Check) {
        self.checks
            .borrow_mut()
            .push(Pending { check, after: None });
    }

    /// Whether results of this task's library operations (or of tasks it
    /// joined) are still to be checked: the next host wait checks them
    /// ([`TaskContext::synchronize`] and every wait built on it).
    pub fn has_unchecked_results(&self) -> bool {
        !self.checks.borrow().is_empty()
    }

    /// After a synchronize of this task's stream: every pending result,
    /// the first failure as the error (then also the runtime's results
    /// found failed where nobody could be told).
    pub(crate) fn conclude_checks(&self) -> Result<()> {
        if !self.checks.borrow().is_empty() {
            let checks = std::mem::take(&mut *self.checks.borrow_mut());
            conclude(checks, true)?;
        }
        self.rt.take_unreported().map_or(Ok(()), Err)
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
    #[doc(hidden)]
    pub fn final_fence(&self) -> Result<Fence> {
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
    /// [`TaskContext::final_fence`]) without waiting for it: checked at
    /// this task's next host wait, after a host wait for the fence. For
    /// `gpu`'s scopes, whose end drops the fences it need not wait for.
    #[doc(hidden)]
    pub fn take_results_of(&self, fence: &Fence) {
        self.adopt_checks(fence);
    }

    /// Takes over the results `fence` carries: checked at this task's next
    /// host wait, after a wait for the fence.
    pub(crate) fn adopt_checks(&self, fence: &Fence) {
        let carried = std::mem::take(&mut *fence.shared.checks.lock());
        if carried.is_empty() {
            return;
        }
        let mut mine = self.checks.borrow_mut();
        for p in carried {
            let after = p.after.unwrap_or_else(|| fence.clone());
            mine.push(Pending {
                check: p.check,
                after: Some(after),
            });
        }
    }

    /// Checks every pending result now: waits for the work that writes
    /// them (this task's stream, the fences of the tasks they came from).
    /// `gpu`'s top-level scope calls it at its end when its tasks left
    /// results unchecked, so a failure is never lost.
    ///
    /// # Errors
    ///
    /// The first failed result ([`Error::NotPositiveDefinite`],
    /// [`Error::Singular`], ...); driver errors from the waits.
    pub fn check_results(&self) -> Result<()> {
        if !self.has_unchecked_results() {
            return Ok(());
        }
        if self.checks.borrow().iter().any(|p| p.after.is_none()) {
            // Its own results: a synchronize concludes every check.
            return self.synchronize();
        }
        let checks = std::mem::take(&mut *self.checks.borrow_mut());
        conclude(checks, true)
    }

    /// At the task's drop: its results, waited for and checked; failures
    /// kept for the runtime's next synchronize.
    pub(crate) fn conclude_at_drop(&mut self) {
        let checks = std::mem::take(self.checks.get_mut());
        if checks.is_empty() {
            return;
        }
        let mut own_done = true;
        if checks.iter().any(|p| p.after.is_none()) && self.slot.get().is_some() {
            own_done = self
                .rt
                .wait_past_errors(|| {
                    self.rt
                        .driver()
                        .stream_sync(self.raw(), self.rt.sync_mode())
                })
                .is_ok();
        }
        if let Err(e) = conclude(checks, own_done) {
            self.rt.keep_unreported(e);
        }
    }
}

/// At a fence's drop: the results it still carries, waited for (`own`,
/// its event, before it goes back to the pool) and checked; failures kept
/// for the runtime's next synchronize.
pub(crate) fn conclude_at_fence_drop(
    rt: &crate::Runtime,
    checks: Vec<Pending>,
    own: Option<crate::driver::RawEvent>,
) {
    let mut own_done = true;
    if checks.iter().any(|p| p.after.is_none()) {
        own_done = match own {
            Some(ev) => rt.wait_past_errors(|| rt.driver().event_sync(ev)).is_ok(),
            // Checks with no record to wait for are never carried
            // (`final_fence`): nothing is known to be done.
            None => false,
        };
    }
    if let Err(e) = conclude(checks, own_done) {
        rt.keep_unreported(e);
    }
}

/// After a successful wait for a fence's event: the results it carries,
/// checked.
pub(crate) fn conclude_carried(checks: Vec<Pending>) -> Result<()> {
    conclude(checks, true)
}
