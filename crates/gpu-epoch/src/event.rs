//! Event coverage (R4, R6-R8, X1).

use crate::primitive::{lock, Mutex, MutexGuard};
use crate::{StreamEpoch, StreamId};

/// What one event covers: the ledger's side of a driver event.
///
/// `source` is the stream and the closed epoch of its last counted record, or
/// none (covers nothing); `waited` is that stream's table of ordered epochs
/// as of the record (X1); `records` changes on every record, so a wait or a
/// query that spans a re-record gives no fact (R6, R14).
#[derive(Debug, Default)]
pub struct EventCoverage {
    state: Mutex<EventState>,
}

#[derive(Debug, Default)]
pub(crate) struct EventState {
    pub(crate) records: u64,
    /// Records begun and not yet finished (or aborted).
    pub(crate) in_flight: u32,
    pub(crate) source: Option<(StreamId, StreamEpoch)>,
    pub(crate) waited: Vec<(StreamId, u64)>,
}

impl EventCoverage {
    /// An event never recorded: it covers nothing.
    pub fn new() -> Self {
        EventCoverage::default()
    }

    /// What the event covers now: its source, if the last record counted.
    pub fn source(&self) -> Option<(StreamId, StreamEpoch)> {
        self.lock().source
    }

    /// How many times the event was recorded.
    pub fn records(&self) -> u64 {
        self.lock().records
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, EventState> {
        lock(&self.state)
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
