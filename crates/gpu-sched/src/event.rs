//! User events (R4, R6-R8): a pooled event and what the ledger knows it
//! covers; synchronizing and querying it. Recording and waiting are
//! `TaskContext::record` and `TaskContext::wait` (context/event.rs).

use crate::error::Result;
use crate::pool::PooledEvent;
use crate::runtime::Runtime;

/// A device event from the runtime's pool, with the ledger's knowledge of
/// what it covers. Any task may record, wait for, synchronize or query it;
/// facts come only from records on a stream the recording task owns (R2).
pub struct Event {
    pub(crate) rt: Runtime,
    held: Option<Box<PooledEvent>>,
    /// The driver handle was handed out ([`Event::cu_event`]): records the
    /// ledger does not see may follow, so waits on it teach nothing.
    raw_out: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("covers", &self.pooled().coverage.source())
            .finish()
    }
}

impl Runtime {
    /// An event from the pool (X5).
    ///
    /// # Errors
    ///
    /// A driver error if the pool is empty and creating one fails.
    pub fn event(&self) -> Result<Event> {
        let p = self.take_event()?;
        // A new event covers nothing, whatever its last holder recorded
        // (DESIGN "Soundness"): synchronizing it before a record teaches nothing.
        self.ledger_rw().record_untracked(&p.coverage);
        Ok(Event {
            rt: self.clone(),
            held: Some(p),
            raw_out: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl Event {
    #[inline]
    pub(crate) fn pooled(&self) -> &PooledEvent {
        self.held.as_ref().expect("event present until drop")
    }

    /// The driver's handle (`CUevent` as an integer on CUDA), for interop.
    /// Records and waits made on it directly give the ledger no fact, and
    /// from this call on, neither do this event's tracked waits,
    /// synchronizes and queries: a raw record may have moved it. The handle
    /// is valid until the event is dropped.
    pub fn cu_event(&self) -> u64 {
        self.raw_out
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.pooled().raw.0
    }

    /// Whether tracked waits on the event may teach facts.
    #[inline]
    pub(crate) fn facts_ok(&self) -> bool {
        !self.raw_out.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What the event covers: the stream and closed epoch of its last
    /// counted record, or `None`.
    pub fn covers(&self) -> Option<(gpu_epoch::StreamId, gpu_epoch::StreamEpoch)> {
        self.pooled().coverage.source()
    }

    /// R6: waits on the host for the event's last record. If the event was
    /// not re-recorded meanwhile, what it covers becomes Completed.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn synchronize(&self) -> Result<()> {
        let p = self.pooled();
        self.rt.ledger_rw().event_complete(&p.coverage, || {
            self.rt.driver().event_sync(p.raw).map(|()| self.facts_ok())
        })?;
        Ok(())
    }

    /// R7: whether the event's last record completed; if so (and it was not
    /// re-recorded meanwhile) what it covers becomes Completed.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn query(&self) -> Result<bool> {
        let p = self.pooled();
        let mut done = false;
        self.rt.ledger_rw().event_complete(&p.coverage, || {
            done = self.rt.driver().event_query(p.raw)?;
            Ok::<_, crate::Error>(done && self.facts_ok())
        })?;
        Ok(done)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Some(e) = self.held.take() {
            // A queued wait captured the record already; the event can go
            // back to the pool and be recorded again. A raw handle may have
            // recorded it where the ledger did not see: forget its coverage.
            if !self.facts_ok() {
                self.rt.ledger_rw().record_untracked(&e.coverage);
            }
            self.rt.give_event(e);
        }
    }
}
