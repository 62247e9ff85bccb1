//! The ledger: stream orders and the decisions made from them.

use crate::counters::{CounterSnapshot, Counters, Reason};
use crate::event::{pack, unpack, EventCoverage, RecordTicket, Table, WaitTicket};
use crate::primitive::{lock, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex};
use crate::set::{StreamSet, MAX_STREAMS};
use crate::stamp::{contains, overlaps, Access, Entry, Use, Uses, MAX_ENTRIES, WHOLE};
use crate::{Generation, StreamEpoch, StreamId, Task, TaskId};
use crossbeam_utils::CachePadded;
use std::ops::Range;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

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
    /// `Acquire` by `close` (after its RMW), `may_learn` and `is_shared`.
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
    /// after (R8, X1). Written by the owner only (`raise`: a `Relaxed` load
    /// of its own store, then a `Release` store); loaded `Acquire` by
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

    /// Raises `waited[t]` to `v`. Only the stream's unshared owner writes
    /// its row (`may_learn`), so a load and a store do: no read-modify-write
    /// on the hot path (the mask's, once per entry, is not).
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
    /// covered), it loses its owner and its sharing.
    ///
    /// The caller guarantees the precondition: the stream is idle (a query
    /// said done) and its tasks finished.
    pub fn recycle(&self, s: StreamId) -> Generation {
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

    // ----- stamping (R1, R10) -------------------------------------------

    #[inline]
    fn current_use(&self, s: StreamId) -> Use {
        let o = self.order(s);
        Use {
            stream: s,
            // Coherence with this task's bind (its RMW, or the mutex) is all a
            // stamp needs (README, "How the R1/R2 race is closed").
            epoch: StreamEpoch(o.epoch.load(Acquire)),
            generation: Generation(o.generation.load(Relaxed)),
        }
    }

    /// R1: stamps a write of the whole on `s`. Call when the operation
    /// takes the pointer and again once it is submitted. Returns `false`
    /// (and stamps nothing) while `s` is capturing: the graph launch stamps
    /// instead (R12).
    #[inline]
    pub fn stamp_write(&self, uses: &mut Uses, s: StreamId) -> bool {
        self.stamp_write_range(uses, WHOLE, s)
    }

    /// R1, X3: stamps a write of `range` on `s` (see [`Uses`] for the
    /// rules): the entries inside `range` go, an entry `(range, this
    /// write)` comes. Stamp only after a hand-off of `range` for a write.
    #[inline]
    pub fn stamp_write_range(&self, uses: &mut Uses, range: Range<usize>, s: StreamId) -> bool {
        if self.is_capturing(s) {
            return false;
        }
        if range.is_empty() {
            // No element: nothing to order.
            return true;
        }
        let u = self.current_use(s);
        if range == WHOLE {
            // A write's hand-off of the whole waited for every stream (see
            // `forget_uses`).
            uses.unknown = false;
        }
        // R10: only a move to another stream ends an escape; raw work
        // through the pointer may still follow on the escape's stream.
        let still_escaped = |e: &Entry| e.escaped && e.writer.is_some_and(|w| w.stream == s);
        if let [e] = uses.entries.as_mut_slice() {
            if contains(&range, &e.range) {
                // The hot path: one entry, rewritten in place.
                e.escaped = still_escaped(e);
                e.range = range;
                e.writer = Some(u);
                e.readers.clear();
                return true;
            }
        }
        let mut escaped = false;
        uses.entries.retain(|e| {
            let inside = contains(&range, &e.range);
            escaped |= inside && still_escaped(e);
            !inside
        });
        uses.entries.push(Entry {
            range,
            writer: Some(u),
            readers: Vec::new(),
            escaped,
        });
        if uses.entries.len() > MAX_ENTRIES {
            Self::coalesce(uses);
        }
        true
    }

    /// R1, X2: stamps a read of the whole on `s` (one reader per stream).
    #[inline]
    pub fn stamp_read(&self, uses: &mut Uses, s: StreamId) -> bool {
        self.stamp_read_range(uses, WHOLE, s)
    }

    /// R1, X2, X3: stamps a read of `range` on `s` (see [`Uses`] for the
    /// rules): in the entry equal to `range`, else a new one, else (the list
    /// full) in the smallest entry holding `range`, else the entries are
    /// coalesced. Stamp only after a hand-off of `range` for a read.
    #[inline]
    pub fn stamp_read_range(&self, uses: &mut Uses, range: Range<usize>, s: StreamId) -> bool {
        if self.is_capturing(s) {
            return false;
        }
        if range.is_empty() {
            return true;
        }
        let u = self.current_use(s);
        for e in uses.entries.iter_mut() {
            if e.escaped && overlaps(&e.range, &range) {
                self.end_escape_by_read(e, s);
            }
        }
        let at = match uses.entries.iter().position(|e| e.range == range) {
            Some(i) => i,
            None if uses.entries.len() < MAX_ENTRIES => {
                uses.entries.push(Entry {
                    range,
                    writer: None,
                    readers: Vec::new(),
                    escaped: false,
                });
                uses.entries.len() - 1
            }
            None => {
                let holding = uses
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| contains(&e.range, &range))
                    .min_by_key(|(_, e)| e.range.end - e.range.start)
                    .map(|(i, _)| i);
                match holding {
                    Some(i) => i,
                    None => {
                        Self::coalesce(uses);
                        return true;
                    }
                }
            }
        };
        let readers = &mut uses.entries[at].readers;
        match readers.iter_mut().find(|r| r.stream == s) {
            Some(r) => *r = u,
            None => readers.push(u),
        }
        true
    }

    /// X3: too many entries: the uses become unknown (every hand-off waits
    /// for every stream, whatever the facts, until a write of the whole),
    /// which orders everything the entries held.
    #[cold]
    fn coalesce(uses: &mut Uses) {
        uses.entries.clear();
        uses.unknown = true;
    }

    /// Stamps `access` of the whole on `s`.
    #[inline]
    pub fn stamp(&self, uses: &mut Uses, s: StreamId, access: Access) -> bool {
        self.stamp_range(uses, WHOLE, s, access)
    }

    /// Stamps `access` of `range` on `s`.
    #[inline]
    pub fn stamp_range(
        &self,
        uses: &mut Uses,
        range: Range<usize>,
        s: StreamId,
        access: Access,
    ) -> bool {
        match access {
            Access::Read => self.stamp_read_range(uses, range, s),
            Access::Write => self.stamp_write_range(uses, range, s),
        }
    }

    /// R10: a read on another stream moves an escaped buffer (its hand-off
    /// waited for everything the escape's stream had queued). Raw writes
    /// through the pointer may have been submitted after the escape's stamp,
    /// unstamped: the writer is restamped with its stream's epoch now, which
    /// no fact covers before a close that follows them.
    #[cold]
    fn end_escape_by_read(&self, e: &mut Entry, s: StreamId) {
        if let Some(w) = &mut e.writer {
            if w.stream != s {
                *w = self.current_use(w.stream);
                e.escaped = false;
            }
        }
    }

    /// R10: a raw pointer leaves the runtime on `s`: stamped once, as a
    /// write of the whole, and marked escaped.
    pub fn escape(&self, uses: &mut Uses, s: StreamId) {
        uses.entries.clear();
        uses.entries.push(Entry {
            range: WHOLE,
            writer: Some(self.current_use(s)),
            readers: Vec::new(),
            escaped: true,
        });
        uses.unknown = false;
    }

    /// X3, DESIGN "Soundness": the uses of a buffer are no longer known: its views may have
    /// been used on any stream and not given back. Until the next write (or
    /// escape) of the whole stamps it, every hand-off of `uses` (of any
    /// range) waits for everything every other stream queued, whatever the
    /// facts; reads and writes of ranges keep it so.
    pub fn forget_uses(&self, uses: &mut Uses) {
        uses.unknown = true;
    }

    // ----- the hand-off (R9, X2) ------------------------------------------

    /// Whether use `u` is ordered before new work on `s2`, and why.
    #[inline]
    fn covered(&self, u: &Use, s2: StreamId) -> Option<Reason> {
        if u.stream == s2 {
            return Some(Reason::SameStream);
        }
        if !self.facts.load(Relaxed) {
            return None;
        }
        let o = self.order(u.stream);
        if o.generation.load(Acquire) != u.generation.0 {
            return Some(Reason::Recycled);
        }
        if o.completed.load(Acquire) >= u.epoch.0 {
            return Some(Reason::Completed);
        }
        if self.order(s2).waited[u.stream.index()].load(Acquire) >= u.epoch.0 {
            return Some(Reason::Ordered);
        }
        None
    }

    /// R9: what must happen before a buffer with `uses` is used on `s2` for
    /// `access`, as a whole. A read waits for the last writer; a write for
    /// the last writer and every reader since (X2); each unless covered. An
    /// escaped buffer (R10) moving to another stream waits for everything
    /// its stream queued, whatever the facts.
    ///
    /// `device_wait_possible` is false where the runtime cannot make `s2`
    /// wait on the device (another context); a capturing `s2` forces a host
    /// synchronize too. Counts every outcome (see [`Ledger::counters`]).
    #[inline]
    pub fn hand_off(
        &self,
        uses: &Uses,
        s2: StreamId,
        access: Access,
        device_wait_possible: bool,
    ) -> Decision {
        self.hand_off_range(uses, WHOLE, s2, access, device_wait_possible)
    }

    /// R9, X3: [`Ledger::hand_off`] for `range` only: the waits of every
    /// entry overlapping `range`, merged (the union of their streams, one
    /// decision); disjoint ranges never wait for each other.
    #[inline]
    pub fn hand_off_range(
        &self,
        uses: &Uses,
        range: Range<usize>,
        s2: StreamId,
        access: Access,
        device_wait_possible: bool,
    ) -> Decision {
        let counters = &self.order(s2).counters;
        if uses.unknown {
            return self.hand_off_unknown(s2, device_wait_possible);
        }
        let mut waits = StreamSet::new();
        let mut reason = Reason::Clean;
        let mut dirty = false;
        for e in uses.entries.iter().filter(|e| overlaps(&e.range, &range)) {
            dirty |= e.writer.is_some() || !e.readers.is_empty();
            self.entry_waits(e, s2, access, &mut waits, &mut reason);
        }
        if waits.is_empty() {
            if !dirty {
                counters.avoided(Reason::Clean);
            }
            return Decision::NoWait(reason);
        }
        self.wait_decision(s2, waits, device_wait_possible)
    }

    /// The streams one entry's uses make a use on `s2` for `access` wait
    /// for, added to `waits`; uses covered are counted, `reason` is the
    /// last one's.
    #[inline]
    fn entry_waits(
        &self,
        e: &Entry,
        s2: StreamId,
        access: Access,
        waits: &mut StreamSet,
        reason: &mut Reason,
    ) {
        let counters = &self.order(s2).counters;
        if access == Access::Read && !e.escaped && e.readers.iter().any(|r| r.stream == s2) {
            // `s2` already read since the last write: it was ordered after
            // the writer then, and stream order keeps it so.
            counters.avoided(Reason::SameStream);
            *reason = Reason::SameStream;
            return;
        }
        // Outcomes with the same reason are counted with one increment.
        let mut same_reason = 0;
        let mut check = |u: &Use, escaped: bool| {
            if escaped && u.stream != s2 {
                waits.insert(u.stream);
                return;
            }
            match self.covered(u, s2) {
                Some(r) => {
                    if same_reason != 0 && r != *reason {
                        counters.avoided_n(*reason, same_reason);
                        same_reason = 0;
                    }
                    *reason = r;
                    same_reason += 1;
                }
                None => {
                    waits.insert(u.stream);
                }
            }
        };
        if let Some(w) = &e.writer {
            check(w, e.escaped);
        }
        if access == Access::Write {
            for r in &e.readers {
                check(r, false);
            }
        }
        if same_reason != 0 {
            counters.avoided_n(*reason, same_reason);
        }
    }

    /// R9 for unknown uses ([`Ledger::forget_uses`]): waits for every stream
    /// but `s2`.
    #[cold]
    fn hand_off_unknown(&self, s2: StreamId, device_wait_possible: bool) -> Decision {
        let mut waits = StreamSet::new();
        for i in 0..self.stream_count() {
            let s = StreamId(i as u16);
            // A retired stream's work is done (it was idle).
            if s != s2 && !self.is_vacant(s) {
                waits.insert(s);
            }
        }
        if waits.is_empty() {
            return Decision::NoWait(Reason::SameStream);
        }
        self.wait_decision(s2, waits, device_wait_possible)
    }

    /// The wait for `waits` on `s2`: on the device where possible, else on
    /// the host (another context, or `s2` capturing); counted.
    #[inline]
    fn wait_decision(
        &self,
        s2: StreamId,
        waits: StreamSet,
        device_wait_possible: bool,
    ) -> Decision {
        let counters = &self.order(s2).counters;
        if device_wait_possible && !self.is_capturing(s2) {
            counters.device_waits(waits.len() as u64);
            Decision::DeviceWait(waits)
        } else {
            counters.host_syncs(waits.len() as u64);
            Decision::HostSync(waits)
        }
    }

    /// The highest epoch of `s` whose close counted: everything stamped with
    /// it or earlier was submitted before the close. Read it *before* a
    /// hand-off's driver record on `s`; after the device wait, give it to
    /// [`Ledger::mark_ordered`].
    #[inline]
    pub fn closed_counted(&self, s: StreamId) -> StreamEpoch {
        StreamEpoch(self.order(s).closed_counted.load(Acquire))
    }

    /// The Ordered fact from a device wait on `s2` for everything `s` had
    /// queued: `waited[s2][s] >= epoch`, if `task` owns `s2`, which is not
    /// shared or capturing. Returns whether the fact was kept.
    #[inline]
    pub fn mark_ordered(&self, task: &Task, s2: StreamId, s: StreamId, epoch: StreamEpoch) -> bool {
        if !self.may_learn(task, s2) || s == s2 {
            return false;
        }
        self.order(s2).raise(s, epoch.0);
        true
    }

    /// What a hand-off's device wait for `s` will teach, read *before* the
    /// hand-off's driver record on `s` (a pooled event recorded raw, or a
    /// capture's event recorded as it began): `s`'s last counted close, as
    /// [`Ledger::closed_counted`], and `s`'s ordered table (X1 for pooled
    /// events): every `waited[s][t]` was raised after its device wait was
    /// submitted on `s`, so before the record, and a stream ordered after
    /// the record is ordered after those waits' sources too. Give it to
    /// [`Ledger::learn_hand_off`] once the device wait was submitted.
    pub fn hand_off_facts(&self, s: StreamId) -> HandOffFacts {
        HandOffFacts {
            stream: s,
            closed: self.closed_counted(s),
            row: self.waited_row(s).map(|(t, v)| pack(t, v)).collect(),
        }
    }

    /// The Ordered facts of a hand-off: `task`'s stream `s2` waited on the
    /// device for everything its source stream had queued when
    /// `facts` were read ([`Ledger::hand_off_facts`]): `waited[s2][s]`
    /// rises to `s`'s last counted close, and `waited[s2][t]` to
    /// `waited[s][t]` for every `t`, if `task` owns `s2`, which is not
    /// shared or capturing. Returns whether the facts were kept.
    #[inline]
    pub fn learn_hand_off(&self, task: &Task, s2: StreamId, facts: &HandOffFacts) -> bool {
        let s = facts.stream;
        if !self.may_learn(task, s2) || s == s2 {
            return false;
        }
        let o = self.order(s2);
        o.raise(s, facts.closed.0);
        for &w in &facts.row {
            let (t, v) = unpack(w);
            if t != s2 {
                o.raise(t, v);
            }
        }
        true
    }

    /// The Completed fact: every epoch of `s` up to `epoch` finished.
    #[inline]
    pub fn mark_completed(&self, s: StreamId, epoch: StreamEpoch) {
        self.order(s).completed.fetch_max(epoch.0, AcqRel);
    }

    #[inline]
    fn may_learn(&self, task: &Task, s: StreamId) -> bool {
        let o = self.order(s);
        // Acquire: `task`'s own id and capture it reads in program order; a
        // stale `shared` leaves the owner the row's only writer all the same.
        o.owner_id.load(Acquire) == task.id().0
            && !o.shared.load(Acquire)
            && !o.capturing.load(Acquire)
    }

    // ----- closing, records, waits, syncs (R2, R4-R8) -----------------------

    /// R2: closes `s`'s epoch for `task` (epoch += 1) before it submits a
    /// record or a synchronize. On a capturing stream nothing closes.
    #[inline]
    pub fn close(&self, task: &Task, s: StreamId) -> Closed {
        let o = self.order(s);
        // Acquire: the task that began a capture reads it in program order;
        // one begun by a task that joined the stream is stamped past any
        // epoch whose close counts (R1/R2).
        if o.capturing.load(Acquire) {
            return Closed {
                stream: s,
                epoch: StreamEpoch(o.epoch.load(Acquire) - 1),
                counted: false,
            };
        }
        let e = o.epoch.fetch_add(1, AcqRel);
        // After the increment: a task that made `s` shared did so before it
        // read the epoch for its stamp, so either it read `e + 1` or this
        // RMW acquired its `joined_shared` and we see `shared` here.
        let counted = o.owner_id.load(Acquire) == task.id().0 && !o.shared.load(Acquire);
        if counted {
            // Only the unshared owner counts, and closes grow: one writer.
            o.closed_counted.store(e, Release);
        }
        Closed {
            stream: s,
            epoch: StreamEpoch(e),
            counted,
        }
    }

    /// R4, first half: `task` records `event` on `s`. Bumps the event's record
    /// count (so waits in flight on it give no fact), then closes `s`. Submit
    /// the driver record, then call [`Ledger::finish_record`].
    pub fn begin_record(&self, task: &Task, event: &EventCoverage, s: StreamId) -> RecordTicket {
        let (records, alone) = event.write().begin();
        RecordTicket {
            closed: self.close(task, s),
            records,
            alone,
        }
    }

    /// R4, X1, second half: the driver record was submitted. The event covers
    /// the closed epoch and the stream's ordered table if the close counted
    /// and the driver's event is surely this record: no other record of it
    /// began since (its driver call may land after this one's), and none was
    /// in flight when this one began (its driver call, too, may have landed
    /// after this one's, whenever it finished).
    pub fn finish_record(&self, event: &EventCoverage, ticket: RecordTicket) {
        let closed = ticket.closed;
        let w = event.write();
        w.end();
        if closed.counted && ticket.alone && w.records_now() == ticket.records {
            w.cover(closed.stream, closed.epoch, self.waited_row(closed.stream));
        }
    }

    /// R4: the driver record after [`Ledger::begin_record`] failed: the
    /// record is no longer in flight, and the event covers nothing (the
    /// driver's event is in doubt). A ticket neither finished nor aborted
    /// keeps the event covering nothing for good, which is safe.
    pub fn abort_record(&self, event: &EventCoverage, ticket: RecordTicket) {
        let _ = ticket;
        event.write().end();
    }

    /// R4, R14: `task` records `event` on `s`: [`Ledger::begin_record`], then
    /// `driver_record` (the driver's record, with no ledger lock held), then
    /// [`Ledger::finish_record`], or [`Ledger::abort_record`] if it failed.
    /// Returns the epoch the record closed.
    ///
    /// # Errors
    ///
    /// `driver_record`'s error.
    pub fn record<E>(
        &self,
        task: &Task,
        event: &EventCoverage,
        s: StreamId,
        driver_record: impl FnOnce() -> Result<(), E>,
    ) -> Result<Closed, E> {
        let ticket = self.begin_record(task, event, s);
        if let Err(e) = driver_record() {
            self.abort_record(event, ticket);
            return Err(e);
        }
        self.finish_record(event, ticket);
        Ok(ticket.closed)
    }

    /// DESIGN "Soundness": `event` was (or is about to be) recorded by a driver call the
    /// ledger does not see (a hand-off's pooled event, a raw handle): it
    /// covers nothing from now on, and waits in flight on it give no fact.
    pub fn record_untracked(&self, event: &EventCoverage) {
        let w = event.write();
        let _ = w.begin();
        w.end();
    }

    /// R6, R7, R8, first half: read what `event` covers before a driver wait,
    /// synchronize or query. Takes no lock: a few loads.
    #[inline]
    pub fn begin_wait(&self, event: &EventCoverage) -> WaitTicket {
        event
            .try_read(|e| WaitTicket {
                source: e.source_now(),
                records: e.records_now(),
            })
            // A record was being written: the wait gives no fact.
            .unwrap_or(WaitTicket {
                source: None,
                records: 0,
            })
    }

    /// The event's ordered table, if it was not re-recorded since `ticket`.
    #[inline]
    fn table_since(event: &EventCoverage, ticket: &WaitTicket) -> Option<Table> {
        event
            .try_read(|e| (e.records_now() == ticket.records).then(|| e.table_now()))
            .flatten()
    }

    /// R6, R7, X1: the host saw `event` complete (synchronize returned, or a
    /// query said done). If it was not re-recorded since `ticket`, its source
    /// and ordered table become Completed facts. Returns whether they did.
    pub fn finish_event_complete(&self, event: &EventCoverage, ticket: WaitTicket) -> bool {
        let Some((s, e)) = ticket.source else {
            return false;
        };
        let Some(table) = Self::table_since(event, &ticket) else {
            return false;
        };
        self.mark_completed(s, e);
        for &w in &table {
            let (t, w) = unpack(w);
            self.mark_completed(t, StreamEpoch(w));
        }
        true
    }

    /// R6, R7, R14: the host waits for `event`: [`Ledger::begin_wait`], then
    /// `driver_wait` (a driver synchronize or query, with no ledger lock
    /// held), which says whether the event is complete (a query: whether it
    /// was done; `false` also keeps the ledger from learning), then
    /// [`Ledger::finish_event_complete`] if it is. Returns whether the
    /// Completed facts were kept.
    ///
    /// # Errors
    ///
    /// `driver_wait`'s error.
    pub fn event_complete<E>(
        &self,
        event: &EventCoverage,
        driver_wait: impl FnOnce() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let ticket = self.begin_wait(event);
        Ok(driver_wait()? && self.finish_event_complete(event, ticket))
    }

    /// R8, X1: `task`'s stream `s2` waited on `event` on the device. If `task`
    /// owns `s2` (unshared, not capturing) and the event was not re-recorded
    /// since `ticket`, `s2` is ordered after the source and after the source
    /// stream's ordered table. Returns whether the fact was kept.
    #[inline]
    pub fn finish_stream_wait(
        &self,
        task: &Task,
        event: &EventCoverage,
        ticket: WaitTicket,
        s2: StreamId,
    ) -> bool {
        let Some((s, e)) = ticket.source else {
            return false;
        };
        if !self.may_learn(task, s2) {
            return false;
        }
        let Some(table) = Self::table_since(event, &ticket) else {
            return false;
        };
        let o = self.order(s2);
        if s != s2 {
            o.raise(s, e.0);
        }
        for &w in &table {
            let (t, w) = unpack(w);
            if t != s2 {
                o.raise(t, w);
            }
        }
        true
    }

    /// R8, R14: `task`'s stream `s2` waits on the device for `event`:
    /// [`Ledger::begin_wait`], then `driver_wait` (the driver's stream wait,
    /// with no ledger lock held), which says whether the ledger may learn
    /// from it (`false`: a wait captured into a graph, or on an event
    /// recorded where the ledger did not see), then
    /// [`Ledger::finish_stream_wait`] if so. Returns whether the Ordered
    /// facts were kept.
    ///
    /// # Errors
    ///
    /// `driver_wait`'s error.
    pub fn stream_wait<E>(
        &self,
        task: &Task,
        event: &EventCoverage,
        s2: StreamId,
        driver_wait: impl FnOnce() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let ticket = self.begin_wait(event);
        Ok(driver_wait()? && self.finish_stream_wait(task, event, ticket, s2))
    }

    /// The entries of `s`'s `waited` row that are not 0, as
    /// `(stream, epoch)` pairs (X1).
    #[inline]
    fn waited_row(&self, s: StreamId) -> impl Iterator<Item = (StreamId, u64)> + '_ {
        let o = self.order(s);
        o.waited_mask.iter().enumerate().flat_map(move |(k, m)| {
            let mut bits = m.load(Acquire);
            std::iter::from_fn(move || {
                while bits != 0 {
                    let i = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let w = o.waited[i].load(Acquire);
                    if w != 0 {
                        return Some((StreamId(i as u16), w));
                    }
                }
                None
            })
        })
    }

    /// R5, first half: `task` synchronizes `s`: closes its epoch.
    ///
    /// # Errors
    ///
    /// [`LedgerError::SyncWhileCapturing`] if `s` is capturing.
    pub fn begin_stream_sync(&self, task: &Task, s: StreamId) -> Result<Closed, LedgerError> {
        if self.is_capturing(s) {
            return Err(LedgerError::SyncWhileCapturing(s));
        }
        Ok(self.close(task, s))
    }

    /// R5, X1, second half: the synchronize returned. If the close counted,
    /// the closed epoch and everything `s` was ordered after are completed.
    pub fn finish_stream_sync(&self, closed: Closed) {
        if !closed.counted {
            return;
        }
        self.mark_completed(closed.stream, closed.epoch);
        for (t, w) in self.waited_row(closed.stream) {
            self.mark_completed(t, StreamEpoch(w));
        }
    }

    /// R5, R14: `task` synchronizes `s`: [`Ledger::begin_stream_sync`], then
    /// `driver_sync` (the driver's synchronize, with no ledger lock held),
    /// then [`Ledger::finish_stream_sync`] if it succeeded. Returns the
    /// epoch the synchronize closed.
    ///
    /// # Errors
    ///
    /// The outer [`LedgerError::SyncWhileCapturing`] if `s` is capturing
    /// (`driver_sync` is not called); the inner `driver_sync`'s error.
    pub fn stream_sync<E>(
        &self,
        task: &Task,
        s: StreamId,
        driver_sync: impl FnOnce() -> Result<(), E>,
    ) -> Result<Result<Closed, E>, LedgerError> {
        let closed = self.begin_stream_sync(task, s)?;
        Ok(driver_sync().map(|()| {
            self.finish_stream_sync(closed);
            closed
        }))
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
