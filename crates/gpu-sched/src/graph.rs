//! Graphs (R12): the executable graph a capture makes, and the memory it
//! touches. Capturing and launching are `TaskContext::capture`,
//! `capture_scope` and `launch_graph` (context/graph.rs).

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
