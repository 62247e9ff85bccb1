//! A task's graphs (R12): capturing its stream's operations, or a scope's,
//! into a graph, and launching one, which hands off and stamps every buffer
//! it touches as one operation.

use super::{TaskContext, Touch, MAX_TOUCHES};
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::driver::RawGraph;
use crate::error::{Error, Result};
use crate::graph::{Graph, ScopeCapture};
use gpu_epoch::Access;

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
        // (DESIGN "Soundness"): the stream never goes back to the pool capturing, where the
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
        // Recorded below with a raw call: it covers nothing (DESIGN "Soundness").
        l.record_untracked(&pre.coverage);
        let slot = self.rt.core().streams.capture_slot(self.sid());
        let mut slot = slot.lock();
        if self.rt.core().streams.holders(self.sid()) > 1 {
            // DESIGN "Streams are a resource": another live task submits to this stream (the pool ran
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
    /// task begun with its [`TaskHooks::capture_handle`](crate::plumbing::TaskHooks::capture_handle) while `body`
    /// runs (with `gpu`, the tasks a scope spawns, `gpu::capture`, and
    /// their spawns and joins, which pass the handle on). Nothing runs; [`TaskContext::launch_graph`]
    /// replays it, ordered as the tasks would have been on their own
    /// streams (each task's operations in order, after its spawner's and
    /// the tasks it joined, and after every earlier operation whose memory
    /// conflicts with its own: `crate::capture`).
    ///
    /// In the capture, as in [`TaskContext::capture`], nothing may touch
    /// host memory, allocate, synchronize or record an event; and the
    /// tasks share the capturing stream, so [`RawTask::cu_stream`](crate::raw::RawTask::cu_stream)
    /// panics there and [`RawTask::raw_ptr`](crate::raw::RawTask::raw_ptr) is refused. Work through
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
        // Ends the capture on every path out, unwinding included (DESIGN "Soundness").
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

/// A graph launch being built.
#[must_use = "a graph launch does nothing until submitted"]
pub struct GraphLaunch<'c, 'b> {
    ctx: &'c TaskContext,
    graph: &'c Graph,
    touches: Vec<Touch<'b>>,
    error: Option<Error>,
}

impl std::fmt::Debug for GraphLaunch<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphLaunch").finish_non_exhaustive()
    }
}

impl<'c, 'b> GraphLaunch<'c, 'b> {
    /// A buffer the graph only reads.
    pub fn read<T: DeviceRepr>(mut self, buf: &'b (impl DeviceSlice<T> + ?Sized)) -> Self {
        self.check(buf.runtime_id());
        self.touches.push(Touch::read(buf));
        self
    }

    /// A buffer the graph writes.
    pub fn write<T: DeviceRepr>(mut self, buf: &'b mut (impl DeviceSliceMut<T> + ?Sized)) -> Self {
        self.check(buf.runtime_id());
        self.touches.push(Touch::write(buf));
        self
    }

    /// Keeps the first error: a buffer of another runtime.
    fn check(&mut self, runtime_id: u64) {
        if self.error.is_none() {
            self.error = self
                .ctx
                .rt
                .check_same(runtime_id, "a graph launch's buffer")
                .err();
        }
    }

    /// Hands off and stamps every buffer on this stream, then launches.
    ///
    /// # Errors
    ///
    /// [`Error::BadKernelArgs`] if a buffer the graph touches was not passed
    /// (or passed as a read where the graph writes); [`Error::WrongDevice`]
    /// for a graph or buffer of another runtime; driver errors.
    pub fn submit(mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for t in &self.graph.touches {
            let ok = self.touches.iter().any(|p| {
                p.mem.ptr <= t.ptr
                    && t.ptr + t.bytes as u64 <= p.mem.ptr + p.mem.bytes as u64
                    && (p.mem.access == Access::Write || t.access == Access::Read)
            });
            if !ok {
                return Err(Error::BadKernelArgs {
                    kernel: "graph launch",
                    problem: format!(
                        "the graph {} {:#x}..{:#x}; pass that buffer with {}",
                        if t.access == Access::Write {
                            "writes"
                        } else {
                            "reads"
                        },
                        t.ptr,
                        t.ptr + t.bytes as u64,
                        if t.access == Access::Write {
                            ".write(&mut buf)"
                        } else {
                            ".read(&buf)"
                        }
                    ),
                });
            }
        }
        let ctx = self.ctx;
        self.ctx.rt.check_same(self.graph.rt.id(), "the graph")?;
        if ctx.in_scope_capture() {
            // CUDA refuses a graph launch on a capturing stream, and its
            // batches below would stand for no node of their own.
            return Err(Error::Capturing {
                what: "launching a graph in a scope capture",
            });
        }
        let raw = self.graph.raw;
        // An operation touches at most `MAX_TOUCHES` buffers; a graph may
        // touch more (a captured scope): all but the last batch are handed
        // off and stamped by operations that submit nothing, in this
        // stream's current epoch, which the launch shares (nothing closes
        // the stream in between: only this task records on it).
        let n = self.touches.len();
        let last = n.saturating_sub(1) / MAX_TOUCHES * MAX_TOUCHES;
        let (first, rest) = self.touches.split_at_mut(last);
        for batch in first.chunks_mut(MAX_TOUCHES) {
            // Submitted by the launch below: no close after it (X6).
            ctx.submitting_later(|| ctx.tracked("graph (its buffers)", batch, |_, _| Ok(())))?;
        }
        // SAFETY: every range the captured operations touch (the capture's
        // log) lies in a buffer passed here with the access it needs
        // (checked above), which `tracked` hands to this stream (the
        // batches above, then the last one here); a capture
        // takes no host memory (DESIGN "Soundness"), a gate's flags outlive a graph that
        // waits on them (the gate keeps them when no fence follows), and
        // raw pointers are the launch's caller's (`Untracked`, `Kernel::launch`).
        ctx.tracked("graph", rest, |_, stream| unsafe {
            ctx.rt.driver().graph_launch(raw, stream)
        })
    }
}
