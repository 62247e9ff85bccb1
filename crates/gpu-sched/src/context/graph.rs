//! A task's graphs (R12): capturing its stream's operations, or a scope's,
//! into a graph, and starting a graph's launch.

use super::TaskContext;
use crate::capture::ScopeCapture;
use crate::driver::RawGraph;
use crate::error::{Error, Result};
use crate::graph::{Graph, GraphLaunch};

impl TaskContext {
    /// Captures the operations `body` submits on this task's stream into a
    /// graph. While capturing, operations do not stamp (the graph launch
    /// will), records and waits give no fact, hand-offs synchronize the old
    /// stream on the host, and synchronizing this stream is an error.
    ///
    /// # Errors
    ///
    /// What `body` returned (the capture is ended and discarded first);
    /// driver errors.
    pub fn capture(&self, body: impl FnOnce(&TaskContext) -> Result<()>) -> Result<Graph> {
        self.begin_capture()?;
        *self.capture_log.borrow_mut() = Some(Vec::new());
        // If `body` panics, the guard ends the capture as the panic unwinds
        // (§8): the stream never goes back to the pool capturing, where the
        // next task's work would vanish into a graph nobody launches.
        let mut guard = CaptureGuard {
            ctx: self,
            open: true,
        };
        let r = body(self);
        let touches = self.capture_log.borrow_mut().take().unwrap_or_default();
        let g = guard.end();
        match (r, g) {
            (Ok(()), Ok(raw)) => Ok(Graph {
                rt: self.rt.clone(),
                raw,
                touches,
            }),
            (Err(e), Ok(raw)) => {
                let _ = self.rt.driver().graph_destroy(raw);
                Err(e)
            }
            // The body's error is the cause; ending the capture may fail
            // because of it.
            (Err(e), Err(_)) => Err(e),
            (Ok(()), Err(e)) => Err(e),
        }
    }

    /// Begins a capture on this task's stream: an event of what was queued
    /// before (in the stream's capture slot), the driver's capture, the
    /// ledger's flag.
    fn begin_capture(&self) -> Result<()> {
        self.bind()?;
        let l = self.rt.ledger_rw();
        if l.is_capturing(self.sid()) || self.in_scope_capture() {
            return Err(Error::Capturing {
                what: "beginning a nested capture",
            });
        }
        // What this stream queued before the capture: other tasks' hand-offs
        // from it wait for this while it is captured (see `wait_streams`).
        let pre = self.rt.take_event()?;
        // Recorded below with a raw call: it covers nothing (§8).
        l.record_untracked(&pre.coverage);
        let slot = self.rt.core().streams.capture_slot(self.sid());
        let mut slot = slot.lock();
        if self.rt.core().streams.holders(self.sid()) > 1 {
            // §9: another live task submits to this stream (the pool ran
            // out): its work would vanish into this graph.
            self.rt.give_event(pre);
            return Err(Error::Unsupported(
                "capturing on a stream shared with another live task (more live tasks submit GPU work than the runtime has streams)",
            ));
        }
        let begun = self
            .rt
            .driver()
            .record(pre.raw, self.raw())
            .and_then(|_| self.rt.driver().begin_capture(self.raw()));
        if let Err(e) = begun {
            self.rt.give_event(pre);
            return Err(e);
        }
        l.set_capturing(self.sid(), true);
        *slot = Some(pre);
        Ok(())
    }

    /// Captures into one graph the operations of this task and of every
    /// task begun with its [`TaskContext::capture_handle`] while `body`
    /// runs (with `gpu`, the tasks a scope spawns, `gpu::capture`, and
    /// their spawns and joins, which pass the handle on). Nothing runs; [`TaskContext::launch_graph`]
    /// replays it, ordered as the tasks would have been on their own
    /// streams (each task's operations in order, after its spawner's and
    /// the tasks it joined, and after every earlier operation whose memory
    /// conflicts with its own: `crate::capture`).
    ///
    /// In the capture, as in [`TaskContext::capture`], nothing may touch
    /// host memory, allocate, synchronize or record an event; and the
    /// tasks share the capturing stream, so [`TaskContext::cu_stream`]
    /// panics there and [`TaskContext::raw_ptr`] is refused. Work through
    /// a raw address taken before the capture (an `unsafe` launch) follows
    /// its own task's earlier operations only. `body` must end every task it begins before it
    /// returns (a scope does).
    ///
    /// # Errors
    ///
    /// What `body` returned (the capture is ended and discarded first);
    /// [`Error::Capturing`] inside another capture; driver errors.
    pub fn capture_scope(&self, body: impl FnOnce() -> Result<()>) -> Result<Graph> {
        self.begin_capture()?;
        let cap = std::sync::Arc::new(ScopeCapture::new(
            self.rt.id(),
            self.task().clone(),
            (self.sid(), self.raw()),
        ));
        self.chain.borrow_mut().clear();
        *self.capture.borrow_mut() = Some(cap.clone());
        // Ends the capture on every path out, unwinding included (§8).
        let mut guard = ScopeCaptureGuard {
            ctx: self,
            cap: &cap,
            open: true,
        };
        let r = body();
        let g = guard.end();
        match (r, g) {
            (Ok(()), Ok(raw)) => Ok(Graph {
                rt: self.rt.clone(),
                raw,
                touches: cap.touches(),
            }),
            (Err(e), Ok(raw)) => {
                let _ = self.rt.driver().graph_destroy(raw);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
            (Ok(()), Err(e)) => Err(e),
        }
    }

    /// Ends this task's capture: the ledger's flag, the driver's capture,
    /// the pre-capture event.
    fn end_capture(&self) -> Result<RawGraph> {
        let mut slot = self.rt.core().streams.capture_slot(self.sid()).lock();
        self.rt.ledger_rw().set_capturing(self.sid(), false);
        let g = self.rt.driver().end_capture(self.raw());
        if let Some(pre) = slot.take() {
            self.rt.give_event(pre);
        }
        g
    }

    /// Starts a launch of `graph`: pass every buffer it touches, `&` for the
    /// ones it only reads and `&mut` for the ones it writes, then submit.
    pub fn launch_graph<'c, 'b>(&'c self, graph: &'c Graph) -> GraphLaunch<'c, 'b> {
        GraphLaunch {
            ctx: self,
            graph,
            touches: Vec::new(),
            error: None,
        }
    }
}

/// Ends a capture on every path out of [`TaskContext::capture`], unwinding
/// included.
struct CaptureGuard<'a> {
    ctx: &'a TaskContext,
    open: bool,
}

impl CaptureGuard<'_> {
    /// Ends the capture now; the graph is the caller's.
    fn end(&mut self) -> Result<RawGraph> {
        self.open = false;
        self.ctx.end_capture()
    }
}

impl Drop for CaptureGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            self.ctx.capture_log.borrow_mut().take();
            if let Ok(raw) = self.ctx.end_capture() {
                let _ = self.ctx.rt.driver().graph_destroy(raw);
            }
        }
    }
}

/// Ends a scope capture on every path out of [`TaskContext::capture_scope`].
struct ScopeCaptureGuard<'a> {
    ctx: &'a TaskContext,
    cap: &'a ScopeCapture,
    open: bool,
}

impl ScopeCaptureGuard<'_> {
    /// Ends the capture now: its tasks submit nothing more, this task leaves
    /// it; the graph is the caller's.
    fn end(&mut self) -> Result<RawGraph> {
        self.open = false;
        self.cap.end();
        *self.ctx.capture.borrow_mut() = None;
        self.ctx.chain.borrow_mut().clear();
        self.ctx.end_capture()
    }
}

impl Drop for ScopeCaptureGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            if let Ok(raw) = self.end() {
                let _ = self.ctx.rt.driver().graph_destroy(raw);
            }
        }
    }
}
