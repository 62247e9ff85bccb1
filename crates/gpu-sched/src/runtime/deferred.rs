//! What the runtime keeps for its reclaim path:
//! - buffers' frees whose hand-off to the reclaim stream failed on a live
//!   context, or waits for a graph not launched yet (`handoff.rs`
//!   decides): kept, and tried again at the next free, synchronize and
//!   graph launch, and at the runtime's drop;
//! - the checks of library results that dropped tasks and fences left
//!   (DESIGN "Where a failure goes"): kept as [`DeferredCheck`]s, what the
//!   fence's layer makes of them (`fence/checks.rs`), and concluded at
//!   each ordered free (those seen done) and at a synchronize (all).

use super::Runtime;
use crate::error::Result;
use gpu_epoch::Uses;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The frees kept: (address, bytes, uses).
#[derive(Debug, Default)]
pub(crate) struct DeferredFrees(Mutex<Vec<(u64, usize, Uses)>>);

impl DeferredFrees {
    /// Keeps the free of `ptr` (`bytes`, used as `uses`) for later.
    pub(crate) fn keep(&self, ptr: u64, bytes: usize, uses: &Uses) {
        self.0.lock().push((ptr, bytes, uses.clone()));
    }

    /// Every free kept, taken out (none: no allocation).
    pub(crate) fn take_all(&self) -> Vec<(u64, usize, Uses)> {
        let mut d = self.0.lock();
        if d.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut *d)
    }
}

/// A check of a library result deferred to the runtime, with whatever
/// says when the work that writes it is done (the fence of that work):
/// what the runtime asks of it, the type itself being the fence's layer's
/// (`fence/checks.rs`), above the runtime.
pub(crate) trait DeferredCheck: Send {
    /// Concludes the check if its work is done: `wait`, after waiting for
    /// it (a synchronize, after the device-wide wait: at once); else only
    /// if the work is seen done without waiting (never blocks), the check
    /// given back otherwise. `rt`: the runtime that keeps the check.
    fn reap(self: Box<Self>, rt: &Runtime, wait: bool) -> Reaped;
}

/// What [`DeferredCheck::reap`] made of a check.
pub(crate) enum Reaped {
    /// Its work is not seen done yet: kept for the next reap.
    Kept(Box<dyn DeferredCheck>),
    /// Concluded: the result's failure, if any.
    Done(Result<()>),
}

/// The checks kept, and whether there may be some (one load on the paths
/// that reap when there are none: every ordered free asks).
#[derive(Default)]
pub(crate) struct DeferredChecks {
    list: Mutex<Vec<Box<dyn DeferredCheck>>>,
    any: AtomicBool,
}

impl std::fmt::Debug for DeferredChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredChecks")
            .field("checks", &self.list.lock().len())
            .finish()
    }
}

impl DeferredChecks {
    /// Keeps `checks` for the reclaim path.
    pub(crate) fn keep(&self, checks: impl IntoIterator<Item = Box<dyn DeferredCheck>>) {
        let mut list = self.list.lock();
        let before = list.len();
        list.extend(checks);
        if list.len() > before {
            self.any.store(true, Ordering::Release);
        }
    }

    /// The checks whose work is done, concluded ([`DeferredCheck::reap`]);
    /// a failure is kept for `rt`'s next [`Runtime::synchronize`]. The
    /// others are kept.
    pub(crate) fn reap(&self, rt: &Runtime, wait: bool) {
        if !(self.any.load(Ordering::Acquire) && self.any.swap(false, Ordering::AcqRel)) {
            return;
        }
        let list = std::mem::take(&mut *self.list.lock());
        let mut kept = Vec::new();
        for c in list {
            match c.reap(rt, wait) {
                Reaped::Kept(c) => kept.push(c),
                Reaped::Done(Ok(())) => {}
                Reaped::Done(Err(e)) => rt.keep_unreported(e),
            }
        }
        self.keep(kept);
    }
}
