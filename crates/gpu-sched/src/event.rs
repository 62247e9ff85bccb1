//! User events: record, wait, synchronize, query (R4, R6-R8).

use crate::context::TaskContext;
use crate::error::Result;
use crate::fence::{Fence, FenceEvent};
use crate::pool::PooledEvent;
use crate::runtime::Runtime;

/// A device event from the runtime's pool, with the ledger's knowledge of
/// what it covers. Any task may record, wait for, synchronize or query it;
/// facts come only from records on a stream the recording task owns (R2).
pub struct Event {
    rt: Runtime,
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
        // (§8): synchronizing it before a record teaches nothing.
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

impl TaskContext {
    /// §8: a record inside a capture would be a node of the graph, and a
    /// stream that waits on it would join the capture: that stream's later
    /// work would go into this task's graph and never run. Refused.
    fn refuse_in_capture(&self, what: &'static str) -> Result<()> {
        if self.rt.ledger_rw().is_capturing(self.sid()) {
            return Err(crate::Error::Capturing { what });
        }
        Ok(())
    }

    /// R4: records `event` on this task's stream, closing its epoch. Not
    /// while capturing (another stream waiting on it would join the
    /// capture, §8).
    ///
    /// # Errors
    ///
    /// [`crate::Error::WrongDevice`]; [`crate::Error::Capturing`]; driver
    /// errors.
    pub fn record(&self, event: &Event) -> Result<()> {
        self.rt.check_same(event.rt.id(), "the event")?;
        self.bind()?;
        self.refuse_in_capture("recording an event")?;
        let p = event.pooled();
        self.rt
            .ledger_rw()
            .record(self.task(), &p.coverage, self.sid(), || {
                self.rt.driver().record(p.raw, self.raw())
            })?;
        Ok(())
    }

    /// R8: this task's stream waits on the device for `event`'s last record;
    /// work submitted afterwards is Ordered after what it covers.
    ///
    /// # Errors
    ///
    /// [`crate::Error::WrongDevice`]; driver errors.
    pub fn wait(&self, event: &Event) -> Result<()> {
        // An event of another device of the group is waited for too (§11).
        self.rt.check_group(&event.rt, "the event")?;
        self.bind()?;
        let p = event.pooled();
        let l = self.rt.ledger_rw();
        if self.in_scope_capture() {
            // The graph would keep the pooled event's handle, which goes
            // back to the pool with the `Event` and is recorded by others.
            return Err(crate::Error::Capturing {
                what: "waiting for an event in a scope capture",
            });
        }
        if l.is_capturing(self.sid()) {
            // Only orders the graph's operations: no fact (R12).
            return self.rt.driver().wait_event_in_capture(self.raw(), p.raw);
        }
        l.stream_wait(self.task(), &p.coverage, self.sid(), || {
            let waited = self.rt.driver().wait_event(self.raw(), p.raw);
            waited.map(|()| event.facts_ok())
        })?;
        Ok(())
    }

    /// Records a pooled event on this stream for a child or a joiner to wait
    /// on (spawn and join, R8).
    pub(crate) fn record_pooled(&self) -> Result<Box<PooledEvent>> {
        self.bind()?;
        self.refuse_in_capture("recording a fence (a spawn, a join)")?;
        let p = self.rt.take_event()?;
        let recorded = self
            .rt
            .ledger_rw()
            .record(self.task(), &p.coverage, self.sid(), || {
                self.rt.driver().record(p.raw, self.raw())
            });
        match recorded {
            Ok(_) => Ok(p),
            Err(e) => {
                self.rt.give_event(p);
                Err(e)
            }
        }
    }
}

impl TaskContext {
    /// Records a fence: everything this task submitted so far.
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn fence(&self) -> Result<Fence> {
        if self.in_scope_capture() {
            // The graph nodes of this task's work so far stand for it.
            self.bind()?;
            return Ok(Fence {
                shared: std::sync::Arc::new(FenceEvent {
                    rt: self.rt.clone(),
                    ev: None,
                    nodes: self
                        .capture
                        .borrow()
                        .as_ref()
                        .map(|c| (c.id, self.chain.borrow().clone())),
                }),
            });
        }
        Ok(Fence {
            shared: std::sync::Arc::new(FenceEvent {
                rt: self.rt.clone(),
                ev: Some(self.record_pooled()?),
                nodes: None,
            }),
        })
    }

    /// Orders this task's stream after `fence` on the device (R8) and
    /// consumes it (binding a stream first if the task has none). While
    /// the stream is captured ([`TaskContext::capture`]) or in a scope
    /// capture, a fence of work from before the capture is waited for on
    /// the host instead: that work is done before the graph exists, and
    /// the graph's launch orders its buffers again (R12).
    ///
    /// # Errors
    ///
    /// [`crate::Error::WrongDevice`]; driver errors.
    pub fn wait_fence(&self, fence: Fence) -> Result<()> {
        // A fence of another device of the group is waited for too (§11).
        self.rt.check_group(fence.runtime(), "the fence")?;
        self.bind()?;
        let capture = self.capture.borrow().as_ref().map(|c| c.id);
        match (&fence.shared.nodes, capture) {
            // In its scope capture: the next operation follows those nodes.
            (Some((id, nodes)), Some(mine)) if *id == mine => {
                self.chain.borrow_mut().extend_from_slice(nodes);
                return Ok(());
            }
            (Some(_), _) => {
                return Err(crate::Error::Capturing {
                    what: "waiting outside a scope capture for a fence of its tasks",
                })
            }
            // Work queued before the capture: it is done before the
            // graph's operations are even recorded (the graph's launch
            // orders its buffers again, R12).
            (None, Some(_)) => return fence.synchronize(),
            // The same in a capture of this task's stream: a device wait
            // there would wait, at every launch, for whatever the fence's
            // pooled event is recorded for next (CUDA refuses it).
            (None, None) if self.rt.ledger_rw().is_capturing(self.sid()) => {
                return fence.synchronize()
            }
            (None, None) => {}
        }
        let p = fence.event();
        self.rt
            .ledger_rw()
            .stream_wait(self.task(), &p.coverage, self.sid(), || {
                self.rt
                    .driver()
                    .wait_event(self.raw(), p.raw)
                    .map(|()| true)
            })?;
        Ok(())
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
