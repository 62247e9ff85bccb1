//! The ledger: stream orders and the decisions made from them. This file
//! holds the streams, tasks and bindings; a file each for stamping
//! (`stamping`), the hand-off (`hand_off`), and closes, records, waits
//! and syncs (`sync`).

use crate::counters::{CounterSnapshot, Counters, Reason};
use crate::event::{pack, unpack, EventCoverage, RecordTicket, Table, WaitTicket};
use crate::primitive::{lock, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex};
use crate::set::{StreamSet, MAX_STREAMS};
use crate::stamp::{contains, overlaps, Access, Entry, Use, Uses, MAX_ENTRIES, WHOLE};
use crate::{Generation, StreamEpoch, StreamId, Task, TaskId};
use crossbeam_utils::CachePadded;
use std::ops::Range;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

mod hand_off;
mod stamping;
mod sync;

/// What the ledger knows of one stream (DESIGN "Words" "stream order").
///
/// ## Memory ordering
///
/// No access is `SeqCst`: no decision needs one total order over two
/// atomics. The race that did (a close against a task joining the stream,
/// R1/R2) is closed by both sides' read-modify-writes of `epoch`, which need
/// only acquire/release (README, "How the R1/R2 race is closed"); loom,
/// which models `SeqCst` as acquire/release anyway, checks these orderings.
/// A task reads what it stored itself (its id, its capture) in program
/// order; `owner`'s mutex orders the cold-path stores of `owner_id` and
/// `shared`. Each field says who touches it, how, and what that pairs with.
#[derive(Debug)]
struct StreamOrder {
    /// The epoch new work is stamped with; starts at 1. RMWs `AcqRel` by
    /// `close` (+1) and `joined_shared` (+0): the later of two acquires the
    /// earlier (R1/R2). Loads `Acquire` (`current_use`, `epoch`, a capturing
    /// `close`), pairing with those RMWs.
    epoch: AtomicU64,
    /// The highest epoch whose close counted (R2); 0: none. Stored `Release`
    /// by `close` (the unshared owner's only); loaded `Acquire` by
    /// `closed_counted`: the work it covers was submitted before the pooled
    /// record that follows the load.
    closed_counted: AtomicU64,
    /// Every epoch <= this is known finished. `fetch_max` `AcqRel` by
    /// `mark_completed`; loaded `Acquire` by `covered` and `completed`: a use
    /// of the fact comes after the host wait that taught it.
    completed: AtomicU64,
    /// The owner's id (0: none); the fast path of [`Ledger::bind`]. Stored
    /// `Release` under `owner` (a take-over, `recycle`); loaded `Acquire` by
    /// `bind`, `owner`, `close` and `may_learn`, which compare it with their
    /// own task's id, stored by that task.
    owner_id: AtomicU64,
    /// The owner, to tell a finished one from a live one.
    owner: Mutex<Option<Task>>,
    /// Sticky: used by two live tasks; no close counts again until recycled.
    /// Stored under `owner`, `Release`: `true` by `bind_slow` and `share`,
    /// each followed by `joined_shared`'s RMW, through which a later `close`
    /// sees it; `false` by `recycle`, with no task on the stream. Loaded
    /// `Relaxed` under `owner` and by `bind`'s fast path (with `owner_id`),
    /// `Acquire` by `close` (after its RMW), `may_learn`, `is_shared`, and
    /// `finish_record` and `finish_stream_sync` after they read `waited`
    /// (X8: a sharer's raise they saw makes it read true).
    shared: AtomicBool,
    /// Being captured into a graph (R12). Stored `Release` by
    /// `set_capturing` (by the stream's own task); loaded `Acquire` by
    /// `is_capturing`, `close` and `may_learn`.
    capturing: AtomicBool,
    /// Bumped on recycling (R13): `fetch_add` `AcqRel` by `recycle`; loaded
    /// `Acquire` by `covered` and `generation`, `Relaxed` by `current_use`
    /// (the stamping task bound the stream after the recycle, through
    /// `owner`'s mutex).
    generation: AtomicU32,
    /// Retired: no stream behind the slot until `add_stream` reuses it.
    /// Stored `Release` by `retire` and `add_stream`, loaded `Acquire` by
    /// `is_vacant`; the ledger's `vacant` list (a mutex) hands slots over.
    vacant: AtomicBool,
    /// `waited[t]`: the highest epoch of stream `t` this stream is ordered
    /// after (R8, X1). Written by the owner, or a shared stream's sharers
    /// (X8; `raise`: a `Relaxed` load, then a `Release` store: two sharers
    /// racing may lower it, which only forgoes a fact); loaded `Acquire` by
    /// `covered`, `waited` and `waited_row`: a use of the fact comes after the
    /// device wait that taught it was submitted.
    waited: Box<[AtomicU64]>,
    /// Which entries of `waited` are not 0: a bit per stream. `fetch_or`
    /// `Release` by `raise` before the entry's store; loaded `Acquire` by
    /// `waited_row`.
    waited_mask: [AtomicU64; MAX_STREAMS / 64],
    counters: Counters,
}

impl StreamOrder {
    fn new(capacity: usize) -> Self {
        StreamOrder {
            epoch: AtomicU64::new(1),
            closed_counted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            owner_id: AtomicU64::new(0),
            owner: Mutex::new(None),
            shared: AtomicBool::new(false),
            capturing: AtomicBool::new(false),
            generation: AtomicU32::new(0),
            vacant: AtomicBool::new(false),
            waited: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            waited_mask: std::array::from_fn(|_| AtomicU64::new(0)),
            counters: Counters::default(),
        }
    }

    /// Raises `waited[t]` to `v`. The owner (or a shared stream's
    /// sharers, X8) writes its row (`may_learn`), so a load and a store
    /// do: no read-modify-write on the hot path (the mask's, once per
    /// entry, is not). Two sharers racing may store the lower value: a
    /// true fact, weaker, never a false one.
    #[inline]
    fn raise(&self, t: StreamId, v: u64) {
        let entry = &self.waited[t.index()];
        let old = entry.load(Relaxed);
        if v > old {
            if old == 0 {
                // The bit first: a reader of the row that sees the bit but
                // not the entry skips it, which only forgoes a fact.
                self.waited_mask[t.index() / 64].fetch_or(1 << (t.index() % 64), Release);
            }
            entry.store(v, Release);
        }
    }
}

/// What a hand-off's device wait teaches the ledger
/// ([`Ledger::hand_off_facts`], [`Ledger::learn_hand_off`]).
#[derive(Clone, Debug)]
pub struct HandOffFacts {
    stream: StreamId,
    closed: StreamEpoch,
    /// `waited[stream][t]`, packed (`event::pack`).
    row: smallvec::SmallVec<[u64; 8]>,
}

/// How a task stands to a stream it submits to (R3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Binding {
    /// The task already owned the stream.
    Owned,
    /// The stream had no live owner; the task now owns it.
    TookOver,
    /// Another live task owns the stream (or it was shared before): it is
    /// shared for good and none of its closings count again.
    Shared,
}

/// An epoch closed by a record or a synchronize (R2).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Closed {
    /// The stream.
    pub stream: StreamId,
    /// The epoch closed (the stamp of the work before the close).
    pub epoch: StreamEpoch,
    /// Whether the close counts: the closer owns the stream, the stream is
    /// not shared, and not capturing. Facts come only from counted closes.
    pub counted: bool,
}

/// What a hand-off must do before a buffer is used on a new stream (R9).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// No wait is needed; the reason that covered the (last examined) use.
    NoWait(Reason),
    /// The new stream must wait on the device for everything each of these
    /// streams has queued (a pooled event recorded on each, now).
    DeviceWait(StreamSet),
    /// The host must synchronize each of these streams (a device wait is
    /// impossible: the new stream is capturing, or the caller said so).
    HostSync(StreamSet),
}

impl Decision {
    /// The streams to wait for, if any.
    pub fn waits(&self) -> StreamSet {
        match *self {
            Decision::NoWait(_) => StreamSet::new(),
            Decision::DeviceWait(s) | Decision::HostSync(s) => s,
        }
    }

    /// Two decisions for one use, as one: `NoWait < DeviceWait < HostSync`,
    /// the stronger kind with the union of both sets (a `NoWait` keeps the
    /// first reason).
    #[must_use]
    pub fn merge(self, other: Decision) -> Decision {
        use Decision::{DeviceWait, HostSync, NoWait};
        let mut set = self.waits();
        for s in other.waits().iter() {
            set.insert(s);
        }
        match (self, other) {
            (NoWait(r), NoWait(_)) => NoWait(r),
            (HostSync(_), _) | (_, HostSync(_)) => HostSync(set),
            _ => DeviceWait(set),
        }
    }
}

/// Why a ledger call was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LedgerError {
    /// Every stream slot of the ledger is taken.
    TooManyStreams {
        /// The ledger's capacity.
        capacity: usize,
    },
    /// A capturing stream cannot be synchronized (R5).
    SyncWhileCapturing(StreamId),
}

impl std::fmt::Display for LedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LedgerError::TooManyStreams { capacity } => write!(
                f,
                "the ledger tracks at most {capacity} streams; reuse streams through the pool"
            ),
            LedgerError::SyncWhileCapturing(s) => write!(
                f,
                "stream {s:?} is recording work into a graph (a capture or a graphed scope), so the host cannot wait for it; wait before or after the recording, or let the scope's end wait"
            ),
        }
    }
}

impl std::error::Error for LedgerError {}

/// The epoch ledger of one device: stream orders, task ownership and the
/// decisions made from them. Shared by every thread using the device.
///
/// The ledger decides, the runtime acts: no method blocks or calls a driver
/// itself. The record, wait and synchronize protocols are written once, as
/// functions that take the driver call as a closure and make it with no
/// ledger lock held (R14): [`Ledger::record`], [`Ledger::event_complete`],
/// [`Ledger::stream_wait`], [`Ledger::stream_sync`]. Their
/// `begin_*`/`finish_*` halves stay public for models that interleave them.
#[derive(Debug)]
pub struct Ledger {
    streams: Box<[CachePadded<StreamOrder>]>,
    /// Slots handed out: `fetch_add`/`fetch_sub` `AcqRel` by `add_stream`,
    /// loaded `Acquire` by `stream_count` (the slots exist from the start).
    len: AtomicUsize,
    /// The next task id: `fetch_add` `Relaxed` (ids need only be unique).
    next_task: AtomicU64,
    /// Whether Completed, Ordered and Recycled facts are used (the
    /// wait-for-everything policy when off). `Relaxed`: a setting, changed
    /// while no task runs.
    facts: AtomicBool,
    /// Retired slots, reused by `add_stream` before new ones.
    vacant: Mutex<Vec<u16>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(64)
    }
}

impl Ledger {
    /// A ledger for at most `capacity` streams (at most [`MAX_STREAMS`]).
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or more than [`MAX_STREAMS`].
    pub fn new(capacity: usize) -> Self {
        assert!(
            (1..=MAX_STREAMS).contains(&capacity),
            "ledger capacity must be 1..={MAX_STREAMS}, got {capacity}"
        );
        Ledger {
            streams: (0..capacity)
                .map(|_| CachePadded::new(StreamOrder::new(capacity)))
                .collect(),
            len: AtomicUsize::new(0),
            next_task: AtomicU64::new(1),
            facts: AtomicBool::new(true),
            vacant: Mutex::new(Vec::new()),
        }
    }

    /// Turns the facts (Completed, Ordered, Recycled) on (the default) or
    /// off. Off is the wait-for-everything policy: every stream switch of a
    /// dirty buffer waits for all the old stream queued. Same decisions,
    /// same counters, one setting: what benchmarks compare against.
    pub fn set_facts(&self, on: bool) {
        self.facts.store(on, Relaxed);
    }

    /// Whether the facts are used.
    pub fn facts(&self) -> bool {
        self.facts.load(Relaxed)
    }

    /// How many streams the ledger can track.
    pub fn capacity(&self) -> usize {
        self.streams.len()
    }

    /// How many streams it tracks now.
    pub fn stream_count(&self) -> usize {
        self.len.load(Acquire).min(self.capacity())
    }

    /// Starts tracking a new stream.
    ///
    /// # Errors
    ///
    /// [`LedgerError::TooManyStreams`] once every slot is taken.
    pub fn add_stream(&self) -> Result<StreamId, LedgerError> {
        if let Some(i) = lock(&self.vacant).pop() {
            self.streams[i as usize].vacant.store(false, Release);
            return Ok(StreamId(i));
        }
        let i = self.len.fetch_add(1, AcqRel);
        if i >= self.capacity() {
            self.len.fetch_sub(1, AcqRel);
            return Err(LedgerError::TooManyStreams {
                capacity: self.capacity(),
            });
        }
        Ok(StreamId(i as u16))
    }

    #[inline]
    fn order(&self, s: StreamId) -> &StreamOrder {
        &self.streams[s.index()]
    }

    // ----- tasks -------------------------------------------------------

    /// A new live task.
    pub fn begin_task(&self) -> Task {
        Task::new(TaskId(self.next_task.fetch_add(1, Relaxed)))
    }

    /// Marks `task` finished: streams it owns may be taken over (R3, R13).
    pub fn finish_task(&self, task: &Task) {
        task.finish();
    }

    /// R3: `task` is about to submit to `s`.
    #[inline]
    pub fn bind(&self, task: &Task, s: StreamId) -> Binding {
        let o = self.order(s);
        if o.owner_id.load(Acquire) == task.id().0 && !o.shared.load(Relaxed) {
            return Binding::Owned;
        }
        self.bind_slow(task, o)
    }

    #[cold]
    fn bind_slow(&self, task: &Task, o: &StreamOrder) -> Binding {
        let mut owner = lock(&o.owner);
        // Relaxed: every store of `shared` holds `owner`, as this does.
        if o.shared.load(Relaxed) {
            Self::joined_shared(o);
            return Binding::Shared;
        }
        match owner.as_ref() {
            Some(t) if t.id() == task.id() => Binding::Owned,
            Some(t) if t.is_live() => {
                // Before this task stamps anything with the stream's epoch, so
                // that a close racing with its operation sees `shared` (R1, R2)
                // through `joined_shared`'s release RMW.
                o.shared.store(true, Release);
                Self::joined_shared(o);
                Binding::Shared
            }
            _ => {
                *owner = Some(task.clone());
                o.owner_id.store(task.id().0, Release);
                Binding::TookOver
            }
        }
    }

    /// R3, DESIGN "Streams are a resource": `s` is given to a second live task while its holder may still
    /// submit (the runtime ran out of streams): shared for good, until it is
    /// recycled, whoever owns it now. Call before the second task stamps
    /// anything on it.
    pub fn share(&self, s: StreamId) {
        let o = self.order(s);
        let _owner = lock(&o.owner);
        o.shared.store(true, Release);
        Self::joined_shared(o);
    }

    /// R1, R2: a task that saw (or made) `s` shared, before its first stamp.
    /// A read-modify-write of the epoch, so that the race with a close (also
    /// a read-modify-write of it, then a read of `shared`) is closed by the
    /// epoch's modification order alone, not by `SeqCst`'s total order: a
    /// close after this in that order acquires it and sees `shared`; a close
    /// before it is seen by this task's stamps, which read the epoch later.
    /// (loom checks it.)
    #[cold]
    fn joined_shared(o: &StreamOrder) {
        o.epoch.fetch_add(0, AcqRel);
    }

    /// The owner of `s`, if any (it may have finished).
    pub fn owner(&self, s: StreamId) -> Option<TaskId> {
        match self.order(s).owner_id.load(Acquire) {
            0 => None,
            id => Some(TaskId(id)),
        }
    }

    /// Whether `s` is shared (R3).
    pub fn is_shared(&self, s: StreamId) -> bool {
        self.order(s).shared.load(Acquire)
    }

    /// R13: `s` is idle and no live task will submit to it again; it goes
    /// back to the pool. Its generation moves on (so every stamp on it is
    /// covered), it loses its owner and its sharing. X1: what it was
    /// ordered after is done too (it passed its waits), as after a
    /// synchronize.
    ///
    /// The caller guarantees the precondition: the stream is idle (a query
    /// said done) and its tasks finished.
    pub fn recycle(&self, s: StreamId) -> Generation {
        self.complete_row(s);
        let o = self.order(s);
        let mut owner = lock(&o.owner);
        *owner = None;
        // Release: no task runs on the stream (the precondition); the next
        // binder takes `owner`'s mutex and sees both.
        o.owner_id.store(0, Release);
        o.shared.store(false, Release);
        Generation(o.generation.fetch_add(1, AcqRel).wrapping_add(1))
    }

    /// DESIGN "Streams are a resource": `s` is idle, its tasks finished, and its driver stream goes
    /// away: recycled (its generation moves on, so every stamp on it is
    /// covered, and what it was ordered after is done, as it is idle), and
    /// the slot left vacant for [`Ledger::add_stream`] to reuse for a new
    /// stream. Its epochs go on from where they were, so no fact about the
    /// old stream's epochs covers the new one's work.
    pub fn retire(&self, s: StreamId) {
        self.recycle(s);
        self.order(s).vacant.store(true, Release);
        lock(&self.vacant).push(s.0);
    }

    /// Whether `s` was retired and not reused.
    pub fn is_vacant(&self, s: StreamId) -> bool {
        self.order(s).vacant.load(Acquire)
    }

    /// How many streams it tracks now, retired slots left out.
    pub fn live_stream_count(&self) -> usize {
        self.stream_count() - lock(&self.vacant).len()
    }

    /// The generation of `s`.
    pub fn generation(&self, s: StreamId) -> Generation {
        Generation(self.order(s).generation.load(Acquire))
    }

    /// The epoch new work on `s` is stamped with.
    #[inline]
    pub fn epoch(&self, s: StreamId) -> StreamEpoch {
        StreamEpoch(self.order(s).epoch.load(Acquire))
    }

    /// Every epoch of `s` up to this is known finished.
    pub fn completed(&self, s: StreamId) -> StreamEpoch {
        StreamEpoch(self.order(s).completed.load(Acquire))
    }

    /// The highest epoch of `of` that `s` is known to be ordered after.
    pub fn waited(&self, s: StreamId, of: StreamId) -> StreamEpoch {
        StreamEpoch(self.order(s).waited[of.index()].load(Acquire))
    }

    // ----- capture (R12) -------------------------------------------------

    /// Marks `s` capturing (or not). While capturing, stamps are not taken,
    /// closes count nothing and waits give no fact.
    pub fn set_capturing(&self, s: StreamId, capturing: bool) {
        self.order(s).capturing.store(capturing, Release);
    }

    /// Whether `s` is capturing.
    #[inline]
    pub fn is_capturing(&self, s: StreamId) -> bool {
        self.order(s).capturing.load(Acquire)
    }

    // ----- counters -------------------------------------------------------

    /// The decision counters, summed over streams.
    pub fn counters(&self) -> CounterSnapshot {
        let mut snap = CounterSnapshot::default();
        for o in &self.streams[..self.stream_count()] {
            o.counters.add_to(&mut snap);
        }
        snap
    }
}
