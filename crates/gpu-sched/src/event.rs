//! User events: record, wait, synchronize, query (R4, R6-R8).

use crate::context::TaskContext;
use crate::error::{Error, Result};
use crate::pool::PooledEvent;
use crate::runtime::Runtime;

/// A device event from the runtime's pool, with the ledger's knowledge of
/// what it covers. Any task may record, wait for, synchronize or query it;
/// facts come only from records on a stream the recording task owns (R2).
pub struct Event {
    rt: Runtime,
    inner: Option<Box<PooledEvent>>,
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
        // (§8): synchronizing it before a record teaches nothing.
        self.inner.ledger.record_untracked(&p.coverage);
        Ok(Event {
            rt: self.clone(),
            inner: Some(p),
            raw_out: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl Event {
    #[inline]
    pub(crate) fn pooled(&self) -> &PooledEvent {
        self.inner.as_ref().expect("event present until drop")
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
    fn facts_ok(&self) -> bool {
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
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_wait(&p.coverage);
        self.rt.driver().event_sync(p.raw)?;
        if self.facts_ok() {
            l.finish_event_complete(&p.coverage, ticket);
        }
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
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_wait(&p.coverage);
        let done = self.rt.driver().event_query(p.raw)?;
        if done && self.facts_ok() {
            l.finish_event_complete(&p.coverage, ticket);
        }
        Ok(done)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Some(e) = self.inner.take() {
            // A queued wait captured the record already; the event can go
            // back to the pool and be recorded again. A raw handle may have
            // recorded it where the ledger did not see: forget its coverage.
            if !self.facts_ok() {
                self.rt.inner.ledger.record_untracked(&e.coverage);
            }
            self.rt.give_event(e);
        }
    }
}

impl TaskContext {
    /// R4: records `event` on this task's stream, closing its epoch.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; driver errors.
    pub fn record(&self, event: &Event) -> Result<()> {
        self.rt.check_same(event.rt.id(), "the event")?;
        self.bind();
        let p = event.pooled();
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_record(&self.task, &p.coverage, self.stream);
        if let Err(e) = self.rt.driver().record(p.raw, self.raw) {
            l.abort_record(&p.coverage, ticket);
            return Err(e);
        }
        l.finish_record(&p.coverage, ticket);
        Ok(())
    }

    /// R8: this task's stream waits on the device for `event`'s last record;
    /// work submitted afterwards is Ordered after what it covers.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; driver errors.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.rt.check_same(event.rt.id(), "the event")?;
        self.bind();
        let p = event.pooled();
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_wait(&p.coverage);
        if l.is_capturing(self.stream) {
            // Only orders the graph's operations: no fact (R12).
            return self.rt.driver().wait_event_in_capture(self.raw, p.raw);
        }
        self.rt.driver().wait_event(self.raw, p.raw)?;
        if event.facts_ok() {
            l.finish_stream_wait(&self.task, &p.coverage, ticket, self.stream);
        }
        Ok(())
    }

    /// Records a pooled event on this stream for a child or a joiner to wait
    /// on (spawn and join, R8).
    pub(crate) fn record_pooled(&self) -> Result<Box<PooledEvent>> {
        self.bind();
        let p = self.rt.take_event()?;
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_record(&self.task, &p.coverage, self.stream);
        if let Err(e) = self.rt.driver().record(p.raw, self.raw) {
            l.abort_record(&p.coverage, ticket);
            self.rt.give_event(p);
            return Err(e);
        }
        l.finish_record(&p.coverage, ticket);
        Ok(p)
    }

    /// Waits on a pooled event (R8) and gives it back to the pool.
    pub(crate) fn wait_pooled(&self, p: Box<PooledEvent>) -> Result<()> {
        self.bind();
        let l = &self.rt.inner.ledger;
        let ticket = l.begin_wait(&p.coverage);
        let r = self.rt.driver().wait_event(self.raw, p.raw);
        if r.is_ok() {
            l.finish_stream_wait(&self.task, &p.coverage, ticket, self.stream);
        }
        self.rt.give_event(p);
        r
    }
}

/// R6 on a pooled event, then back to the pool.
fn sync_and_return(rt: &Runtime, p: Box<PooledEvent>) -> Result<()> {
    let l = &rt.inner.ledger;
    let ticket = l.begin_wait(&p.coverage);
    let r = rt.driver().event_sync(p.raw);
    if r.is_ok() {
        l.finish_event_complete(&p.coverage, ticket);
    }
    rt.give_event(p);
    r
}

/// A recorded point on a task's stream that another task can be ordered
/// after: what `spawn` hands a child and a finished child hands its joiner.
pub struct Fence {
    rt: Runtime,
    inner: Option<Box<PooledEvent>>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence").finish_non_exhaustive()
    }
}

impl TaskContext {
    /// Records a fence: everything this task submitted so far.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn fence(&self) -> Result<Fence> {
        Ok(Fence {
            rt: self.rt.clone(),
            inner: Some(self.record_pooled()?),
        })
    }

    /// Orders this task's stream after `fence` on the device (R8) and
    /// consumes it.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; driver errors.
    pub fn wait_fence(&self, mut fence: Fence) -> Result<()> {
        self.rt.check_same(fence.rt.id(), "the fence")?;
        match fence.inner.take() {
            Some(p) => self.wait_pooled(p),
            None => Err(Error::Unsupported("an empty fence")),
        }
    }

    /// Waits on the host for `fence` (R6) and consumes it.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn sync_fence(&self, fence: Fence) -> Result<()> {
        // The fence's own runtime: its event and coverage belong to that
        // ledger and driver, whichever task asks (§8).
        fence.synchronize()
    }
}

impl Fence {
    /// Waits on the host for the fence (R6) and consumes it.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn synchronize(mut self) -> Result<()> {
        match self.inner.take() {
            Some(p) => sync_and_return(&self.rt, p),
            None => Ok(()),
        }
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        if let Some(p) = self.inner.take() {
            self.rt.give_event(p);
        }
    }
}
