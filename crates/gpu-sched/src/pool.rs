//! Stream and event pools (R13, X5): nothing is created or destroyed on the
//! hot path once the pools are warm.

use crate::driver::{Driver, RawEvent, RawStream};
use crate::error::Result;
use gpu_epoch::{EventCoverage, Ledger, StreamId};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
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
    /// A word of mapped pinned memory per stream, which the device sets
    /// when a task's work is done (see [`Tail::Written`]).
    flags: OnceLock<Flags>,
    /// By ledger index: the last value asked to be written to the flag.
    issued: Box<[AtomicU32]>,
    /// Set if the driver refused a flag write: no more are asked for.
    flags_off: AtomicBool,
    /// By ledger index: how many live tasks hold the stream (more than one
    /// only when the pool ran out and streams are shared, §9).
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
    /// The device's work queues ("connections") the streams share; see
    /// [`Channels`].
    channels: Channels,
}

/// The device takes work through a few hardware queues, `CUDA_DEVICE_MAX_CONNECTIONS`
/// of them (8 unless set; 1-32), and the driver gives each new stream of a
/// context the next one in turn. Two streams on one queue are ordered
/// after each other on the device as if they were one (a "false
/// dependency"): a sibling's kernel on a stream that shares a queue with a
/// running kernel, or with a stream waiting for an event, waits too.
///
/// The streams the pool makes up front, one after another ([`StreamPool::warm`]),
/// sit on consecutive queues; streams made later, once other code of the
/// process (or the driver itself) may have made streams in between, sit on
/// queues the pool cannot know. So the pool counts, per queue, the held
/// warm streams on it, and a task gets an idle stream in this order: a warm
/// one on a queue no held stream uses, then one made later (its queue is a
/// guess: likely free), then a warm one on the least used queue; the most
/// recently released among equals. Trimming retires the later streams
/// first. A preference, never a rule of correctness.
#[derive(Debug)]
struct Channels {
    count: usize,
    /// Warm streams made so far: the next one's queue.
    made: AtomicUsize,
    /// By ledger index: the stream's queue, or [`UNKNOWN`].
    of: Box<[AtomicUsize]>,
    /// By queue: the warm streams on it that are held (the reclaim stream
    /// included).
    held: Box<[AtomicU32]>,
}

/// The queue of a stream made after the warm ones.
const UNKNOWN: usize = usize::MAX;

impl Channels {
    fn new(count: usize, capacity: usize) -> Self {
        let count = count.clamp(1, 32);
        Channels {
            count,
            made: AtomicUsize::new(0),
            of: (0..capacity).map(|_| AtomicUsize::new(UNKNOWN)).collect(),
            held: (0..count).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The count the driver uses: `CUDA_DEVICE_MAX_CONNECTIONS` if it holds
    /// a number the driver accepts (1-32), else its default, 8.
    fn from_env() -> usize {
        std::env::var("CUDA_DEVICE_MAX_CONNECTIONS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| (1..=32).contains(n))
            .unwrap_or(8)
    }

    /// Stream `i` was just made: a warm one (`warm`), or later.
    fn made(&self, i: usize, warm: bool) {
        let q = if warm {
            self.made.fetch_add(1, Relaxed) % self.count
        } else {
            UNKNOWN
        };
        self.of[i].store(q, Relaxed);
    }

    /// How a free stream `i` ranks for a new task, lowest first: a warm one
    /// on an unused queue, a later one, a warm one on a used queue (by how
    /// many use it).
    fn rank(&self, i: usize) -> u32 {
        match self.of[i].load(Relaxed) {
            UNKNOWN => 1,
            q => match self.held[q].load(Relaxed) {
                0 => 0,
                n => n.saturating_add(1),
            },
        }
    }

    /// Whether stream `i` was made after the warm ones.
    fn later(&self, i: usize) -> bool {
        self.of[i].load(Relaxed) == UNKNOWN
    }

    /// Stream `i` got its first holder (`up`) or lost its last.
    fn hold(&self, i: usize, up: bool) {
        let q = self.of[i].load(Relaxed);
        if q == UNKNOWN {
            return;
        }
        if up {
            self.held[q].fetch_add(1, Relaxed);
        } else {
            self.held[q].fetch_sub(1, Relaxed);
        }
    }
}

/// The end-of-work flags: `bytes` of mapped pinned memory, seen by the host
/// at `host` and by the device at `dev`.
#[derive(Debug)]
struct Flags {
    host: usize,
    dev: u64,
    bytes: usize,
}

impl StreamPool {
    /// A pool of at most `capacity` streams that keeps `keep` when idle,
    /// for a device with `connections` work queues (see [`Channels`]; 0:
    /// what `CUDA_DEVICE_MAX_CONNECTIONS` says).
    pub(crate) fn new(capacity: usize, keep: usize, connections: usize) -> Self {
        let connections = if connections == 0 {
            Channels::from_env()
        } else {
            connections
        };
        StreamPool {
            channels: Channels::new(connections, capacity),
            keep: keep.max(1),
            all: parking_lot::RwLock::new(()),
            raw: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            created: AtomicUsize::new(0),
            free: Mutex::new(VecDeque::new()),
            captures: (0..capacity).map(|_| Mutex::new(None)).collect(),
            flags: OnceLock::new(),
            issued: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            flags_off: AtomicBool::new(false),
            holders: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            reserved: AtomicUsize::new(usize::MAX),
            share_next: AtomicUsize::new(0),
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
        self.holders[id.index()].load(Acquire)
    }

    /// §9: every stream is held and no more can be made: a stream another
    /// live task holds, shared from now on (R3: the ledger stops counting
    /// its closes). Never one being captured (the capture would take this
    /// task's work into its graph) nor the reclaim stream; the capture slot's
    /// lock orders this with a capture's beginning, which refuses a stream
    /// with two holders.
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
            if slot.is_some() || ledger.is_capturing(id) {
                continue;
            }
            // Only a held stream (one with no holder is in the free list, or
            // about to be, and may be recycled); a compare-and-swap, so that
            // a holder letting go meanwhile is seen.
            let held = self.holders[i]
                .fetch_update(AcqRel, Acquire, |h| (h > 0).then_some(h + 1))
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

    /// Allocates the end-of-work flags. Without them (not asked for, or the
    /// allocation refused) every stream whose task left work in flight is
    /// queried instead.
    pub(crate) fn init_flags(&self, driver: &dyn Driver) {
        let bytes = self.issued.len() * 4;
        match driver.alloc_host(bytes, true) {
            Ok((host, dev)) => {
                // SAFETY: `host` is `bytes` of fresh host memory; zero, so
                // that no flag holds a value before the device writes one
                // (values asked for start at 1).
                unsafe { std::ptr::write_bytes(host, 0, bytes) };
                let _ = self.flags.set(Flags {
                    host: host as usize,
                    dev,
                    bytes,
                });
            }
            Err(_) => self.flags_off.store(true, Relaxed),
        }
    }

    /// The flags' memory, to free once every stream is drained.
    pub(crate) fn flag_memory(&self) -> Option<(*mut u8, usize)> {
        self.flags.get().map(|f| (f.host as *mut u8, f.bytes))
    }

    /// How `id`'s task ends: asks the device to set `id`'s flag once
    /// everything queued on the stream so far is done. [`Tail::Unknown`] if
    /// there are no flags or the driver refuses.
    pub(crate) fn end_of_work(&self, driver: &dyn Driver, id: StreamId) -> Tail {
        let Some(f) = self.flags.get() else {
            return Tail::Unknown;
        };
        if self.flags_off.load(Relaxed) {
            return Tail::Unknown;
        }
        let i = id.index();
        // Only the task that holds the stream writes its entry.
        let v = self.issued[i].load(Relaxed).wrapping_add(1).max(1);
        self.issued[i].store(v, Relaxed);
        // SAFETY: the flags are `issued.len()` 4-aligned words of mapped
        // pinned memory of `driver` (`init_flags`) and `i` indexes one; they
        // are freed only when the runtime drops, after every stream was
        // synchronized, and the host only loads them atomically
        // (`value_written`).
        match unsafe { driver.write_value(self.raw(id), f.dev + 4 * i as u64, v) } {
            Ok(()) => Tail::Written(v),
            Err(_) => {
                self.flags_off.store(true, Relaxed);
                Tail::Unknown
            }
        }
    }

    /// Whether `id`'s flag holds `v`: its last task's work is done.
    fn written(&self, driver: &dyn Driver, id: StreamId, v: u32) -> bool {
        let Some(f) = self.flags.get() else {
            return false;
        };
        // SAFETY: the flags are 4-aligned mapped pinned memory of `driver`,
        // `issued.len()` words, alive until the runtime drops (after every
        // stream is drained); `id` indexes one of them.
        unsafe { driver.value_written((f.host + 4 * id.index()) as *const u32, v) }
    }

    /// The capture slot of `id` (see the field).
    #[inline]
    pub(crate) fn capture_slot(&self, id: StreamId) -> &Mutex<Option<Box<PooledEvent>>> {
        &self.captures[id.index()]
    }

    /// Creates `n` streams up front, one after another (so on consecutive
    /// work queues, [`Channels`]).
    pub(crate) fn warm(&self, driver: &dyn Driver, ledger: &Ledger, n: usize) -> Result<()> {
        for _ in 0..n {
            let id = self.create(driver, ledger, true)?;
            self.free.lock().push_back((id, Tail::Idle));
        }
        Ok(())
    }

    /// A new stream: the driver's first, so that a ledger slot is never
    /// taken by a stream that does not exist (§8); the ledger's second, and
    /// a driver stream the ledger has no room for is destroyed again.
    fn create(&self, driver: &dyn Driver, ledger: &Ledger, warm: bool) -> Result<StreamId> {
        let raw = driver.create_stream()?;
        let id = match ledger.add_stream() {
            Ok(id) => id,
            Err(e) => {
                let _ = driver.destroy_stream(raw);
                return Err(e.into());
            }
        };
        self.channels.made(id.index(), warm);
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
    /// First the streams known idle with no driver call (their task left
    /// them idle, or their flag is set), in the order of [`Channels::rank`]
    /// (a free work queue first), the most recently released among equals;
    /// then the others, oldest first, each asked with a driver query (about
    /// 1.5 us on the H200, against a load for a flag).
    pub(crate) fn acquire(&self, driver: &dyn Driver, ledger: &Ledger) -> Result<(StreamId, bool)> {
        driver.check_sticky()?;
        let mut unknown = smallvec::SmallVec::<[StreamId; 16]>::new();
        {
            let mut free = self.free.lock();
            let mut best: Option<(usize, u32)> = None;
            for (i, &(id, tail)) in free.iter().enumerate().rev() {
                let idle = match tail {
                    Tail::Idle => true,
                    Tail::Written(v) => self.written(driver, id, v),
                    Tail::Unknown => false,
                };
                if !idle {
                    continue;
                }
                let rank = self.channels.rank(id.index());
                if best.map_or(true, |(_, b)| rank < b) {
                    best = Some((i, rank));
                    if rank == 0 {
                        break;
                    }
                }
            }
            if let Some((i, _)) = best {
                let (id, _) = free.remove(i).expect("a found index");
                drop(free);
                self.hold(id);
                ledger.recycle(id);
                return Ok((id, true));
            }
            unknown.extend(
                free.iter()
                    .filter(|(_, t)| matches!(t, Tail::Unknown))
                    .map(|&(id, _)| id),
            );
        }
        for id in unknown {
            // Out of the list while the driver is asked, so that no other
            // thread takes it (and gives it back busy) meanwhile.
            {
                let mut free = self.free.lock();
                match free.iter().position(|&(f, _)| f == id) {
                    Some(i) => drop(free.remove(i)),
                    None => continue,
                }
            }
            // A query that fails says nothing about this stream: pass it
            // over (a broken context was caught above).
            if let Ok(true) = driver.stream_query(self.raw(id)) {
                self.hold(id);
                ledger.recycle(id);
                return Ok((id, true));
            }
            self.free.lock().push_back((id, Tail::Unknown));
        }
        if ledger.live_stream_count() < ledger.capacity() {
            if let Ok(id) = self.create(driver, ledger, false) {
                self.hold(id);
                return Ok((id, true));
            }
        }
        if let Some((id, _)) = self.free.lock().pop_front() {
            self.hold(id);
            return Ok((id, false));
        }
        // §9: more live tasks want streams than the ledger tracks: share
        // one rather than fail, as Rayon's depth is bounded only by the
        // stack.
        match self.share(ledger) {
            Some(id) => Ok((id, false)),
            None => Err(gpu_epoch::LedgerError::TooManyStreams {
                capacity: ledger.capacity(),
            }
            .into()),
        }
    }

    /// `id`, in no task's hands, gets its first holder.
    fn hold(&self, id: StreamId) {
        self.holders[id.index()].store(1, Release);
        self.channels.hold(id.index(), true);
    }

    /// Gives a stream back; its task finished. It returns to the free list
    /// when its last holder lets go.
    /// A stream that was shared goes back as [`Tail::Unknown`]: another
    /// holder may have left work after the last holder's end-of-work mark.
    pub(crate) fn release(&self, id: StreamId, tail: Tail, driver: &dyn Driver, ledger: &Ledger) {
        if self.holders[id.index()].fetch_sub(1, AcqRel) == 1 {
            self.channels.hold(id.index(), false);
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
            if over {
                self.trim(driver, ledger);
            }
        }
    }

    /// §9: streams made for a burst of live tasks go away once idle: free
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
        {
            let mut free = self.free.lock();
            // First the streams made after the warm ones, then any: the
            // warm ones sit on known work queues (see `Channels`).
            for any in [false, true] {
                let mut k = 0;
                while free.len() > self.keep && k < free.len() {
                    let (id, tail) = free[k];
                    let take = id.index() != self.reserved.load(Relaxed)
                        && (any || self.channels.later(id.index()))
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
            let _ = driver.destroy_stream(raw);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::host::HostDriver;

    /// The work queues of `ids`, sorted (`UNKNOWN` last).
    fn queues(p: &StreamPool, ids: &[StreamId]) -> Vec<usize> {
        let mut q: Vec<usize> = ids
            .iter()
            .map(|id| p.channels.of[id.index()].load(Relaxed))
            .collect();
        q.sort_unstable();
        q
    }

    fn setup(queues: usize, warm: usize) -> (HostDriver, Ledger, StreamPool) {
        let d = HostDriver::new(1 << 20, usize::MAX);
        let ledger = Ledger::new(16);
        let p = StreamPool::new(16, warm, queues);
        p.warm(&d, &ledger, warm).unwrap();
        (d, ledger, p)
    }

    #[test]
    fn busy_tasks_get_warm_streams_on_distinct_work_queues() {
        let (d, ledger, p) = setup(4, 4);
        let held: Vec<StreamId> = (0..4).map(|_| p.acquire(&d, &ledger).unwrap().0).collect();
        assert_eq!(queues(&p, &held), [0, 1, 2, 3]);
        // Given back in an order that puts two queues last, then two taken
        // again: still on two queues, not one.
        for &id in &[held[0], held[2], held[1], held[3]] {
            p.release(id, Tail::Idle, &d, &ledger);
        }
        let a = p.acquire(&d, &ledger).unwrap().0;
        let b = p.acquire(&d, &ledger).unwrap().0;
        assert_ne!(queues(&p, &[a]), queues(&p, &[b]));
        // The most recently released first among equals (a free queue).
        assert_eq!(a, held[3]);
        // Six held: the four warm ones, then two made now (queue unknown).
        let rest: Vec<StreamId> = (0..4).map(|_| p.acquire(&d, &ledger).unwrap().0).collect();
        let all = [a, b, rest[0], rest[1], rest[2], rest[3]];
        assert_eq!(queues(&p, &all), [0, 1, 2, 3, UNKNOWN, UNKNOWN]);
        assert!(p.channels.held.iter().all(|h| h.load(Relaxed) == 1));
        // Given back: a warm stream's queue is busy again, so a later one
        // comes first; then a warm one on a free queue beats both.
        let later = *all.iter().find(|id| p.channels.later(id.index())).unwrap();
        p.release(later, Tail::Idle, &d, &ledger);
        p.release(a, Tail::Idle, &d, &ledger);
        assert_eq!(p.acquire(&d, &ledger).unwrap().0, a);
        p.release(a, Tail::Idle, &d, &ledger);
        let (b_q, b_id) = (p.channels.of[b.index()].load(Relaxed), b);
        p.release(b_id, Tail::Idle, &d, &ledger);
        assert_eq!(p.channels.held[b_q].load(Relaxed), 0);
        assert_eq!(p.acquire(&d, &ledger).unwrap().0, b_id);
    }

    #[test]
    fn trimming_retires_the_later_streams_first() {
        let (d, ledger, p) = setup(4, 4);
        let all: Vec<StreamId> = (0..6).map(|_| p.acquire(&d, &ledger).unwrap().0).collect();
        // The warm ones given back first (the oldest in the free list), then
        // the two later ones: retiring the oldest would lose two queues.
        for &id in &all {
            p.release(id, Tail::Idle, &d, &ledger);
        }
        assert_eq!(p.created(), 4);
        let kept: Vec<StreamId> = (0..4).map(|_| p.acquire(&d, &ledger).unwrap().0).collect();
        assert_eq!(queues(&p, &kept), [0, 1, 2, 3]);
        assert_eq!(p.created(), 4);
    }

    #[test]
    fn held_counts_follow_holders() {
        let (d, ledger, p) = setup(2, 3);
        // Three warm streams on two queues: 0, 1, 0.
        let r = p.acquire(&d, &ledger).unwrap().0;
        p.reserve(r);
        // The reclaim stream counts on its queue: the next task takes the
        // other queue.
        let a = p.acquire(&d, &ledger).unwrap().0;
        assert_ne!(queues(&p, &[r]), queues(&p, &[a]));
        p.release(a, Tail::Idle, &d, &ledger);
        p.unreserve(r);
        p.release(r, Tail::Idle, &d, &ledger);
        assert!(p.channels.held.iter().all(|h| h.load(Relaxed) == 0));
    }

    #[test]
    fn the_queue_count_comes_from_the_driver_variable() {
        // Not set in the test environment unless by the user: either way a
        // count the driver accepts.
        let n = Channels::from_env();
        assert!((1..=32).contains(&n));
        assert_eq!(Channels::new(0, 4).count, 1);
        assert_eq!(Channels::new(64, 4).count, 32);
    }
}
