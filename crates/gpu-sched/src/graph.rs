//! Graphs (R12): the executable graph a capture makes, and its launch,
//! which hands off and stamps every buffer it touches as one operation.
//! Capturing is `TaskContext::capture` and `capture_scope` (context/graph.rs).

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::context::{TaskContext, Touch, MAX_TOUCHES};
use crate::driver::{MemAccess, RawGraph};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use gpu_epoch::Access;

/// An executable graph captured from a task's operations. Launching it
/// stamps every buffer it touches on the launch stream, as one operation.
pub struct Graph {
    pub(crate) rt: Runtime,
    pub(crate) raw: RawGraph,
    pub(crate) touches: Vec<MemAccess>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("buffers", &self.touches.len())
            .finish()
    }
}

impl Graph {
    /// The memory the graph touches, as (device address, bytes, access).
    pub fn touches(&self) -> impl Iterator<Item = (u64, usize, Access)> + '_ {
        self.touches.iter().map(|m| (m.ptr, m.bytes, m.access))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let _ = self.rt.driver().graph_destroy(self.raw);
    }
}

/// A graph launch being built.
#[must_use = "a graph launch does nothing until submitted"]
pub struct GraphLaunch<'c, 'b> {
    pub(crate) ctx: &'c TaskContext,
    pub(crate) graph: &'c Graph,
    pub(crate) touches: Vec<Touch<'b>>,
    pub(crate) error: Option<Error>,
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
            ctx.tracked("graph (its buffers)", batch, |_, _| Ok(()))?;
        }
        // SAFETY: every range the captured operations touch (the capture's
        // log) lies in a buffer passed here with the access it needs
        // (checked above), which `tracked` hands to this stream (the
        // batches above, then the last one here); a capture
        // takes no host memory (§8), a gate's flags outlive a graph that
        // waits on them (the gate keeps them when no fence follows), and
        // raw pointers are the launch's caller's (`Launch::submit`).
        ctx.tracked("graph", rest, |_, stream| unsafe {
            ctx.rt.driver().graph_launch(raw, stream)
        })
    }
}
