//! Buffer stamps: the last writer and every reader since (X2).

use crate::primitive::{lock, Mutex, MutexGuard};
use crate::{Generation, StreamEpoch, StreamId};

/// Read or write: `&Buffer` is a read, `&mut Buffer` a write (X2).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Access {
    /// The operation only reads the buffer.
    Read,
    /// The operation may write the buffer.
    Write,
}

/// One use of a buffer: the stream, its epoch and generation at the time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Use {
    /// The stream the use was submitted to.
    pub stream: StreamId,
    /// The stream's epoch when the use was stamped.
    pub epoch: StreamEpoch,
    /// The stream's generation when the use was stamped.
    pub generation: Generation,
}

/// The uses of one buffer (or view) that a new use may have to wait for: the
/// last writer, and every reader since it (one entry per stream).
///
/// Mutated only through the [`Ledger`](crate::Ledger)'s stamping methods.
#[derive(Clone, Default, Debug)]
pub struct Uses {
    pub(crate) writer: Option<Use>,
    pub(crate) readers: Vec<Use>,
    pub(crate) escaped: bool,
    /// Uses the ledger no longer knows (a split whose views were not given
    /// back): a hand-off waits for everything every stream queued.
    pub(crate) unknown: bool,
}

impl Uses {
    /// No use yet: a hand-off needs no wait (R9, "not dirty").
    pub const fn new() -> Self {
        Uses {
            writer: None,
            readers: Vec::new(),
            escaped: false,
            unknown: false,
        }
    }

    /// The last write, if any.
    pub fn writer(&self) -> Option<Use> {
        self.writer
    }

    /// The reads since the last write, at most one per stream.
    pub fn readers(&self) -> &[Use] {
        &self.readers
    }

    /// Whether a raw pointer was taken outside an operation and the buffer
    /// has not moved to another stream since (R10).
    pub fn is_escaped(&self) -> bool {
        self.escaped
    }

    /// Whether the uses are unknown (see [`Ledger::forget_uses`](crate::Ledger::forget_uses)):
    /// the next hand-off waits for every stream.
    pub fn is_unknown(&self) -> bool {
        self.unknown
    }

    /// Whether the buffer has any use a later one might wait for.
    pub fn is_dirty(&self) -> bool {
        self.writer.is_some() || !self.readers.is_empty() || self.unknown
    }
}

/// A buffer's [`Uses`] behind a lock. Readers (`&Buffer`) on several threads
/// lock it for a few nanoseconds; a writer holds `&mut` and reaches the uses
/// without locking through [`BufferStamps::get_mut`].
#[derive(Debug, Default)]
pub struct BufferStamps {
    uses: Mutex<Uses>,
}

impl BufferStamps {
    /// A buffer with no use yet.
    pub fn new() -> Self {
        BufferStamps {
            uses: Mutex::new(Uses::new()),
        }
    }

    /// Stamps starting from `uses` (a view inheriting its parent's, X3).
    pub fn from_uses(uses: Uses) -> Self {
        BufferStamps {
            uses: Mutex::new(uses),
        }
    }

    /// The uses, without locking: `&mut self` proves no one else holds them.
    /// (Not under loom, whose `Mutex` has no `get_mut`: use [`Self::lock`].)
    #[cfg(not(loom))]
    #[inline]
    pub fn get_mut(&mut self) -> &mut Uses {
        self.uses
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Locks the uses (readers on several threads).
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, Uses> {
        lock(&self.uses)
    }

    /// A copy of the uses.
    pub fn snapshot(&self) -> Uses {
        self.lock().clone()
    }
}
