//! Stream and event pools (R13, X5): nothing is created or destroyed on the
//! hot path once the pools are warm.

use crate::driver::{Driver, RawEvent, RawStream};
use crate::error::Result;
use gpu_epoch::{EventCoverage, Ledger, StreamId};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicU64, AtomicUsize};

/// The streams of one runtime: a table from ledger ids to driver handles and
/// a free list.
#[derive(Debug)]
pub(crate) struct StreamPool {
    /// Driver handles by ledger index; written once, before the id is
    /// handed out.
    raw: Box<[AtomicU64]>,
    created: AtomicUsize,
    /// Streams no task holds, oldest released first, each with what tells
    /// whether it is idle (see [`Tail`]).
    free: Mutex<VecDeque<(StreamId, Tail)>>,
    /// By ledger index, while the stream is being captured into a graph: an
    /// event recorded just before the capture began. Other tasks' hand-offs
    /// from the stream wait for it instead of recording on (or
    /// synchronizing) the capturing stream; the lock orders them with the
    /// capture's beginning and end.
    captures: Box<[Mutex<Option<Box<PooledEvent>>>]>,
}

impl StreamPool {
    pub(crate) fn new(capacity: usize) -> Self {
        StreamPool {
            raw: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            created: AtomicUsize::new(0),
            free: Mutex::new(VecDeque::new()),
            captures: (0..capacity).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The capture slot of `id` (see the field).
    #[inline]
    pub(crate) fn capture_slot(&self, id: StreamId) -> &Mutex<Option<Box<PooledEvent>>> {
        &self.captures[id.index()]
    }

    /// Creates `n` streams up front.
    pub(crate) fn warm(&self, driver: &dyn Driver, ledger: &Ledger, n: usize) -> Result<()> {
        for _ in 0..n {
            let id = self.create(driver, ledger)?;
            self.free.lock().push_back((id, Tail::Unknown));
        }
        Ok(())
    }

    fn create(&self, driver: &dyn Driver, ledger: &Ledger) -> Result<StreamId> {
        let id = ledger.add_stream()?;
        let raw = driver.create_stream()?;
        self.raw[id.index()].store(raw.0, Release);
        self.created.fetch_add(1, Release);
        Ok(id)
    }

    /// The driver handle of `id`.
    #[inline]
    pub(crate) fn raw(&self, id: StreamId) -> RawStream {
        RawStream(self.raw[id.index()].load(Acquire))
    }

    /// How many streams exist.
    pub(crate) fn created(&self) -> usize {
        self.created.load(Acquire)
    }

    /// How many are in the pool (not held by a task).
    pub(crate) fn idle_count(&self) -> usize {
        self.free.lock().len()
    }

    /// A stream for a new task: an idle pooled one (recycled: its generation
    /// moves on, R13); else a new one while the ledger has room; else a busy
    /// pooled one whose task finished (taken over without recycling, R3).
    /// Returns the stream and whether it was idle (recycled or new).
    pub(crate) fn acquire(&self, driver: &dyn Driver, ledger: &Ledger) -> Result<(StreamId, bool)> {
        // Oldest released first: the likeliest to be idle.
        let n = self.free.lock().len();
        for _ in 0..n {
            let Some((id, tail)) = self.free.lock().pop_front() else {
                break;
            };
            let (idle, tail) = match tail {
                // No driver call: a broken context must still say so.
                Tail::Idle => (driver.check_sticky().map(|()| true), Tail::Idle),
                Tail::Unknown => (driver.stream_query(self.raw(id)), Tail::Unknown),
            };
            match idle {
                Ok(true) => {
                    ledger.recycle(id);
                    return Ok((id, true));
                }
                Ok(false) => self.free.lock().push_back((id, tail)),
                Err(e) => {
                    self.free.lock().push_back((id, tail));
                    return Err(e);
                }
            }
        }
        if ledger.stream_count() < ledger.capacity() {
            if let Ok(id) = self.create(driver, ledger) {
                return Ok((id, true));
            }
        }
        match self.free.lock().pop_front() {
            Some((id, _)) => Ok((id, false)),
            None => Err(gpu_epoch::LedgerError::TooManyStreams {
                capacity: ledger.capacity(),
            }
            .into()),
        }
    }

    /// Gives a stream back; its task finished. A stream known idle goes to
    /// the front, to be taken first, with no driver call.
    pub(crate) fn release(&self, id: StreamId, tail: Tail) {
        let mut free = self.free.lock();
        match tail {
            Tail::Idle => free.push_front((id, tail)),
            Tail::Unknown => free.push_back((id, tail)),
        }
    }

    /// Every driver handle (for teardown).
    pub(crate) fn all_raw(&self) -> Vec<RawStream> {
        self.raw[..self.created()]
            .iter()
            .map(|r| RawStream(r.load(Acquire)))
            .collect()
    }
}

/// What tells whether a free stream is idle.
#[derive(Debug)]
pub(crate) enum Tail {
    /// Known idle: it was idle when its last task got it, and that task
    /// submitted nothing (no other task submits to a stream it does not
    /// hold), so no driver call is needed.
    Idle,
    /// Ask the driver about the stream. (An event recorded as the task
    /// ends and queried instead was measured on the H200: a query of a done
    /// event, 1.37 us, costs about what a stream query does, 1.59 us, and
    /// the record comes on top.)
    Unknown,
}

/// A pooled driver event with its ledger coverage.
#[derive(Debug)]
pub(crate) struct PooledEvent {
    pub(crate) raw: RawEvent,
    pub(crate) coverage: EventCoverage,
}

/// Events: handed out and taken back, created only when the pool is empty.
#[derive(Debug)]
#[allow(clippy::vec_box)] // events go in and out as boxes: moving one is a pointer copy
pub(crate) struct EventPool {
    free: Mutex<Vec<Box<PooledEvent>>>,
    created: std::sync::atomic::AtomicUsize,
}

impl EventPool {
    pub(crate) fn new() -> Self {
        EventPool {
            free: Mutex::new(Vec::new()),
            created: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub(crate) fn warm(&self, driver: &dyn Driver, n: usize) -> Result<()> {
        for _ in 0..n {
            let e = self.create(driver)?;
            self.free.lock().push(e);
        }
        Ok(())
    }

    fn create(&self, driver: &dyn Driver) -> Result<Box<PooledEvent>> {
        let raw = driver.create_event(false)?;
        self.created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Box::new(PooledEvent {
            raw,
            coverage: EventCoverage::new(),
        }))
    }

    #[inline]
    pub(crate) fn take(&self, driver: &dyn Driver) -> Result<Box<PooledEvent>> {
        if let Some(e) = self.free.lock().pop() {
            return Ok(e);
        }
        self.create(driver)
    }

    #[inline]
    pub(crate) fn give(&self, e: Box<PooledEvent>) {
        self.free.lock().push(e);
    }

    pub(crate) fn created(&self) -> usize {
        self.created.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn idle_count(&self) -> usize {
        self.free.lock().len()
    }

    #[allow(clippy::vec_box)]
    pub(crate) fn drain(&self) -> Vec<Box<PooledEvent>> {
        std::mem::take(&mut *self.free.lock())
    }
}
