//! The host backend's streams: a CPU thread each, running its queue of
//! operations in order (records, waits, gates, frees, kernels), their
//! slots and handles, and the driver's own helpers around them.

use super::detector::{Clock, Detector};
use super::graph::HostCapture;
use super::{Driver, MemAccess, RawEvent, RawStream};
use super::{HostDriver, Shared, ALIGN};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::alloc::Layout;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One record of an event: done once its stream reached it.
#[derive(Debug, Default)]
pub(super) struct RecordState {
    pub(super) done: Mutex<Option<Clock>>,
    pub(super) cv: Condvar,
    /// When the stream reached the record (for event timing).
    pub(super) at: Mutex<Option<Instant>>,
}

impl RecordState {
    pub(super) fn wait(&self) -> Clock {
        let mut g = self.done.lock();
        loop {
            if let Some(c) = g.as_ref() {
                return c.clone();
            }
            self.cv.wait(&mut g);
        }
    }
    pub(super) fn complete(&self, clock: Clock) {
        *self.at.lock() = Some(Instant::now());
        *self.done.lock() = Some(clock);
        self.cv.notify_all();
    }
    pub(super) fn is_done(&self) -> Option<Clock> {
        self.done.lock().clone()
    }
}

pub(super) type Body = Arc<dyn Fn() + Send + Sync>;

/// A host event: its latest record, if any.
pub(super) type EventSlot = Arc<Mutex<Option<Arc<RecordState>>>>;

#[derive(Clone)]
pub(super) enum OpKind {
    Run(Body),
    Record(Arc<RecordState>),
    Wait(Arc<RecordState>),
    Gate {
        open: usize,
        timed_out: usize,
        timeout: Duration,
    },
    Free {
        ptr: u64,
        bytes: usize,
    },
    /// Stores `value` at `addr` (4-aligned host memory).
    WriteValue {
        addr: u64,
        value: u32,
    },
    /// The wait audit (`Driver::audit_wait`): judges the wait on `of`
    /// queued next, for `on_behalf`; orders nothing itself.
    Audit {
        of: Arc<RecordState>,
        on_behalf: MemAccess,
    },
}

#[derive(Clone)]
pub(super) struct Op {
    pub(super) kind: OpKind,
    pub(super) accesses: Vec<MemAccess>,
    /// What the host knew complete when the op was submitted.
    pub(super) host_clock: Clock,
}

pub(super) struct Queue {
    pub(super) ops: VecDeque<Op>,
    /// Ops submitted and not yet finished (queued or running).
    pub(super) pending: usize,
    pub(super) capture: Option<HostCapture>,
    /// Set by `destroy_stream`: the thread ends once the queue is drained.
    pub(super) shutdown: bool,
    /// Set by the thread as it ends (drained and shut down): it runs
    /// nothing more, and joining it waits for no work.
    pub(super) ended: bool,
}

pub(super) struct HostStream {
    pub(super) index: usize,
    pub(super) queue: Mutex<Queue>,
    /// Wakes the stream thread.
    pub(super) work: Condvar,
    /// Wakes synchronizers when the stream goes idle.
    pub(super) idle: Condvar,
    /// The stream's clock, advanced by its thread.
    pub(super) clock: Mutex<Clock>,
}

/// A stream slot: its stream, live or destroyed (draining, or ended and
/// kept until the slot is reused, for its clock), the stream's thread until
/// it is joined, and the generation its handle carries (a handle of an
/// earlier stream of the slot is refused).
pub(super) struct Slot {
    pub(super) stream: Arc<HostStream>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
    pub(super) generation: u32,
    /// Not destroyed.
    pub(super) live: bool,
}

impl HostDriver {
    /// A host backend with `memory_limit` bytes of "device" memory that
    /// creates at most `stream_limit` streams.
    pub(crate) fn new(memory_limit: usize, stream_limit: usize) -> Self {
        HostDriver {
            shared: Arc::new(Shared {
                streams: RwLock::new(Vec::new()),
                running: AtomicUsize::new(0),
                events: RwLock::new(HashMap::new()),
                graphs: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                host_clock: Mutex::new(Clock::default()),
                detector: Mutex::new(Detector::default()),
                sticky: Mutex::new(None),
                broken: AtomicBool::new(false),
                allocated: AtomicUsize::new(0),
                memory_limit,
                stream_limit,
                created: AtomicUsize::new(0),
                written: Mutex::new(HashMap::new()),
                pinned: Mutex::new(Vec::new()),
                audit: Default::default(),
            }),
        }
    }

    /// Stream slots (live streams, destroyed ones draining or kept).
    #[cfg(test)]
    pub(super) fn slots(&self) -> usize {
        self.shared.streams.read().len()
    }

    /// Stream threads not joined yet.
    #[cfg(test)]
    pub(super) fn held_threads(&self) -> usize {
        let streams = self.shared.streams.read();
        streams.iter().filter(|s| s.thread.is_some()).count()
    }

    /// Stream threads that have not ended.
    #[cfg(test)]
    pub(super) fn running_threads(&self) -> usize {
        self.shared.running.load(Ordering::Relaxed)
    }

    /// Entries in the race detector's history.
    #[cfg(test)]
    pub(super) fn history_len(&self) -> usize {
        self.shared.detector.lock().history_len()
    }

    pub(super) fn sticky(&self) -> Result<()> {
        if self.shared.broken.load(Ordering::Relaxed) {
            let name = self.shared.sticky.lock().clone().unwrap_or_default();
            return Err(Error::StickyDeviceError { code: 719, name });
        }
        Ok(())
    }

    pub(super) fn stream(&self, s: RawStream) -> Result<Arc<HostStream>> {
        let (index, generation) = unpack(s);
        self.shared
            .streams
            .read()
            .get(index)
            .filter(|slot| slot.live && slot.generation == generation)
            .map(|slot| slot.stream.clone())
            .ok_or(Error::Driver {
                code: 400,
                name: "CUDA_ERROR_INVALID_HANDLE".into(),
                during: "using a destroyed or unknown host stream",
            })
    }

    pub(super) fn event(&self, e: RawEvent) -> Result<EventSlot> {
        self.shared
            .events
            .read()
            .get(&e.0)
            .cloned()
            .ok_or(Error::Driver {
                code: 400,
                name: "CUDA_ERROR_INVALID_HANDLE".into(),
                during: "using a destroyed or unknown host event",
            })
    }

    pub(super) fn submit(
        &self,
        s: RawStream,
        kind: OpKind,
        accesses: Vec<MemAccess>,
    ) -> Result<()> {
        self.check_sticky()?;
        let st = self.stream(s)?;
        let mut q = st.queue.lock();
        // Under the queue's lock: `floor` relies on an op queued after it
        // saw the stream idle knowing what the host knew then.
        let op = Op {
            kind,
            accesses,
            host_clock: self.shared.host_clock.lock().clone(),
        };
        if let Some(cap) = q.capture.as_mut() {
            cap.push(op);
            return Ok(());
        }
        q.ops.push_back(op);
        q.pending += 1;
        st.work.notify_one();
        Ok(())
    }

    pub(super) fn observe(&self, clock: &Clock) {
        self.shared.host_clock.lock().merge(clock);
    }

    /// Waits until everything queued on `st` so far is done; returns the
    /// stream's clock at that point.
    pub(super) fn drain(&self, st: &HostStream) -> Clock {
        let marker = Arc::new(RecordState::default());
        {
            let mut q = st.queue.lock();
            let op = Op {
                kind: OpKind::Record(marker.clone()),
                accesses: Vec::new(),
                host_clock: Clock::default(),
            };
            q.ops.push_back(op);
            q.pending += 1;
            st.work.notify_one();
        }
        marker.wait()
    }
}

/// Handle of the stream in slot `index` at `generation`: never 0 (no
/// stream, as CUDA's are never null).
pub(super) fn pack(index: usize, generation: u32) -> RawStream {
    RawStream((u64::from(generation) << 32) | (index as u64 + 1))
}

/// The slot and generation of a handle (an unknown handle finds no slot).
pub(super) fn unpack(s: RawStream) -> (usize, u32) {
    (
        ((s.0 & 0xffff_ffff) as usize).wrapping_sub(1),
        (s.0 >> 32) as u32,
    )
}

/// What every operation that runs from now on is ordered after, on every
/// stream: the host's clock (an operation submitted from now on merges it,
/// and so does a stream created from now on), met with the clock of every
/// stream with operations queued or running (each of them runs with at
/// least its stream's clock). An idle stream's next operation is submitted
/// after this looked, and knows the host's clock read first: `submit` reads
/// it under the queue's lock that this takes. A detector entry this clock
/// orders can never race again ([`Detector::prune`]).
pub(super) fn floor(shared: &Shared) -> Clock {
    let streams = shared.streams.read();
    let mut f = shared.host_clock.lock().clone();
    for slot in streams.iter() {
        let q = slot.stream.queue.lock();
        if q.pending > 0 {
            drop(q);
            f.meet(&slot.stream.clock.lock());
        }
    }
    f
}

pub(super) fn run_stream(shared: Arc<Shared>, st: Arc<HostStream>) {
    loop {
        let op = {
            let mut q = st.queue.lock();
            loop {
                if let Some(op) = q.ops.pop_front() {
                    break op;
                }
                if q.shutdown {
                    // Under the lock that `create_stream` and
                    // `destroy_stream` read it with: joining this thread
                    // from now on waits for no work.
                    q.ended = true;
                    shared.running.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
                st.work.wait(&mut q);
            }
        };
        let record = execute(&shared, &st, op);
        {
            let mut q = st.queue.lock();
            q.pending -= 1;
            if q.pending == 0 {
                st.idle.notify_all();
            }
        }
        // Completed only now: once a synchronize returns, a query of the
        // stream says idle (as on CUDA), so the pool can recycle it.
        if let Some((rs, clock)) = record {
            rs.complete(clock);
        }
    }
}

/// Runs `op`; a record is returned, to be completed by the caller once the
/// op no longer counts as pending.
pub(super) fn execute(
    shared: &Shared,
    st: &HostStream,
    op: Op,
) -> Option<(Arc<RecordState>, Clock)> {
    if let OpKind::Audit { of, on_behalf } = &op.kind {
        // What the wait that follows will teach, against what this stream
        // and the host knew before it.
        let taught = of.wait();
        let mut knew = st.clock.lock().clone();
        knew.merge(&op.host_clock);
        let needed = shared
            .detector
            .lock()
            .newly_orders(st.index, &knew, &taught, on_behalf);
        shared.audit.count(needed);
        return None;
    }
    // Order: the op runs after what the host knew complete at submission.
    let (clock, tick) = {
        let mut c = st.clock.lock();
        c.merge(&op.host_clock);
        if let OpKind::Wait(rs) = &op.kind {
            drop(c);
            let other = rs.wait();
            c = st.clock.lock();
            c.merge(&other);
        }
        let tick = c.tick(st.index);
        (c.clone(), tick)
    };
    if !op.accesses.is_empty() {
        let due = {
            let mut d = shared.detector.lock();
            for a in &op.accesses {
                d.check(st.index, &clock, tick, a, op_name(&op.kind));
            }
            d.prune_due()
        };
        if due {
            // Outside the detector's lock (`create_stream` takes it under
            // the streams' lock, which `floor` takes).
            let f = floor(shared);
            shared.detector.lock().prune(&f);
        }
    }
    if shared.broken.load(Ordering::Relaxed) {
        // A faulted context runs nothing more, but events still complete so
        // that no waiter hangs.
        if let OpKind::Record(rs) = op.kind {
            return Some((rs, clock));
        }
        return None;
    }
    match op.kind {
        OpKind::Run(body) => {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body())) {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "kernel panicked".into());
                *shared.sticky.lock() = Some(format!("host kernel fault: {msg}"));
                shared.broken.store(true, Ordering::Relaxed);
            }
        }
        OpKind::Record(rs) => return Some((rs, clock)),
        OpKind::Wait(_) | OpKind::Audit { .. } => {}
        OpKind::Gate {
            open,
            timed_out,
            timeout,
        } => {
            let start = Instant::now();
            // SAFETY: `host_gate`'s contract: both flags are 4-aligned and
            // allocated until this op passed, and only accessed atomically.
            let open = unsafe { &*(open as *const std::sync::atomic::AtomicU32) };
            loop {
                if open.load(Ordering::Acquire) != 0 {
                    break;
                }
                if start.elapsed() >= timeout {
                    // SAFETY: as above.
                    let t = unsafe { &*(timed_out as *const std::sync::atomic::AtomicU32) };
                    t.store(1, Ordering::Release);
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        OpKind::Free { ptr, bytes } => {
            shared.detector.lock().freed(ptr);
            // SAFETY: `free`'s contract: `ptr` came from `alloc` with this
            // layout, is freed once, and every use is ordered before this op.
            unsafe {
                std::alloc::dealloc(
                    ptr as *mut u8,
                    Layout::from_size_align_unchecked(bytes.max(1), ALIGN),
                )
            };
            shared.allocated.fetch_sub(bytes, Ordering::Relaxed);
        }
        OpKind::WriteValue { addr, value } => {
            // The clock first: a host that sees the value observes it.
            shared.written.lock().insert(addr, clock.clone());
            // SAFETY: `write_value`'s contract: `addr` is 4 aligned bytes of
            // `alloc_host` memory, live until this op ran, that the host only
            // reads atomically.
            unsafe { std::sync::atomic::AtomicU32::from_ptr(addr as *mut u32) }
                .store(value, Ordering::Release);
        }
    }
    None
}

pub(super) fn op_name(k: &OpKind) -> &'static str {
    match k {
        OpKind::Run(_) => "operation",
        OpKind::Record(_) => "record",
        OpKind::Wait(_) => "wait",
        OpKind::Gate { .. } => "gate",
        OpKind::Free { .. } => "free",
        OpKind::WriteValue { .. } => "write value",
        OpKind::Audit { .. } => "wait audit",
    }
}

/// Joins the threads of destroyed streams that ended (they run nothing
/// more: no wait for work).
pub(super) fn reap(streams: &mut [Slot]) {
    for slot in streams.iter_mut().filter(|s| !s.live && s.thread.is_some()) {
        if slot.stream.queue.lock().ended {
            if let Some(h) = slot.thread.take() {
                let _ = h.join();
            }
        }
    }
}

/// A slot whose destroyed stream ended (its thread joined) and that a new
/// stream can take with its clock index exactly: the host's clock (`host`,
/// which the new stream starts from) orders every detector entry of the
/// earlier stream. The new stream then is ordered after every access of the
/// earlier one that the detector still holds, as it truly is, and its ticks
/// go on past the earlier one's; an entry the host has not seen done would
/// pass for the new stream's own (ordered) work, so such a slot waits (it
/// may become reusable once the host observes the work, if ever; the
/// stream pool retires only streams it saw idle).
pub(super) fn reusable(shared: &Shared, streams: &[Slot], host: &Clock) -> Option<usize> {
    if !streams.iter().any(|s| !s.live && s.thread.is_none()) {
        return None;
    }
    let newest = shared.detector.lock().newest_ticks();
    streams
        .iter()
        .enumerate()
        .find(|(i, s)| !s.live && s.thread.is_none() && newest.get(*i) <= host.get(*i))
        .map(|(i, _)| i)
}
