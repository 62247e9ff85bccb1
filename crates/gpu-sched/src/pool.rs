//! Stream and event pools (R13, X5): nothing is created or destroyed on the
//! hot path once the pools are warm.

use crate::driver::{Driver, Priority, RawStream};
use crate::error::Result;
use gpu_epoch::{Ledger, StreamId, Use};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::OnceLock;

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
    /// By ledger index: set while a graphed scope records the operations
    /// of the graph it will launch on the stream (DESIGN "Graphs without capture by hand"). Buffers its
    /// operations used are stamped on the stream in an epoch whose work is
    /// not queued yet: a hand-off from it by anyone else is refused, a free
    /// deferred, until the graph is launched.
    building: Box<[AtomicBool]>,
    /// By ledger index, since the stream was last recycled (or made): the
    /// device address of the one buffer every tracked operation on it
    /// touched, [`SOLE_NONE`] if none did, [`SOLE_MANY`] once another was
    /// touched or something else was stamped there. A stream is followed
    /// ([`StreamPool::acquire_following`]) only to the buffer it holds
    /// alone. Written by the stream's holder only.
    sole: Box<[AtomicU64]>,
    /// Per slot: its stream was made with [`Priority::High`] (set before
    /// the handle is stored). A task is given a stream of its own
    /// priority where one is free or can be made (DESIGN "Streams are a
    /// resource").
    high: Box<[AtomicBool]>,
    /// A word of mapped pinned memory per stream, which the device sets
    /// when a task's work is done (see [`Tail::Written`]).
    flags: OnceLock<Flags>,
    /// By ledger index: the last value asked to be written to the flag.
    issued: Box<[AtomicU32]>,
    /// Set if the driver refused a flag write: no more are asked for.
    flags_off: AtomicBool,
    /// By ledger index: an event of the stream's own, recorded just before
    /// each flag write (0: none yet). See [`StreamPool::end_of_work`].
    end_events: Box<[AtomicU64]>,
    /// By ledger index: how many live tasks hold the stream (more than one
    /// only when the pool ran out and streams are shared, DESIGN "Streams are a resource"), with [`OWN`]
    /// set while its one holder has it to itself
    /// ([`StreamPool::acquire_own`]).
    holders: Box<[AtomicU32]>,
    /// The reclaim stream's index (never shared), or `usize::MAX`.
    reserved: AtomicUsize,
    /// Where the next search for a stream to share starts.
    share_next: AtomicUsize,
    /// Free streams kept when the pool trims itself (the warm size).
    keep: usize,
    /// Held (shared) by whoever uses every stream's handle at once (a
    /// device-wide synchronize): no stream is destroyed meanwhile.
    all: parking_lot::RwLock<()>,
    /// Streams out of sight for a moment: neither in the free list nor
    /// held (a stream being asked about by `acquire` or `trim`, let go by
    /// its last holder, being created or retired; one taken from the list
    /// is held before the list's lock goes). See [`Transit`].
    transit: AtomicUsize,
    /// How many times a stream came back in sight (or a ledger slot was
    /// freed): an `acquire` that found nothing retries if it moved.
    settled: AtomicUsize,
}

/// A stream out of the pool's sight while this lives ([`StreamPool::transit`]).
struct Transit<'a>(&'a StreamPool);

impl<'a> Transit<'a> {
    fn new(pool: &'a StreamPool) -> Self {
        pool.transit.fetch_add(1, SeqCst);
        Transit(pool)
    }
}

impl Transit<'_> {
    /// Nothing came back in sight (the stream was never out of it, or the
    /// look found nothing): the count drops, with no move to look again for.
    fn cancel(self) {
        self.0.transit.fetch_sub(1, SeqCst);
        std::mem::forget(self);
    }
}

impl Drop for Transit<'_> {
    fn drop(&mut self) {
        // Settled first: an `acquire` that sees the count drop sees the
        // move too.
        self.0.settled.fetch_add(1, SeqCst);
        self.0.transit.fetch_sub(1, SeqCst);
    }
}

/// [`StreamPool::sole`]: no buffer touched since the last recycle.
const SOLE_NONE: u64 = 0;
/// [`StreamPool::sole`]: more than one buffer, or other stamps.
const SOLE_MANY: u64 = u64::MAX;

/// The bit of a stream's holder count that marks it as its holder's own
/// ([`StreamPool::acquire_own`]): never shared, whatever the pool's state.
const OWN: u32 = 1 << 31;

impl StreamPool {
    pub(crate) fn new(capacity: usize, keep: usize) -> Self {
        StreamPool {
            keep: keep.max(1),
            all: parking_lot::RwLock::new(()),
            raw: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            created: AtomicUsize::new(0),
            free: Mutex::new(VecDeque::new()),
            captures: (0..capacity).map(|_| Mutex::new(None)).collect(),
            building: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            high: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            sole: (0..capacity).map(|_| AtomicU64::new(SOLE_NONE)).collect(),
            flags: OnceLock::new(),
            issued: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            flags_off: AtomicBool::new(false),
            end_events: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            holders: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            reserved: AtomicUsize::new(usize::MAX),
            share_next: AtomicUsize::new(0),
            transit: AtomicUsize::new(0),
            settled: AtomicUsize::new(0),
        }
    }

    /// Marks `id` as the reclaim stream, which is never shared.
    pub(crate) fn reserve(&self, id: StreamId) {
        self.reserved.store(id.index(), Relaxed);
    }

    /// The reclaim stream `id`'s runtime went: it may be shared again. Only
    /// if it is still the reserved one: a new runtime of the device may have
    /// reserved its own meanwhile.
    pub(crate) fn unreserve(&self, id: StreamId) {
        let _ = self
            .reserved
            .compare_exchange(id.index(), usize::MAX, Relaxed, Relaxed);
    }

    /// How many live tasks hold `id`.
    pub(crate) fn holders(&self, id: StreamId) -> u32 {
        self.holders[id.index()].load(Acquire) & !OWN
    }

    /// DESIGN "Streams are a resource": every stream is held and no more can be made: a stream another
    /// live task holds, shared from now on (R3: the ledger stops counting
    /// its closes). Never one being captured (the capture would take this
    /// task's work into its graph), nor the reclaim stream, nor one its
    /// holder has to itself ([`OWN`]); the capture slot's lock orders this
    /// with a capture's beginning, which refuses a stream with two holders.
    fn share(&self, ledger: &Ledger) -> Option<StreamId> {
        let n = ledger.stream_count();
        let start = self.share_next.fetch_add(1, Relaxed);
        for k in 0..n {
            let i = (start + k) % n;
            if i == self.reserved.load(Relaxed) || self.raw[i].load(Acquire) == 0 {
                continue;
            }
            let id = StreamId::from_index(i);
            let slot = self.captures[i].lock();
            // Nor one a graphed scope records for (DESIGN "Graphs without capture by hand"): this task's work
            // would go on it before the graph its stamps wait for.
            if slot.is_some() || ledger.is_capturing(id) || self.building[i].load(Acquire) {
                continue;
            }
            // Only a held stream (one with no holder is in the free list, or
            // about to be, and may be recycled); a compare-and-swap, so that
            // a holder letting go meanwhile is seen.
            let held = self.holders[i]
                .fetch_update(AcqRel, Acquire, |h| {
                    (h > 0 && h & OWN == 0).then_some(h + 1)
                })
                .is_ok();
            if !held {
                continue;
            }
            // Shared before this task can stamp anything on it, and before
            // any holder can give it back (see `release`).
            ledger.share(id);
            drop(slot);
            return Some(id);
        }
        None
    }

    /// DESIGN "Streams are a resource", when [`StreamPool::share`] finds nothing: the reclaim stream,
    /// shared with a task (while it is there: a runtime holds it). Its
    /// frees wait on the device only for records queued before them, so
    /// the task's synchronizes of it end; a capture on it is refused (two
    /// holders), as on any shared stream.
    fn share_reclaim(&self, ledger: &Ledger) -> Option<StreamId> {
        let i = self.reserved.load(Relaxed);
        if i >= self.raw.len() || self.raw[i].load(Acquire) == 0 {
            return None;
        }
        let id = StreamId::from_index(i);
        // Held by its runtime (a compare-and-swap: one that went away
        // meanwhile let it go).
        self.holders[i]
            .fetch_update(AcqRel, Acquire, |h| {
                (h > 0 && h & OWN == 0).then_some(h + 1)
            })
            .ok()?;
        ledger.share(id);
        Some(id)
    }

    /// The capture slot of `id` (see the field).
    #[inline]
    pub(crate) fn capture_slot(&self, id: StreamId) -> &Mutex<Option<Box<PooledEvent>>> {
        &self.captures[id.index()]
    }

    /// Marks `id` (held by a graphed scope's task) as recording for a
    /// graph (see the field), unless another live task holds it too (DESIGN "Streams are a resource"):
    /// `false` then. Under the capture slot's lock, which [`StreamPool::share`]
    /// takes too: a stream is either shared first (and refused here) or
    /// marked first (and never shared while marked).
    pub(crate) fn begin_building(&self, id: StreamId) -> bool {
        let _slot = self.captures[id.index()].lock();
        if self.holders(id) > 1 {
            return false;
        }
        self.building[id.index()].store(true, Release);
        true
    }

    /// The end of [`StreamPool::begin_building`]'s mark.
    pub(crate) fn end_building(&self, id: StreamId) {
        self.building[id.index()].store(false, Release);
    }

    /// Whether a graphed scope records for `id` (see the field).
    #[inline]
    pub(crate) fn is_building(&self, id: StreamId) -> bool {
        self.building[id.index()].load(Acquire)
    }

    /// Creates `n` streams up front.
    pub(crate) fn warm(&self, driver: &dyn Driver, ledger: &Ledger, n: usize) -> Result<()> {
        for _ in 0..n {
            let id = self.create(driver, ledger, Priority::Normal)?;
            self.free.lock().push_back((id, Tail::Idle));
        }
        Ok(())
    }

    /// A new stream: the driver's first, so that a ledger slot is never
    /// taken by a stream that does not exist (DESIGN "Soundness"); the ledger's second, and
    /// a driver stream the ledger has no room for is destroyed again.
    fn create(&self, driver: &dyn Driver, ledger: &Ledger, priority: Priority) -> Result<StreamId> {
        let raw = driver.create_stream_with(priority)?;
        let id = match ledger.add_stream() {
            Ok(id) => id,
            Err(e) => {
                let _ = driver.destroy_stream(raw);
                return Err(e.into());
            }
        };
        self.high[id.index()].store(priority == Priority::High, Release);
        self.sole[id.index()].store(SOLE_NONE, Relaxed);
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
    ///
    /// First the most recently released stream known idle with no driver
    /// call (its task left it idle, or its flag is set); then the others,
    /// oldest first, each asked with a driver query (about 1.5 us on the
    /// H200, against a load for a flag).
    pub(crate) fn acquire(&self, driver: &dyn Driver, ledger: &Ledger) -> Result<(StreamId, bool)> {
        self.acquire_as(driver, ledger, false, Priority::Normal)
    }

    /// [`StreamPool::acquire`] for a task of priority `priority`: a free
    /// stream of that priority first, else a new one of it while the
    /// ledger has room, else (as `acquire` would) a busy free one, of that
    /// priority first, or a shared one, whatever its priority: a task is
    /// never refused a stream for its priority.
    pub(crate) fn acquire_with(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
        priority: Priority,
    ) -> Result<(StreamId, bool)> {
        self.acquire_as(driver, ledger, false, priority)
    }

    /// [`StreamPool::acquire_with`] for a task whose first operation
    /// writes the buffer at device address `ptr`, last used by `follow`:
    /// that stream, taken over as it is (R3, not recycled: no driver call),
    /// if its last task finished and left work whose end is not known, and
    /// every operation stamped there since its last recycle touched that
    /// buffer alone; else as `acquire_with`.
    ///
    /// Why this adds no wait the work does not need (DESIGN "Streams are a
    /// resource"): `follow` is a use the ledger does not know complete (its
    /// stream not recycled since, nor seen past its epoch), so the write,
    /// on any stream with no fact about `follow`'s, would wait on the
    /// device for everything that stream has queued (R9: an event recorded
    /// on it now). On that stream itself it runs after the same work, by
    /// stream order, with no event, no wait and no query. And no other
    /// task waits for the new work in vain: the stream holds stamps of no
    /// other buffer (`sole`), so a later hand-off from it is of this
    /// buffer, which the write conflicts with. Only a stream no task holds
    /// and that is not shared (its closes count for the new task: R3) is
    /// taken; one known idle goes the usual way (recycled, with no call
    /// either).
    pub(crate) fn acquire_following(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
        priority: Priority,
        (follow, ptr): (Use, u64),
    ) -> Result<(StreamId, bool)> {
        driver.check_sticky()?;
        let id = follow.stream;
        let taken = {
            let mut free = self.free.lock();
            let at = free.iter().position(|&(f, tail)| {
                f == id
                    && match tail {
                        Tail::Idle => false,
                        Tail::Written(v) => !self.written(driver, id, v),
                        Tail::Unknown => true,
                    }
            });
            match at {
                Some(i)
                    if self.has(id, priority)
                        && ptr != SOLE_NONE
                        && self.sole[id.index()].load(Relaxed) == ptr
                        && !ledger.is_shared(id)
                        && ledger.generation(id) == follow.generation
                        && ledger.completed(id) < follow.epoch =>
                {
                    free.remove(i);
                    // Held before the list's lock goes: never out of sight.
                    self.holders[id.index()].store(1, Release);
                    true
                }
                _ => false,
            }
        };
        if taken {
            return Ok((id, false));
        }
        self.acquire_as(driver, ledger, false, priority)
    }

    /// A tracked operation on `id` (held by the caller) touched the buffer
    /// at device address `ptr` (see [`StreamPool::sole`]).
    #[inline]
    pub(crate) fn note_touch(&self, id: StreamId, ptr: u64) {
        let sole = &self.sole[id.index()];
        match sole.load(Relaxed) {
            v if v == ptr || v == SOLE_MANY => {}
            SOLE_NONE => sole.store(ptr, Relaxed),
            _ => sole.store(SOLE_MANY, Relaxed),
        }
    }

    /// Something other than a tracked operation was stamped on `id` (an
    /// allocation, a host copy, an escape, a graph's arrays): it is
    /// followed no more until recycled.
    #[inline]
    pub(crate) fn note_other(&self, id: StreamId) {
        self.sole[id.index()].store(SOLE_MANY, Relaxed);
    }

    /// R13 for `id`, found idle and about to be held: its generation moves
    /// on, and it holds no buffer's stamps any more ([`StreamPool::sole`]).
    fn recycle(&self, ledger: &Ledger, id: StreamId) {
        ledger.recycle(id);
        self.sole[id.index()].store(SOLE_NONE, Relaxed);
    }

    /// Whether `id`'s stream has `priority`.
    #[inline]
    fn has(&self, id: StreamId, priority: Priority) -> bool {
        self.high[id.index()].load(Acquire) == (priority == Priority::High)
    }

    /// [`StreamPool::acquire`] for a task that must have its stream to
    /// itself for as long as it holds it (a communicator's, DESIGN "Beyond one GPU": a stream
    /// shared by two communicators' tasks could queue their parts in
    /// opposite orders on two devices, and each call would wait for the
    /// other's for good). Never a stream another task holds, and no task
    /// gets this one until it is given back.
    ///
    /// # Errors
    ///
    /// [`gpu_epoch::LedgerError::TooManyStreams`] where `acquire` would
    /// share one; as `acquire`.
    pub(crate) fn acquire_own(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
    ) -> Result<(StreamId, bool)> {
        self.acquire_as(driver, ledger, true, Priority::Normal)
    }

    /// [`StreamPool::acquire_with`], or [`StreamPool::acquire_own`] if
    /// `own`.
    ///
    /// A stream can be out of sight for a moment, neither free nor held
    /// (another thread asks the driver about it, hands it to its first
    /// holder, lets it go, creates or retires it: [`Transit`]); an attempt
    /// that found nothing while one was, or while one came back, looks
    /// again: only a pool with nothing free, no room and nothing to share
    /// is out of streams (DESIGN "Streams are a resource": never because another thread held one in its
    /// hands at that moment). Each such moment is short (a driver query at
    /// most), so this never waits for a task.
    fn acquire_as(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
        own: bool,
        priority: Priority,
    ) -> Result<(StreamId, bool)> {
        driver.check_sticky()?;
        // The first holder's count: a stream with no holder is shared by
        // nobody (`share` takes held ones only), so it is marked before any
        // other task could see it held.
        let first = if own { OWN | 1 } else { 1 };
        loop {
            if let Some(got) = self.idle(driver, ledger, first, priority) {
                return Ok(got);
            }
            // Moves from now on could hide a stream from the looks below.
            let settled = self.settled.load(SeqCst);
            if ledger.live_stream_count() < ledger.capacity() {
                if let Some(id) = self.create_held(driver, ledger, first, priority) {
                    return Ok((id, true));
                }
            }
            {
                let mut free = self.free.lock();
                // The oldest of this priority, else the oldest.
                let i = free.iter().position(|&(id, _)| self.has(id, priority));
                if let Some((id, _)) = free.remove(i.unwrap_or(0)) {
                    // Held before the list's lock goes: never out of sight.
                    self.holders[id.index()].store(first, Release);
                    return Ok((id, false));
                }
            }
            // DESIGN "Streams are a resource": more live tasks want streams than the ledger tracks: share
            // one rather than fail, as Rayon's depth is bounded only by the
            // stack (but not for a task that needs its own).
            if let Some(id) = (!own).then(|| self.share(ledger)).flatten() {
                return Ok((id, false));
            }
            if self.transit.load(SeqCst) > 0 || self.settled.load(SeqCst) != settled {
                std::thread::yield_now();
                continue;
            }
            // Every stream of this device is the reclaim stream, captured,
            // or its holder's own, and the ledger is full (of other
            // devices' streams, too): the reclaim stream, shared as a last
            // resort (a task's capture on it is refused as on any shared
            // stream).
            if let Some(id) = (!own).then(|| self.share_reclaim(ledger)).flatten() {
                return Ok((id, false));
            }
            return Err(gpu_epoch::LedgerError::TooManyStreams {
                capacity: ledger.capacity(),
            }
            .into());
        }
    }

    /// `acquire`'s first choice: a free stream known idle (recycled), the
    /// most recently released one with no driver call first, then the
    /// others asked with a query (each out of sight, [`Transit`], from the
    /// moment it leaves the list until it is held or back).
    fn idle(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
        first: u32,
        priority: Priority,
    ) -> Option<(StreamId, bool)> {
        let mut unknown = smallvec::SmallVec::<[StreamId; 16]>::new();
        {
            let mut free = self.free.lock();
            let found = free.iter().rposition(|&(id, tail)| {
                self.has(id, priority)
                    && match tail {
                        Tail::Idle => true,
                        Tail::Written(v) => self.written(driver, id, v),
                        Tail::Unknown => false,
                    }
            });
            if let Some(i) = found {
                let (id, _) = free.remove(i).expect("a found index");
                // Recycled before it is held: once held, `share` may give it
                // to another task, whose stamps a later recycle would cover
                // (R13's precondition: no live task on it). Held before the
                // list's lock goes: never out of sight.
                self.recycle(ledger, id);
                self.holders[id.index()].store(first, Release);
                #[cfg(test)]
                test::held(id);
                drop(free);
                return Some((id, true));
            }
            unknown.extend(
                free.iter()
                    .filter(|&&(id, t)| matches!(t, Tail::Unknown) && self.has(id, priority))
                    .map(|&(id, _)| id),
            );
        }
        for id in unknown {
            // Out of the list while the driver is asked, so that no other
            // thread takes it (and gives it back busy) meanwhile.
            let _t = Transit::new(self);
            {
                let mut free = self.free.lock();
                match free.iter().position(|&(f, _)| f == id) {
                    Some(i) => drop(free.remove(i)),
                    None => {
                        drop(free);
                        _t.cancel();
                        continue;
                    }
                }
            }
            // A query that fails says nothing about this stream: pass it
            // over (a broken context was caught above).
            if let Ok(true) = driver.stream_query(self.raw(id)) {
                // Recycled before it is held (as above).
                self.recycle(ledger, id);
                self.holders[id.index()].store(first, Release);
                #[cfg(test)]
                test::held(id);
                return Some((id, true));
            }
            self.free.lock().push_back((id, Tail::Unknown));
        }
        None
    }

    /// A new stream, held by its first holder (`first`) before any other
    /// thread can look for it; `None` if the driver or the ledger refuses.
    fn create_held(
        &self,
        driver: &dyn Driver,
        ledger: &Ledger,
        first: u32,
        priority: Priority,
    ) -> Option<StreamId> {
        let t = Transit::new(self);
        match self.create(driver, ledger, priority) {
            Ok(id) => {
                self.holders[id.index()].store(first, Release);
                Some(id)
            }
            Err(_) => {
                t.cancel();
                None
            }
        }
    }

    /// Gives a stream back; its task finished. It returns to the free list
    /// when its last holder lets go.
    /// A stream that was shared goes back as [`Tail::Unknown`]: another
    /// holder may have left work after the last holder's end-of-work mark.
    pub(crate) fn release(&self, id: StreamId, tail: Tail, driver: &dyn Driver, ledger: &Ledger) {
        // Out of sight from the moment it has no holder until it is in the
        // list.
        let t = Transit::new(self);
        // An owned stream has one holder: it goes back with the mark off.
        let (Ok(was) | Err(was)) = self.holders[id.index()].fetch_update(AcqRel, Acquire, |h| {
            Some(if h & OWN != 0 { 0 } else { h.wrapping_sub(1) })
        });
        if was & !OWN != 1 {
            // Still held: in sight all along.
            t.cancel();
            return;
        }
        {
            let tail = if ledger.is_shared(id) {
                Tail::Unknown
            } else {
                tail
            };
            let over = {
                let mut free = self.free.lock();
                free.push_back((id, tail));
                free.len() > self.keep
            };
            drop(t);
            if over {
                self.trim(driver, ledger);
            }
        }
    }

    /// DESIGN "Streams are a resource": streams made for a burst of live tasks go away once idle: free
    /// streams beyond the warm size that are known idle (without a driver
    /// call) are retired, the oldest first. A stream's handle is taken away
    /// under its capture slot's lock, which a hand-off holds while it reads
    /// the handle and records on it, so no hand-off records on a destroyed
    /// stream (it finds 0: retired, idle, nothing to wait for); the ledger
    /// slot becomes reusable only after that.
    ///
    /// Streams that went back shared (their tail unknown) are asked with a
    /// driver query, out of the list and outside its lock, as `acquire`
    /// does: trimming follows a burst, not the hot path.
    fn trim(&self, driver: &dyn Driver, ledger: &Ledger) {
        // A device-wide synchronize holds every handle: not now (the next
        // task's end trims again).
        let Some(_all) = self.all.try_write() else {
            return;
        };
        let mut gone = smallvec::SmallVec::<[StreamId; 8]>::new();
        let mut ask = smallvec::SmallVec::<[StreamId; 8]>::new();
        // The streams taken out are out of sight until they are back or
        // their ledger slots free (room for `acquire` to create one).
        let t = Transit::new(self);
        {
            let mut free = self.free.lock();
            let mut k = 0;
            while free.len() > self.keep && k < free.len() {
                let (id, tail) = free[k];
                let take = id.index() != self.reserved.load(Relaxed)
                    && match tail {
                        Tail::Idle => true,
                        Tail::Written(v) => self.written(driver, id, v),
                        Tail::Unknown => {
                            ask.push(id);
                            true
                        }
                    };
                if take {
                    free.remove(k);
                    if !matches!(tail, Tail::Unknown) {
                        gone.push(id);
                    }
                } else {
                    k += 1;
                }
            }
        }
        if gone.is_empty() && ask.is_empty() {
            t.cancel();
            return;
        }
        for id in ask {
            if let Ok(true) = driver.stream_query(self.raw(id)) {
                gone.push(id);
            } else {
                self.free.lock().push_back((id, Tail::Unknown));
            }
        }
        for id in gone {
            let raw = {
                let _slot = self.captures[id.index()].lock();
                RawStream(self.raw[id.index()].swap(0, AcqRel))
            };
            ledger.retire(id);
            self.created.fetch_sub(1, AcqRel);
            if let Some(e) = self.take_end_event(id) {
                // Recorded only on this stream, which is idle (queried above).
                let _ = driver.destroy_event(e);
            }
            let _ = driver.destroy_stream(raw);
        }
        drop(t);
    }

    /// Every stream's ledger id and handle, with the lock that keeps them
    /// from being destroyed meanwhile (a device-wide synchronize).
    pub(crate) fn all_held_with_ids(
        &self,
    ) -> (
        parking_lot::RwLockReadGuard<'_, ()>,
        Vec<(StreamId, RawStream)>,
    ) {
        let g = self.all.read();
        (g, self.all_with_ids())
    }

    /// Every driver handle (for teardown and device-wide synchronizes).
    /// Slots are filled in ledger order but not in time order (two threads
    /// may create streams at once), so every slot is read and the empty
    /// ones (0: not yet stored) are passed over.
    pub(crate) fn all_raw(&self) -> Vec<RawStream> {
        self.all_with_ids().into_iter().map(|(_, r)| r).collect()
    }

    /// [`StreamPool::all_raw`] with each stream's ledger id.
    pub(crate) fn all_with_ids(&self) -> Vec<(StreamId, RawStream)> {
        self.raw
            .iter()
            .enumerate()
            .map(|(i, r)| (StreamId::from_index(i), RawStream(r.load(Acquire))))
            .filter(|(_, r)| r.0 != 0)
            .collect()
    }
}

/// What tells whether a free stream is idle.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tail {
    /// Known idle: it was idle when its last task got it (or that task
    /// synchronized it) and that task submitted nothing after: no driver
    /// call needed. (Other tasks' hand-offs may record events on it, which
    /// carry no stamped work.)
    Idle,
    /// Idle once its flag holds this value: the device writes it after
    /// everything the last task submitted (all the stream's stamped work).
    /// Reading it is a load. (A query of an event recorded as the task
    /// ends was measured on the H200 too: 1.37 us, about a stream query.)
    Written(u32),
    /// Ask the driver about the stream.
    Unknown,
}

mod event;
mod flags;
pub(crate) use event::{EventPool, PooledEvent};
use flags::Flags;

#[cfg(test)]
mod test;
