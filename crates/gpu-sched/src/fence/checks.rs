//! The checks a fence carries: results a library leaves for the host (a
//! factorization's `info`, DESIGN "Numerical libraries and foreign work"),
//! each read after a host wait that covers the work writing it, never with
//! a wait of its own. A task keeps its own ([`Pending::own`], covered by a
//! synchronize of its stream); its final fence carries them to whoever
//! waits for it, and a task that takes them over keeps each with the fence
//! of its work (DESIGN "Where a failure goes"). `TaskContext`'s side (a
//! task's checks, registered and concluded at its waits) is
//! `context/checks.rs`.
//!
//! A task or fence dropped with results unchecked never blocks: its
//! results are deferred to the runtime's reclaim path ([`defer`]: a list
//! checked, without waiting, at each ordered free and at
//! [`crate::Runtime::synchronize`], which waits for them). A failure found
//! there belongs to nobody's wait but the runtime's next
//! [`crate::Runtime::synchronize`]: never to an unrelated task's wait,
//! which keeps its data.

use super::{Fence, FenceEvent};
use crate::error::{Error, Result};
use crate::pool::PooledEvent;
use crate::runtime::{DeferredCheck, Reaped, Runtime, StatusJudge, StatusWord};

/// One result to check: the word the library writes, the operation, and
/// what a nonzero value means.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) word: StatusWord,
    pub(crate) op: &'static str,
    pub(crate) judge: StatusJudge,
    /// The named task that queued the work, and its device: the failure
    /// says so ([`Error::InTask`]).
    pub(crate) task: Option<(std::sync::Arc<str>, usize)>,
}

impl Check {
    /// The result as an error, if it is one. Only after a wait that
    /// covers the work that writes the word.
    fn verdict(&self) -> Result<()> {
        let bad = self.word.nonzero();
        let Some(&(first, v)) = bad.first() else {
            return Ok(());
        };
        let mut e = (self.judge)(self.op, v);
        if self.word.len() > 1 {
            e = Error::Context {
                context: batch_context(first, self.word.len(), &bad[1..]),
                source: Box::new(e),
            };
        }
        Err(match &self.task {
            Some((name, device)) => e.in_task(name.clone(), *device),
            None => e,
        })
    }
}

/// Which problem of a batch of `len` failed first (0-based, as the
/// caller's index), and the others that failed too (the first few).
fn batch_context(first: usize, len: usize, others: &[(usize, i32)]) -> String {
    const LISTED: usize = 8;
    let mut s = format!("problem {first} of a batch of {len}");
    if !others.is_empty() {
        let list: Vec<String> = others
            .iter()
            .take(LISTED)
            .map(|(i, _)| i.to_string())
            .collect();
        let more = others.len().saturating_sub(LISTED);
        s += &format!(" (also failed: {}", list.join(", "));
        if more > 0 {
            s += &format!(" and {more} more");
        }
        s += ")";
    }
    s
}

/// A check of a task's own work (`after: None`, covered by a synchronize
/// of its stream) or of another's, covered by `after`.
#[derive(Debug)]
pub(crate) struct Pending {
    check: Check,
    after: Option<Fence>,
}

impl Pending {
    /// A check of the holding task's own work.
    pub(crate) fn own(check: Check) -> Pending {
        Pending { check, after: None }
    }

    /// The fence of the work that writes the word; `None`: the holding
    /// task's own work.
    pub(crate) fn after(&self) -> Option<&Fence> {
        self.after.as_ref()
    }

    /// The check, taken over from whoever carried it with `fence`: covered
    /// by its own fence, or by `fence` for the carrier's own ones.
    pub(crate) fn carried_by(self, fence: &Fence) -> Pending {
        Pending {
            after: Some(self.after.unwrap_or_else(|| fence.clone())),
            check: self.check,
        }
    }
}

/// The first failure of `checks`, after waiting for each one's fence;
/// every check is consumed. `own_done`: whether the wait that covers the
/// checks of the task's own stream (`after: None`) succeeded. A word whose
/// writer may still be queued (its wait failed, also past transient
/// errors) is never given back: it is leaked, so no later operation gets
/// it while the device may still write it.
pub(crate) fn conclude(checks: Vec<Pending>, own_done: bool) -> Result<()> {
    let mut first = None;
    for p in checks {
        let done = match &p.after {
            None => own_done,
            Some(f) => wait_for(f),
        };
        let r = match (done, p.after) {
            // The fence is held until the word is read: it holds the
            // runtime, whose drop frees the words' pages (a fence of
            // another device's runtime may be the last that holds it).
            (true, Some(f)) => f.clone().synchronize().and_then(|()| p.check.verdict()),
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

/// Defers `checks` to `rt`'s reclaim path: each is checked once its work
/// is seen done ([`Deferred`]). `own`: the fence that covers the checks of
/// the dropped task's own stream (`after: None`); without one (none could
/// be recorded: a capture, a failed record) nothing says when their writer
/// is done, so their words are never given back and their results are
/// reported unchecked.
pub(crate) fn defer(rt: &Runtime, checks: Vec<Pending>, own: Option<Fence>) {
    let mut list: Vec<Box<dyn DeferredCheck>> = Vec::with_capacity(checks.len());
    for p in checks {
        match p.after.or_else(|| own.clone()) {
            Some(after) => list.push(Box::new(Deferred {
                check: p.check,
                after,
            })),
            None => {
                std::mem::forget(p.check.word);
                rt.keep_unreported(Error::Unsupported(
                    "a library result whose work could not be waited for: not checked",
                ));
            }
        }
    }
    rt.deferred_checks().keep(list);
}

/// A check deferred to the runtime, with the fence of its work.
struct Deferred {
    check: Check,
    after: Fence,
}

impl DeferredCheck for Deferred {
    /// Checked once its fence is seen done (`wait`: waited for); a failure
    /// goes to the runtime's next synchronize.
    fn reap(self: Box<Self>, rt: &Runtime, wait: bool) -> Reaped {
        let done = match self.after.shared.ev.as_ref() {
            None => Some(true),
            Some(_) if wait => Some(wait_for(&self.after)),
            Some(ev) => match rt.driver().event_query(ev.raw) {
                Ok(true) => Some(true),
                Ok(false) => None,
                Err(e) if e.is_sticky() => Some(false),
                Err(_) => None,
            },
        };
        let Some(done) = done else {
            return Reaped::Kept(self);
        };
        let Deferred { check, after } = *self;
        let p = Pending {
            check,
            after: Some(after),
        };
        Reaped::Done(conclude(vec![p], done))
    }
}

/// At a fence's drop: the results it still carries, deferred to the
/// runtime's reclaim path (never waited for here). `own`: the fence's
/// event, which covers the carried results of its own task; it moves to a
/// new fence that the deferred checks hold.
pub(super) fn conclude_at_fence_drop(
    rt: &Runtime,
    checks: Vec<Pending>,
    own: Option<Box<PooledEvent>>,
) {
    let own = own.map(|ev| Fence {
        shared: std::sync::Arc::new(FenceEvent {
            rt: rt.clone(),
            ev: Some(ev),
            nodes: None,
            checks: Default::default(),
        }),
    });
    defer(rt, checks, own);
}

/// The fences of other tasks' work that `checks` (a fence's carried
/// results) wait for besides the carrying fence's own event: what an
/// asynchronous wait for that fence must see done before it checks them
/// without blocking (`crate::future`).
pub(crate) fn carried_fences(checks: &[Pending]) -> Vec<Fence> {
    checks.iter().filter_map(|p| p.after.clone()).collect()
}

/// After a successful wait for a fence's event: the results it carries,
/// checked.
pub(super) fn conclude_carried(checks: Vec<Pending>) -> Result<()> {
    conclude(checks, true)
}
