//! A foreign operation of a graphed scope as a child graph (DESIGN
//! "Graphs without capture by hand"): its work captured on a side stream,
//! a stream of the runtime outside the pool and the ledger on which
//! nothing ever runs, into a graph of its own that the scope's graph runs
//! as one node.

use crate::driver::{ChildGraph, RawStream};
use crate::error::Result;
use crate::runtime::Runtime;

/// Captures what `queue` queues on the side stream it is given into a
/// child graph: the graph, and what `queue` returned. The capture ends on
/// every path: if `queue` or the capture fails, the graph (if any) is
/// destroyed and the error returned (`queue`'s first).
pub(crate) fn capture_child<R>(
    rt: &Runtime,
    queue: impl FnOnce(RawStream) -> Result<R>,
) -> Result<(ChildGraph, R)> {
    rt.with_side_stream(|side| {
        let drv = rt.driver();
        drv.begin_capture(side)?;
        let queued = queue(side);
        let ended = drv.end_capture_child(side);
        match (queued, ended) {
            (Ok(r), Ok(g)) => Ok((ChildGraph::new(g, rt.driver_arc()), r)),
            (Err(e), Ok(g)) => {
                drv.child_destroy(g);
                Err(e)
            }
            (Err(e), Err(_)) | (Ok(_), Err(e)) => Err(e),
        }
    })
}
