//! A foreign operation of a graphed scope as a child graph (DESIGN
//! "Graphs without capture by hand"): its work captured on a side stream,
//! a stream of the runtime outside the pool and the ledger on which
//! nothing ever runs, into a graph of its own that the scope's graph runs
//! as one node.

use crate::driver::{ChildGraph, MemAccess, RawStream};
use crate::error::Result;
use crate::runtime::Runtime;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// What names a capture that can be reused (`Foreign::reuse_capture`):
/// the operation's name, its key, and its buffers (addresses, lengths,
/// accesses).
pub(crate) type ChildKey = (&'static str, CallKey, SmallVec<[MemAccess; 4]>);

/// A foreign operation's scalars and options, as words
/// (`Foreign::reuse_capture`).
pub(crate) type CallKey = SmallVec<[u64; 8]>;

/// The captures of a graphed scope's foreign operations that declared
/// what their work depends on (`Foreign::reuse_capture`), kept from one
/// run to the next, so that a run whose operation has the same name, key
/// and buffers takes the last run's child graph instead of running the
/// device closure and capturing again (the node is then the same, and the
/// graph is replayed as it is). Only the last run's are kept.
#[derive(Default)]
pub(crate) struct ChildCache(Mutex<Runs>);

#[derive(Default)]
struct Runs {
    last: HashMap<ChildKey, Arc<ChildGraph>>,
    this: HashMap<ChildKey, Arc<ChildGraph>>,
}

impl ChildCache {
    /// The capture named `key` of this run or the last, kept for this
    /// run.
    pub(crate) fn get(&self, key: &ChildKey) -> Option<Arc<ChildGraph>> {
        let mut runs = self.0.lock();
        if let Some(g) = runs.this.get(key) {
            return Some(g.clone());
        }
        let g = runs.last.remove(key)?;
        runs.this.insert(key.clone(), g.clone());
        Some(g)
    }

    /// Keeps `g`, named `key`, for the next run.
    pub(crate) fn put(&self, key: ChildKey, g: Arc<ChildGraph>) {
        self.0.lock().this.insert(key, g);
    }

    /// A run ended: what it did not use is dropped.
    pub(crate) fn end_run(&self) {
        let mut runs = self.0.lock();
        runs.last = std::mem::take(&mut runs.this);
    }
}

/// Captures what `queue` queues on the side stream it is given into a
/// child graph: the graph, and what `queue` returned. The capture ends on
/// every path, a panic of `queue` included: if `queue` or the capture
/// fails, the graph (if any) is destroyed and the error returned
/// (`queue`'s first).
pub(crate) fn capture_child<R>(
    rt: &Runtime,
    queue: impl FnOnce(RawStream) -> Result<R>,
) -> Result<(ChildGraph, R)> {
    /// Ends the capture on `side` if `queue` unwinds: the side stream goes
    /// back to the runtime not capturing.
    struct EndOnUnwind<'a>(&'a Runtime, RawStream, bool);
    impl Drop for EndOnUnwind<'_> {
        fn drop(&mut self) {
            if self.2 {
                if let Ok(g) = self.0.driver().end_capture_child(self.1) {
                    self.0.driver().child_destroy(g);
                }
            }
        }
    }
    rt.with_side_stream(|side| {
        let drv = rt.driver();
        drv.begin_capture(side)?;
        let mut guard = EndOnUnwind(rt, side, true);
        let queued = queue(side);
        guard.2 = false;
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
