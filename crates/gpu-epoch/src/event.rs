//! Event coverage (R4, R6-R8, X1).

use crate::primitive::{AtomicU32, AtomicU64, AtomicUsize, Backoff};
use crate::seqlock::{SeqLock, SeqLockWriteGuard};
use crate::{StreamEpoch, StreamId};
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

/// How many entries an event's ordered table holds: one per stream.
#[cfg(not(loom))]
const TABLE: usize = crate::MAX_STREAMS;
/// Loom models use a handful of streams; every atomic costs it state.
#[cfg(loom)]
const TABLE: usize = 8;

/// What one event covers: the ledger's side of a driver event.
///
/// `source` is the stream and the closed epoch of its last counted record, or
/// none (covers nothing); the ordered table is that stream's `waited` row as
/// of the record (X1); `records` changes on every record, so a wait or a
/// query that spans a re-record gives no fact (R6, R14).
///
/// A sequence lock guards it: writers (the two halves of a record) take it
/// with one compare-and-swap and let go with a plain store; readers (waits,
/// synchronizes, queries) take no lock at all: they read, then check that no
/// writer came in between, and read again if one did. So a wait costs the
/// ledger a few loads, and a record two read-modify-writes of this state.
/// A wait that overlaps a write gives no fact rather than read again.
#[derive(Debug)]
pub struct EventCoverage {
    /// Guards the fields below, all read and written `Relaxed`: in write
    /// sections, or between [`SeqLock::optimistic_read`] and
    /// [`SeqLock::validate_read`], whose orderings (`seqlock.rs`) make what
    /// a validated read saw the result of whole write sections.
    lock: SeqLock,
    /// Records begun.
    records: AtomicU64,
    /// Records begun and not yet finished (or aborted).
    in_flight: AtomicU32,
    /// The source, packed ([`pack`]); 0: covers nothing.
    source: AtomicU64,
    /// How many entries of `table` are valid.
    len: AtomicUsize,
    /// The ordered table, packed entries.
    table: Box<[AtomicU64]>,
}

impl Default for EventCoverage {
    fn default() -> Self {
        EventCoverage {
            lock: SeqLock::new(),
            records: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            source: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            table: (0..TABLE).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// Bits of a packed entry that hold the epoch; the stream index sits above.
const EPOCH_BITS: u32 = 56;

/// Packs a stream and an epoch into one word (stream indices are below 256,
/// epochs below 2^56: a stream closing an epoch every 100 ns would take two
/// hundred years to get there).
#[inline]
pub(crate) fn pack(s: StreamId, e: u64) -> u64 {
    debug_assert!(e < 1 << EPOCH_BITS);
    ((s.0 as u64) << EPOCH_BITS) | e
}

/// The inverse of [`pack`].
#[inline]
pub(crate) fn unpack(w: u64) -> (StreamId, u64) {
    (
        StreamId((w >> EPOCH_BITS) as u16),
        w & ((1 << EPOCH_BITS) - 1),
    )
}

/// An event's ordered table as a reader copied it.
pub(crate) type Table = SmallVec<[u64; 8]>;

/// A write section of an [`EventCoverage`]; ends on drop.
pub(crate) struct Writer<'a> {
    ev: &'a EventCoverage,
    _lock: SeqLockWriteGuard<'a>,
}

impl std::ops::Deref for Writer<'_> {
    type Target = EventCoverage;

    #[inline]
    fn deref(&self) -> &EventCoverage {
        self.ev
    }
}

impl EventCoverage {
    /// An event never recorded: it covers nothing.
    pub fn new() -> Self {
        EventCoverage::default()
    }

    /// What the event covers now: its source, if the last record counted.
    pub fn source(&self) -> Option<(StreamId, StreamEpoch)> {
        self.read(|e| e.source_now())
    }

    /// How many times the event was recorded.
    pub fn records(&self) -> u64 {
        self.read(|e| e.records.load(Relaxed))
    }

    /// Opens a write section (see [`SeqLock::write`]).
    #[inline]
    pub(crate) fn write(&self) -> Writer<'_> {
        Writer {
            ev: self,
            _lock: self.lock.write(),
        }
    }

    /// Runs `f` (which only loads) on a consistent state: again if a writer
    /// came in between.
    pub(crate) fn read<R>(&self, f: impl Fn(&Self) -> R) -> R {
        let backoff = Backoff::new();
        loop {
            if let Some(r) = self.try_read(&f) {
                return r;
            }
            backoff.snooze();
        }
    }

    /// Runs `f` (which only loads) once: `None` if a writer was in its
    /// section meanwhile. The ledger's waits use this and give no fact on
    /// `None`, which is safe and happens only when a record of the same
    /// event overlaps a few loads.
    #[inline]
    pub(crate) fn try_read<R>(&self, f: impl Fn(&Self) -> R) -> Option<R> {
        let stamp = self.lock.optimistic_read()?;
        let r = f(self);
        self.lock.validate_read(stamp).then_some(r)
    }

    /// The source as stored (inside [`Self::read`] or a write section).
    #[inline]
    pub(crate) fn source_now(&self) -> Option<(StreamId, StreamEpoch)> {
        match self.source.load(Relaxed) {
            0 => None,
            w => {
                let (s, e) = unpack(w);
                Some((s, StreamEpoch(e)))
            }
        }
    }

    #[inline]
    pub(crate) fn records_now(&self) -> u64 {
        self.records.load(Relaxed)
    }

    /// Copies the ordered table (inside [`Self::read`]).
    #[inline]
    pub(crate) fn table_now(&self) -> Table {
        let n = self.len.load(Relaxed).min(TABLE);
        self.table[..n].iter().map(|w| w.load(Relaxed)).collect()
    }
}

impl Writer<'_> {
    /// A record begins. Covers nothing until it finishes; returns the record
    /// count and whether no other record was in flight.
    #[inline]
    pub(crate) fn begin(&self) -> (u64, bool) {
        let records = self.records.load(Relaxed) + 1;
        self.records.store(records, Relaxed);
        let in_flight = self.in_flight.load(Relaxed);
        self.in_flight.store(in_flight + 1, Relaxed);
        self.source.store(0, Relaxed);
        self.len.store(0, Relaxed);
        (records, in_flight == 0)
    }

    /// A record finished or was abandoned.
    #[inline]
    pub(crate) fn end(&self) {
        let n = self.in_flight.load(Relaxed);
        self.in_flight.store(n.saturating_sub(1), Relaxed);
    }

    /// The event covers `(s, epoch)` and `table`'s entries (`(stream, epoch)`
    /// pairs), as many as fit.
    #[inline]
    pub(crate) fn cover(
        &self,
        s: StreamId,
        epoch: StreamEpoch,
        table: impl Iterator<Item = (StreamId, u64)>,
    ) {
        self.source.store(pack(s, epoch.0), Relaxed);
        let mut n = 0;
        for ((t, v), slot) in table.zip(self.table.iter()) {
            slot.store(pack(t, v), Relaxed);
            n += 1;
        }
        self.len.store(n, Relaxed);
    }

    /// Keeps the source and drops the ordered table [`Writer::cover`]
    /// wrote (X8: the stream was found shared after its row was read).
    pub(crate) fn drop_table(&self) {
        self.len.store(0, Relaxed);
    }
}

/// What a record is in the middle of: returned by
/// [`Ledger::begin_record`](crate::Ledger::begin_record), given back to
/// [`Ledger::finish_record`](crate::Ledger::finish_record) once the driver
/// record was submitted.
#[derive(Clone, Copy, Debug)]
#[must_use = "a record must be finished with Ledger::finish_record"]
pub struct RecordTicket {
    pub(crate) closed: crate::Closed,
    pub(crate) records: u64,
    /// No other record of the event was in flight when this one began.
    pub(crate) alone: bool,
}

impl RecordTicket {
    /// The epoch the record closed, and whether the close counted.
    pub fn closed(&self) -> crate::Closed {
        self.closed
    }
}

/// What a waiter saw of an event before its driver call (wait, synchronize or
/// query): returned by [`Ledger::begin_wait`](crate::Ledger::begin_wait).
#[derive(Clone, Copy, Debug)]
#[must_use = "a wait gives its fact only through a finish_* call"]
pub struct WaitTicket {
    pub(crate) source: Option<(StreamId, StreamEpoch)>,
    pub(crate) records: u64,
}

impl WaitTicket {
    /// The source seen: what the wait covers if the event is not re-recorded.
    pub fn source(&self) -> Option<(StreamId, StreamEpoch)> {
        self.source
    }
}
