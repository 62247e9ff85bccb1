//! Buffer stamps: the last writer and every reader since (X2).

use crate::primitive::{lock, Mutex, MutexGuard};
use crate::{Generation, StreamEpoch, StreamId};
use smallvec::SmallVec;
use std::ops::Range;

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

/// The range that stands for the whole of a buffer (or of a view with
/// stamps of its own): every range is inside it. The whole-buffer methods
/// ([`Ledger::hand_off`](crate::Ledger::hand_off),
/// [`Ledger::stamp`](crate::Ledger::stamp), ..) use it.
pub const WHOLE: Range<usize> = 0..usize::MAX;

/// The most entries a [`Uses`] keeps before it coalesces them (X3).
pub const MAX_ENTRIES: usize = 8;

/// The uses of one range of a buffer: its last writer, and every reader of
/// it since (one per stream).
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) range: Range<usize>,
    pub(crate) writer: Option<Use>,
    pub(crate) readers: Vec<Use>,
    /// The writer is a raw pointer's escape (R10), not moved since.
    pub(crate) escaped: bool,
}

/// Whether two ranges share an element (an empty range shares none).
#[inline]
pub(crate) fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end && a.start < a.end && b.start < b.end
}

/// Whether `outer` holds every element of `inner`.
#[inline]
pub(crate) fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The uses of one buffer (or view with stamps of its own) that a new use
/// may have to wait for, by range (X2, X3): a short list of entries, each a
/// range with its last writer and every reader since (one per stream). A
/// buffer used only as a whole has one entry, covering [`WHOLE`].
///
/// ## Why the ranged rules are safe
///
/// Ranges are element ranges in one coordinate system per stamps (the
/// buffer's). A hand-off for range `R` examines every entry overlapping
/// `R` (a write: writers and readers; a read: writers), so it orders the new
/// use after every use still in the list that it conflicts with. What
/// leaves the list:
///
/// - a write to `R` drops the entries inside `R`: its own hand-off, just
///   made, ordered every one of their uses before it, and its entry
///   `(R, writer)` stays. By induction, every earlier use `u` of a range
///   `X` is either still in an entry whose range holds `X`, or there is a
///   write in the list whose range holds `X` and which is ordered after
///   `u` (a chain of such writes, each ordered after the one it dropped).
///   A later use conflicting with `u` overlaps `X`, so it examines `u` or
///   that write, and is ordered after `u` either way (a device wait, or a
///   fact about the write, which is ordered after `u`, so the fact holds
///   for `u` too).
/// - a read of `R` replaces the reader of its stream in the entry equal to
///   `R` (or, the list full, in the smallest entry holding `R`), else adds
///   `(R, no writer, [reader])`: the reader it replaces is earlier on the
///   same stream, and a later write overlapping `R` overlaps that entry,
///   so it waits for the read; writers of entries the read overlaps stay
///   where they are, for later writes to find. A reader in an entry was
///   ordered after that entry's writer (its hand-off overlapped it), which
///   the same-stream shortcut of a read relies on.
/// - entries that overlap a write only in part stay as they are: a later
///   use of their other part still finds them (conservative).
/// - past [`MAX_ENTRIES`], the entries are coalesced into unknown uses (see
///   [`Ledger::forget_uses`](crate::Ledger::forget_uses)): every hand-off
///   then waits for every stream, until a write of the whole.
///
/// Mutated only through the [`Ledger`](crate::Ledger)'s stamping methods.
#[derive(Clone, Default, Debug)]
pub struct Uses {
    pub(crate) entries: SmallVec<[Entry; 1]>,
    /// Uses the ledger no longer knows (a split whose views were not given
    /// back, or entries coalesced): a hand-off waits for everything every
    /// stream queued.
    pub(crate) unknown: bool,
}

impl Uses {
    /// No use yet: a hand-off needs no wait (R9, "not dirty").
    pub const fn new() -> Self {
        Uses {
            entries: SmallVec::new_const(),
            unknown: false,
        }
    }

    /// The entry that speaks for the whole, for the whole-buffer accessors:
    /// the only one, else the newest.
    fn newest(&self) -> Option<&Entry> {
        self.entries.last()
    }

    /// The last write: of the only entry (a buffer used as a whole), else
    /// of the newest entry with a writer.
    pub fn writer(&self) -> Option<Use> {
        self.entries.iter().rev().find_map(|e| e.writer)
    }

    /// The reads since the last write, at most one per stream (of the only
    /// entry, else of the newest one).
    pub fn readers(&self) -> &[Use] {
        self.newest().map_or(&[], |e| &e.readers)
    }

    /// The entries: each range, its last writer and its readers since.
    pub fn ranges(&self) -> impl Iterator<Item = (Range<usize>, Option<Use>, &[Use])> + '_ {
        self.entries
            .iter()
            .map(|e| (e.range.clone(), e.writer, e.readers.as_slice()))
    }

    /// Whether a raw pointer was taken outside an operation and the buffer
    /// has not moved to another stream since (R10).
    pub fn is_escaped(&self) -> bool {
        self.entries.iter().any(|e| e.escaped)
    }

    /// Whether the uses are unknown (see [`Ledger::forget_uses`](crate::Ledger::forget_uses)):
    /// the next hand-off waits for every stream.
    pub fn is_unknown(&self) -> bool {
        self.unknown
    }

    /// Whether the buffer has any use a later one might wait for.
    pub fn is_dirty(&self) -> bool {
        self.unknown
            || self
                .entries
                .iter()
                .any(|e| e.writer.is_some() || !e.readers.is_empty())
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
