//! Memory a graphed scope's allocations reuse from run to run (DESIGN
//! "Graphs without capture by hand"): an allocation in the body is named
//! as an operation is (its task's key and its index in the task), and a
//! run takes the memory the same allocation had in an earlier run, if its
//! buffer was dropped since and the size is the same: the graph's
//! pointers stay the same, and the graph is replayed as it is.
//!
//! A buffer of this memory is an ordinary [`crate::Buffer`] whose drop
//! gives the memory back here instead of freeing it, with its stamps:
//! the next run's allocation hands those uses off to its stream before it
//! stamps the memory written (`TaskContext::alloc`), so it is ordered
//! after every earlier use, the last run's graph included, as any buffer
//! is. The memory is freed, ordered after its uses as any buffer's, when
//! the scope's graph cache is dropped (or when more than one idle block of
//! one name is kept). A buffer kept past its run (moved out of the body)
//! is the user's as any other; the next run allocates anew for its name.

use super::Runtime;
use gpu_epoch::Uses;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// An allocation's name in a graphed scope: its task's key and its index
/// among the task's operations.
pub(crate) type AllocKey = (u64, u32);

/// A block given back and not taken since.
struct Idle {
    ptr: u64,
    bytes: usize,
    uses: Uses,
}

/// The memory of one graphed scope's allocations, kept between its runs
/// (held by its `GraphCache`).
pub(crate) struct GraphMemory {
    rt: Runtime,
    idle: Mutex<HashMap<AllocKey, Idle>>,
}

impl std::fmt::Debug for GraphMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphMemory")
            .field("idle", &self.idle.lock().len())
            .finish()
    }
}

/// Where a buffer of a graphed scope's memory goes back at its drop.
#[derive(Debug)]
pub(crate) struct Home {
    pub(crate) memory: Weak<GraphMemory>,
    pub(crate) key: AllocKey,
}

impl GraphMemory {
    pub(crate) fn new(rt: &Runtime) -> Arc<Self> {
        Arc::new(GraphMemory {
            rt: rt.clone(),
            idle: Mutex::new(HashMap::new()),
        })
    }

    /// The runtime whose memory this is.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The idle block named `key`, if it has `bytes`: its address and
    /// uses. One of another size is freed.
    pub(crate) fn take(&self, key: AllocKey, bytes: usize) -> Option<(u64, Uses)> {
        let old = self.idle.lock().remove(&key)?;
        if old.bytes == bytes {
            return Some((old.ptr, old.uses));
        }
        // SAFETY: a block of this runtime of `old.bytes` (`give`'s
        // contract), idle: nothing uses it but what `old.uses` records,
        // and it left the map above, once.
        unsafe { self.rt.free_ordered(old.ptr, old.bytes, &old.uses) };
        None
    }

    /// Keeps the block `ptr` of `bytes`, named `key`, with its `uses`, for
    /// a later run; if one is kept under that name already, this one is
    /// freed.
    ///
    /// # Safety
    ///
    /// `ptr` is an allocation of this runtime of `device_bytes(bytes)`,
    /// given back once by its buffer's drop, with every use the buffer's
    /// stamps recorded; nothing uses it after.
    pub(crate) unsafe fn give(&self, key: AllocKey, ptr: u64, bytes: usize, uses: Uses) {
        let mut idle = self.idle.lock();
        if idle.contains_key(&key) {
            drop(idle);
            // SAFETY: the caller's contract.
            unsafe { self.rt.free_ordered(ptr, bytes, &uses) };
            return;
        }
        idle.insert(key, Idle { ptr, bytes, uses });
    }
}

impl Drop for GraphMemory {
    fn drop(&mut self) {
        for (_, b) in self.idle.get_mut().drain() {
            // SAFETY: as in `take`: idle blocks of this runtime, each
            // freed once, ordered after their recorded uses.
            unsafe { self.rt.free_ordered(b.ptr, b.bytes, &b.uses) };
        }
    }
}
