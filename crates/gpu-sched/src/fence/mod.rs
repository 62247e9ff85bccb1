//! Fences: a recorded point on a task's stream that other tasks are
//! ordered after (spawn, join, R8). Below the task context, which keeps the
//! fences a task must wait for; recording and waiting are
//! `TaskContext::fence` and `TaskContext::wait_fence` (context/event.rs).
//! Beside this file: `checks.rs` (the results of library operations a
//! fence carries, and those dropped tasks and fences defer to the runtime).

use crate::error::Result;
use crate::pool::PooledEvent;
use crate::runtime::Runtime;
use checks::{conclude_at_fence_drop, conclude_carried};

mod checks;

pub(crate) use checks::{carried_fences, conclude, defer, Check, Pending};

/// A recorded point on a task's stream that other tasks can be ordered
/// after: what `spawn` hands a child and a finished child hands its joiner.
/// Clones share one pooled event, which goes back to the pool once the last
/// clone is gone: by then every device wait on it was submitted (a wait
/// captures the record when it is submitted), so it may be recorded again.
#[derive(Clone)]
pub struct Fence {
    pub(crate) shared: std::sync::Arc<FenceEvent>,
}

/// The pooled event of a fence and its runtime; in a scope capture, the
/// graph nodes it stands for instead (no event: nothing runs yet).
pub(crate) struct FenceEvent {
    pub(crate) rt: Runtime,
    pub(crate) ev: Option<Box<PooledEvent>>,
    /// The capture's id and the nodes.
    pub(crate) nodes: Option<(u64, crate::driver::Nodes)>,
    /// Results of library operations of the fenced work, carried to
    /// whoever waits for the fence (`TaskContext::final_fence`).
    pub(crate) checks: parking_lot::Mutex<Vec<Pending>>,
}

impl Drop for FenceEvent {
    fn drop(&mut self) {
        let checks = std::mem::take(self.checks.get_mut());
        if !checks.is_empty() {
            // Deferred, never waited for here: the event goes with them.
            conclude_at_fence_drop(&self.rt, checks, self.ev.take());
        }
        if let Some(p) = self.ev.take() {
            self.rt.give_event(p);
        }
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence").finish_non_exhaustive()
    }
}

impl Fence {
    pub(crate) fn event(&self) -> &PooledEvent {
        self.shared
            .ev
            .as_ref()
            .expect("a fence's event lives as long as it")
    }

    /// The fence's runtime (its device).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.shared.rt
    }

    /// Waits on the host for the fence (R6) and consumes it. A fence of a
    /// scope capture returns at once: its work is not queued, it is in the
    /// graph. Results of library operations the fence carries (a task's
    /// final fence, DESIGN "Numerical libraries and foreign work") are checked after the wait.
    ///
    /// # Errors
    ///
    /// Driver errors; a carried result's failure
    /// ([`crate::Error::NotPositiveDefinite`], ...).
    pub fn synchronize(self) -> Result<()> {
        if self.shared.nodes.is_some() {
            // A fence of a scope capture: its operations run only when the
            // graph is launched; nothing of them is queued to wait for.
            return Ok(());
        }
        let rt = &self.shared.rt;
        let p = self.event();
        rt.ledger_rw()
            .event_complete(&p.coverage, || rt.driver().event_sync(p.raw).map(|()| true))?;
        let carried = std::mem::take(&mut *self.shared.checks.lock());
        conclude_carried(carried)
    }
}
