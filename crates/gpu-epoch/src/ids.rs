//! The ledger's small value types: stream, task, epoch, generation.

use std::fmt;

/// A stream tracked by a [`Ledger`](crate::Ledger): a dense index, valid for
/// the ledger that handed it out.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub(crate) u16);

impl StreamId {
    /// The stream's index in its ledger (0-based, dense).
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The stream at `index` of a ledger (below its
    /// [`stream_count`](crate::Ledger::stream_count); a ledger asked about
    /// an index it never handed out panics).
    ///
    /// # Panics
    ///
    /// If `index` is not below [`MAX_STREAMS`](crate::MAX_STREAMS).
    #[inline]
    pub fn from_index(index: usize) -> StreamId {
        assert!(
            index < crate::MAX_STREAMS,
            "stream index {index} out of range"
        );
        StreamId(index as u16)
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S{}", self.0)
    }
}

/// A task's identity: the body of a scope, a spawned closure, or a plain
/// thread using the runtime. Ids are never reused within a ledger; `0` is
/// never a task.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub(crate) u64);

impl TaskId {
    /// The raw id.
    #[inline]
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}", self.0)
    }
}

/// An epoch of one stream's work. Epochs start at 1 and only grow, across
/// recycling too, so a fact about an epoch stays true for good.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamEpoch(pub u64);

impl fmt::Debug for StreamEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// How many times a stream was recycled (R13). A stamp taken in an older
/// generation is covered: a stream is recycled only when idle.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Generation(pub u32);
