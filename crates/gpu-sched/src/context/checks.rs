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
/// every check is consumed.
fn conclude(checks: Vec<Pending>) -> Result<()> {
    let mut first = None;
    for p in checks {
        let r = match p.after {
            Some(f) => f.synchronize().and_then(|()| p.check.verdict()),
            None => p.check.verdict(),
        };
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
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
        let checks = std::mem::take(&mut *self.checks.borrow_mut());
        conclude(checks)?;
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
        let own: Vec<Check> = std::mem::take(&mut *self.checks.borrow_mut())
            .into_iter()
            .filter_map(|p| match p.after {
                None => Some(p.check),
                Some(other) => {
                    // Another task's, with its own fence: stays pending here
                    // with it (put back below).
                    self.checks.borrow_mut().push(Pending {
                        check: p.check,
                        after: Some(other),
                    });
                    None
                }
            })
            .collect();
        // The other tasks' results ride along too, each with its fence.
        let others = std::mem::take(&mut *self.checks.borrow_mut());
        let mut carried = f.shared.checks.lock();
        carried.extend(own.into_iter().map(|check| Pending { check, after: None }));
        carried.extend(others);
        drop(carried);
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
        conclude(checks)
    }

    /// At the task's drop: its results, waited for and checked; failures
    /// kept for the runtime's next synchronize.
    pub(crate) fn conclude_at_drop(&mut self) {
        let checks = std::mem::take(self.checks.get_mut());
        if checks.is_empty() {
            return;
        }
        if checks.iter().any(|p| p.after.is_none()) && self.slot.get().is_some() {
            let _ = self.rt.wait_past_errors(|| {
                self.rt
                    .driver()
                    .stream_sync(self.raw(), self.rt.sync_mode())
            });
        }
        if let Err(e) = conclude(checks) {
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
    if checks.iter().any(|p| p.after.is_none()) {
        if let Some(ev) = own {
            let _ = rt.wait_past_errors(|| rt.driver().event_sync(ev));
        }
    }
    if let Err(e) = conclude(checks) {
        rt.keep_unreported(e);
    }
}

/// After a wait for a fence's event: the results it carries, checked.
pub(crate) fn conclude_carried(checks: Vec<Pending>) -> Result<()> {
    conclude(checks)
}
