//! Graphs (R12, DESIGN "Graphs without capture by hand"), in one wing:
//! the executable graph a capture makes and the memory it touches (here);
//! a scope's capture into one graph (`capture`); a graphed scope's
//! recording (`recording`), the graph kept between its runs with the
//! compare-or-build (`cache`), a foreign operation captured into a child
//! graph (`child`), and the lanes of a built graph (`lanes`).
//! `TaskContext`'s entry points stay with it: `capture`, `capture_scope`
//! and `launch_graph` (context/graph.rs), `graphed_scope`
//! (context/graphed.rs).

mod batch;
mod cache;
mod capture;
mod child;
mod lanes;
mod recording;

pub use cache::{GraphCache, GraphStats};
pub use capture::CaptureHandle;
pub(crate) use capture::ScopeCapture;
pub(crate) use child::{capture_child, CallKey, ChildCache};

use crate::driver::{MemAccess, RawGraph};
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
