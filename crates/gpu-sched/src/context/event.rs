//! A task's events and fences (R4, R6-R8): recording them on its stream,
//! and its stream's device waits and host waits for them.

use super::TaskContext;
use crate::error::Result;
use crate::event::Event;
use crate::fence::{Fence, FenceEvent};
use crate::pool::PooledEvent;

impl TaskContext {
    /// DESIGN "Soundness": a record inside a capture would be a node of the graph, and a
    /// stream that waits on it would join the capture: that stream's later
    /// work would go into this task's graph and never run. Refused.
    fn refuse_in_capture(&self, what: &'static str) -> Result<()> {
        // A graphed scope's stream is not captured, but a record there
        // would close the epoch its recorded operations are stamped in
        // before the graph is launched (DESIGN "Graphs without capture by hand").
        if self.capturing() {
            return Err(crate::Error::Capturing { what });
        }
        Ok(())
    }

    /// R4: records `event` on this task's stream, closing its epoch. Not
    /// while capturing (another stream waiting on it would join the
    /// capture, DESIGN "Soundness").
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
        // An event of another device of the group is waited for too (DESIGN "Beyond one GPU").
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
                    checks: Default::default(),
                }),
            });
        }
        Ok(Fence {
            shared: std::sync::Arc::new(FenceEvent {
                rt: self.rt.clone(),
                ev: Some(self.record_pooled()?),
                nodes: None,
                checks: Default::default(),
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
        self.adopt_checks(&fence);
        // A fence of another device of the group is waited for too (DESIGN "Beyond one GPU").
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
        // ledger and driver, whichever task asks (DESIGN "Soundness").
        fence.synchronize()
    }
}
