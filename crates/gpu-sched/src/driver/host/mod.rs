//! The host backend: each stream is a CPU thread running its operations in
//! order; events are real events on those threads; "device" memory is host
//! memory; kernels are Rust functions. A race detector ([`detector`])
//! checks every operation's memory accesses against vector clocks built
//! from stream order, event waits and host observations, and reports two
//! unordered accesses to one byte range where one writes.

use super::{
    BackendKind, ChildNode, Driver, GraphSpec, KernelCall, KernelNode, MemAccess, Nodes, RawEvent,
    RawGraph, RawNode, RawStream, SyncMode, WaitAudit,
};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, LaunchConfig};
use gpu_epoch::Access;
use parking_lot::{Condvar, Mutex, RwLock};
use std::alloc::Layout;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod audit;
mod detector;
mod graph;
pub(crate) mod nccl;
mod stream;
use detector::{Clock, Detector};
use graph::*;
use stream::*;
#[cfg(test)]
mod test;

struct Shared {
    /// By clock index: a stream's slot is its index in its clocks, and a
    /// slot is reused (see `create_stream`), so neither grows past the most
    /// streams that were alive (or not yet reusable) at once.
    streams: RwLock<Vec<Slot>>,
    /// Stream threads that have not ended.
    running: AtomicUsize,
    events: RwLock<HashMap<u64, EventSlot>>,
    graphs: Mutex<HashMap<u64, Arc<HostGraph>>>,
    next_id: AtomicU64,
    host_clock: Mutex<Clock>,
    detector: Mutex<Detector>,
    sticky: Mutex<Option<String>>,
    broken: AtomicBool,
    allocated: AtomicUsize,
    memory_limit: usize,
    /// How many streams the backend creates before refusing (as a device
    /// out of resources would).
    stream_limit: usize,
    /// Streams created so far (destroyed ones too).
    created: AtomicUsize,
    /// By address: the clock of the stream when its last `write_value` there
    /// ran.
    written: Mutex<HashMap<u64, Clock>>,
    /// Page-locked host blocks (`alloc_host`), address and bytes: a copy
    /// from one reads it when it runs, as the device does (CUDA copies from
    /// pinned memory without staging), where a copy from pageable memory
    /// is staged at submission.
    pinned: Mutex<Vec<(usize, usize)>>,
    /// The wait audit (`Driver::audit_wait`).
    audit: audit::Audit,
}

/// The host backend.
pub(crate) struct HostDriver {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for HostDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDriver")
            .field("streams", &self.shared.streams.read().len())
            .finish_non_exhaustive()
    }
}

const ALIGN: usize = 256;

/// Zeroed host memory of `bytes` (at least one), `ALIGN`-aligned, for the
/// "device" memory and the page-locked host memory alike. A size no layout
/// holds (over `isize::MAX` once rounded up to `ALIGN`) or an allocator
/// that refuses (the address space, or an `RLIMIT_AS`, has no room) is
/// [`Error::OutOfMemory`], as CUDA's refusal is: never an abort.
fn host_alloc(bytes: usize, during: &'static str) -> Result<*mut u8> {
    let oom = Error::OutOfMemory {
        requested: bytes,
        during,
    };
    let layout = Layout::from_size_align(bytes.max(1), ALIGN).map_err(|_| oom.clone())?;
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(oom);
    }
    Ok(p)
}

impl Driver for HostDriver {
    fn kind(&self) -> BackendKind {
        BackendKind::Host
    }

    fn collectives(&self) -> &dyn crate::driver::Collectives {
        &nccl::HostCollectives
    }

    fn device_name(&self) -> String {
        "host backend (CPU threads)".into()
    }

    fn total_memory(&self) -> usize {
        self.shared.memory_limit
    }

    /// A stream in a slot of a destroyed stream where one can take it (see
    /// [`reusable`]), else in a new slot.
    fn create_stream(&self) -> Result<RawStream> {
        let mut streams = self.shared.streams.write();
        reap(&mut streams);
        // Counted under the streams' lock.
        if self.shared.created.load(Ordering::Relaxed) >= self.shared.stream_limit {
            return Err(Error::Driver {
                code: 304,
                name: "CUDA_ERROR_OPERATING_SYSTEM".into(),
                during: "creating a host stream (the backend's stream limit)",
            });
        }
        // Everything the host knows done is ordered before the new stream's
        // work (its operations merge the host's clock when submitted).
        let mut clock = self.shared.host_clock.lock().clone();
        let reuse = reusable(&self.shared, &streams, &clock);
        let index = reuse.unwrap_or(streams.len());
        if let Some(i) = reuse {
            // Its ticks go on past the earlier stream's: no clock that knows
            // the earlier stream's operations claims the new one's.
            clock.raise(i, streams[i].stream.clock.lock().get(i));
        }
        let st = Arc::new(HostStream {
            index,
            queue: Mutex::new(Queue {
                ops: VecDeque::new(),
                pending: 0,
                capture: None,
                shutdown: false,
                ended: false,
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
            clock: Mutex::new(clock),
        });
        self.shared.running.fetch_add(1, Ordering::Relaxed);
        let shared = self.shared.clone();
        let thread_st = st.clone();
        let h = std::thread::Builder::new()
            .name(format!("gpu-host-stream-{index}"))
            .spawn(move || run_stream(shared, thread_st))
            .map_err(|_| {
                self.shared.running.fetch_sub(1, Ordering::Relaxed);
                Error::Driver {
                    code: 2,
                    name: "thread spawn failed".into(),
                    during: "creating a host stream",
                }
            })?;
        self.shared.created.fetch_add(1, Ordering::Relaxed);
        let generation = match reuse {
            Some(i) => {
                let slot = &mut streams[i];
                slot.generation = slot.generation.wrapping_add(1);
                slot.stream = st;
                slot.thread = Some(h);
                slot.live = true;
                slot.generation
            }
            None => {
                streams.push(Slot {
                    stream: st,
                    thread: Some(h),
                    generation: 0,
                    live: true,
                });
                0
            }
        };
        Ok(pack(index, generation))
    }

    /// As `cuStreamDestroy`: returns at once; the stream's thread runs what
    /// was queued, then ends, and is joined by a later `create_stream` or
    /// `destroy_stream` (or the driver's drop).
    fn destroy_stream(&self, s: RawStream) -> Result<()> {
        let (index, generation) = unpack(s);
        let mut streams = self.shared.streams.write();
        let slot = streams
            .get_mut(index)
            .filter(|slot| slot.live && slot.generation == generation)
            .ok_or(Error::Driver {
                code: 400,
                name: "CUDA_ERROR_INVALID_HANDLE".into(),
                during: "destroying a destroyed or unknown host stream",
            })?;
        slot.live = false;
        let st = slot.stream.clone();
        let mut q = st.queue.lock();
        q.shutdown = true;
        st.work.notify_all();
        drop(q);
        reap(&mut streams);
        Ok(())
    }

    fn check_sticky(&self) -> Result<()> {
        HostDriver::sticky(self)
    }

    unsafe fn write_value(&self, s: RawStream, dptr: u64, value: u32) -> Result<()> {
        self.submit(s, OpKind::WriteValue { addr: dptr, value }, Vec::new())
    }

    unsafe fn value_written(&self, host: *const u32, value: u32) -> bool {
        // SAFETY: as the trait's contract says.
        let v = unsafe { std::sync::atomic::AtomicU32::from_ptr(host as *mut u32) }
            .load(Ordering::Acquire);
        if v != value {
            return false;
        }
        // What preceded the write is complete: the host observes it, as a
        // query that finds the stream idle does.
        let c = self.shared.written.lock().get(&(host as u64)).cloned();
        if let Some(c) = c {
            self.observe(&c);
        }
        true
    }

    fn stream_query(&self, s: RawStream) -> Result<bool> {
        self.check_sticky()?;
        let st = self.stream(s)?;
        let q = st.queue.lock();
        if q.pending == 0 {
            // Idle: the stream's clock is exactly what completed.
            let c = st.clock.lock().clone();
            drop(q);
            self.observe(&c);
            return Ok(true);
        }
        Ok(false)
    }

    fn stream_sync(&self, s: RawStream, _mode: SyncMode) -> Result<()> {
        let st = self.stream(s)?;
        if st.queue.lock().capture.is_some() {
            return Err(Error::Capturing {
                what: "synchronizing a stream",
            });
        }
        let c = self.drain(&st);
        self.observe(&c);
        self.check_sticky()
    }

    fn create_event(&self, _timing: bool) -> Result<RawEvent> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared
            .events
            .write()
            .insert(id, Arc::new(Mutex::new(None)));
        Ok(RawEvent(id))
    }

    fn destroy_event(&self, e: RawEvent) -> Result<()> {
        self.shared.events.write().remove(&e.0);
        Ok(())
    }

    /// As `cuEventRecord`, one step: the event's new record is queued on
    /// the stream under the queue's lock, and only then can a wait see it.
    /// A wait that read the event in between (the record set, not yet
    /// queued) would be queued before the record it waits for, on a stream
    /// that another thread shares: the stream (or two streams, each
    /// waiting for a record queued behind the other's wait) would wait for
    /// good. So every wait is queued after the record it waits for, and no
    /// waits form a cycle. Under the same lock, a capture cannot begin
    /// between the check below and the queueing (the record would go into
    /// the graph, and the event wait for it for good).
    fn record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        // Before the event changes: a record that fails leaves it as it was.
        self.check_sticky()?;
        let ev = self.event(e)?;
        let st = self.stream(s)?;
        let mut q = st.queue.lock();
        if q.capture.is_some() {
            // Recording on a capturing stream only adds a graph node; the
            // host backend does not replay events inside graphs.
            return Ok(());
        }
        let rs = Arc::new(RecordState::default());
        let op = Op {
            kind: OpKind::Record(rs.clone()),
            accesses: Vec::new(),
            host_clock: self.shared.host_clock.lock().clone(),
        };
        // Lock order: the queue's, then the event's (no one takes a queue's
        // lock while holding an event's).
        *ev.lock() = Some(rs);
        q.ops.push_back(op);
        q.pending += 1;
        st.work.notify_one();
        Ok(())
    }

    fn wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        let ev = self.event(e)?;
        let rs = ev.lock().clone();
        if self.stream(s)?.queue.lock().capture.is_some() {
            // As CUDA: a capturing stream may wait only for events recorded
            // in its capture (which the host backend does not record) unless
            // the wait is external (`wait_event_in_capture`).
            return Err(Error::Driver {
                code: 905,
                name: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION".into(),
                during: "waiting on a capturing stream for an event recorded outside the capture",
            });
        }
        match rs {
            Some(rs) => self.submit(s, OpKind::Wait(rs), Vec::new()),
            None => Ok(()),
        }
    }

    fn wait_event_in_capture(&self, s: RawStream, _e: RawEvent) -> Result<()> {
        // An external-event node: the host backend's graphs replay their
        // operations only, in an order their dependencies allow.
        self.stream(s).map(drop)
    }

    fn event_sync(&self, e: RawEvent) -> Result<()> {
        let rs = self.event(e)?.lock().clone();
        if let Some(rs) = rs {
            let c = rs.wait();
            self.observe(&c);
        }
        self.check_sticky()
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        self.check_sticky()?;
        let rs = self.event(e)?.lock().clone();
        match rs {
            None => Ok(true),
            Some(rs) => match rs.is_done() {
                Some(c) => {
                    self.observe(&c);
                    Ok(true)
                }
                None => Ok(false),
            },
        }
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        let at = |e: RawEvent| -> Result<Instant> {
            self.event(e)?
                .lock()
                .as_ref()
                .and_then(|rs| *rs.at.lock())
                .ok_or(Error::Driver {
                    code: 600,
                    name: "CUDA_ERROR_NOT_READY".into(),
                    during: "timing an event that has not completed",
                })
        };
        let (a, b) = (at(start)?, at(end)?);
        Ok(if b >= a {
            (b - a).as_secs_f32() * 1e3
        } else {
            -((a - b).as_secs_f32() * 1e3)
        })
    }

    fn alloc(&self, bytes: usize, _s: RawStream) -> Result<u64> {
        self.check_sticky()?;
        const DURING: &str = "allocating host-backend device memory";
        // Counted first (never past the limit, not even for a moment: a
        // compare-and-swap, no add that wraps), then allocated.
        let limit = self.shared.memory_limit;
        self.shared
            .allocated
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                a.checked_add(bytes).filter(|&b| b <= limit)
            })
            .map_err(|_| Error::OutOfMemory {
                requested: bytes,
                during: DURING,
            })?;
        let p = match host_alloc(bytes, DURING) {
            Ok(p) => p as u64,
            Err(e) => {
                self.shared.allocated.fetch_sub(bytes, Ordering::Relaxed);
                return Err(e);
            }
        };
        self.shared.detector.lock().allocated(p, bytes);
        Ok(p)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize, s: RawStream) -> Result<()> {
        // Freeing is allowed on a broken context: memory must not leak.
        let st = self.stream(s)?;
        let mut q = st.queue.lock();
        // Under the queue's lock, as in `submit`.
        let op = Op {
            kind: OpKind::Free { ptr, bytes },
            accesses: vec![MemAccess {
                ptr,
                bytes,
                access: Access::Write,
            }],
            host_clock: self.shared.host_clock.lock().clone(),
        };
        q.ops.push_back(op);
        q.pending += 1;
        st.work.notify_one();
        Ok(())
    }

    fn alloc_host(&self, bytes: usize, _mapped: bool) -> Result<(*mut u8, u64)> {
        let p = host_alloc(bytes, "allocating host-backend page-locked memory")?;
        self.shared.pinned.lock().push((p as usize, bytes.max(1)));
        Ok((p, p as u64))
    }

    unsafe fn free_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        {
            let mut pinned = self.shared.pinned.lock();
            if let Some(i) = pinned.iter().position(|&(p, _)| p == ptr as usize) {
                pinned.swap_remove(i);
            }
        }
        // SAFETY: this function's contract: `ptr` came from `alloc_host`
        // with this size (and `ALIGN`), and nothing uses it any more.
        unsafe { std::alloc::dealloc(ptr, Layout::from_size_align_unchecked(bytes.max(1), ALIGN)) };
        Ok(())
    }

    fn is_page_locked(&self, ptr: *const u8) -> bool {
        // What `copy_htod` reads late: page-locked memory of any runtime
        // of this backend (the devices of a group share it), as CUDA knows
        // every page-locked block of the process.
        let addr = ptr as usize;
        self.shared
            .pinned
            .lock()
            .iter()
            .any(|&(p, n)| p <= addr && addr < p + n)
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: usize, s: RawStream) -> Result<()> {
        let addr = src as usize;
        let pinned = self
            .shared
            .pinned
            .lock()
            .iter()
            .any(|&(p, n)| p <= addr && addr + bytes <= p + n);
        let body: Body = if pinned {
            // From page-locked memory the copy reads the source when it
            // runs, as on the device.
            Arc::new(move || {
                // SAFETY: this function's contract: page-locked `src` stays
                // valid and unmodified until this op ran, and `dst` is live
                // and ordered for `bytes`.
                unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, dst as *mut u8, bytes) }
            })
        } else {
            // Staged like a pageable copy: the source may be reused on return.
            // SAFETY: this function's contract: `src` is readable for `bytes`.
            let staged: Arc<[u8]> = unsafe { std::slice::from_raw_parts(src, bytes) }.into();
            Arc::new(move || {
                // SAFETY: this function's contract: `dst` is live and ordered
                // for `bytes`.
                unsafe { std::ptr::copy_nonoverlapping(staged.as_ptr(), dst as *mut u8, bytes) }
            })
        };
        let acc = vec![MemAccess {
            ptr: dst,
            bytes,
            access: Access::Write,
        }];
        self.submit(s, OpKind::Run(body), acc)
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        let dst = dst as usize;
        let body: Body = Arc::new(move || {
            // SAFETY: this function's contract: `dst` is writable and
            // untouched by others until this op ran; `src` is live and
            // ordered for `bytes`.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) }
        });
        let acc = vec![MemAccess {
            ptr: src,
            bytes,
            access: Access::Read,
        }];
        self.submit(s, OpKind::Run(body), acc)
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        let (body, acc) = unsafe { copy_body(dst, src, bytes) };
        self.submit(s, OpKind::Run(body), acc)
    }

    unsafe fn memset_u32(&self, dst: u64, value: u32, count: usize, s: RawStream) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        let (body, acc) = unsafe { memset_body(dst, value, count) };
        self.submit(s, OpKind::Run(body), acc)
    }

    fn load_ptx(&self, _ptx: &str) -> Result<u64> {
        // Checked by `crate::kernel::ptx` already; the host implementations run
        // instead.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    fn function(&self, _module: u64, _name: &str) -> Result<u64> {
        Ok(0)
    }

    unsafe fn launch(
        &self,
        k: &KernelCall<'_>,
        _cfg: LaunchConfig,
        args: &[KernelArg],
        lens: &[usize],
        accesses: &[MemAccess],
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        let body = unsafe { kernel_body(&k.host, args, lens) }?;
        self.submit(s, OpKind::Run(body), accesses.to_vec())
    }

    unsafe fn host_op(
        &self,
        s: RawStream,
        body: Arc<dyn Fn() + Send + Sync>,
        accesses: &[MemAccess],
    ) -> Result<()> {
        self.submit(s, OpKind::Run(body), accesses.to_vec())
    }

    fn races(&self) -> Vec<String> {
        self.shared.detector.lock().races.clone()
    }

    fn clear_races(&self) {
        self.shared.detector.lock().races.clear();
    }

    fn audit_wait(&self, s: RawStream, e: RawEvent, on_behalf: Option<MemAccess>) {
        audit::wait(self, s, e, on_behalf)
    }

    fn audit_decision(&self) {
        audit::decision(self)
    }

    fn set_wait_audit(&self, on: bool) -> bool {
        self.shared.audit.set(on);
        true
    }

    fn wait_audit(&self) -> Option<WaitAudit> {
        Some(self.shared.audit.counts())
    }

    fn begin_capture(&self, s: RawStream) -> Result<()> {
        let st = self.stream(s)?;
        let mut q = st.queue.lock();
        if q.capture.is_some() {
            return Err(Error::Capturing {
                what: "beginning a capture",
            });
        }
        q.capture = Some(HostCapture::default());
        Ok(())
    }

    fn end_capture(&self, s: RawStream) -> Result<RawGraph> {
        self.end_capture_child(s).map(RawGraph)
    }

    fn end_capture_child(&self, s: RawStream) -> Result<u64> {
        let st = self.stream(s)?;
        let cap = st.queue.lock().capture.take().ok_or(Error::Driver {
            code: 901,
            name: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED".into(),
            during: "ending a capture that was not begun",
        })?;
        let graph = HostGraph {
            ops: cap.ops,
            deps: cap.deps,
            launches: AtomicU64::new(0),
        };
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.graphs.lock().insert(id, Arc::new(graph));
        Ok(id)
    }

    fn child_destroy(&self, g: u64) {
        self.shared.graphs.lock().remove(&g);
    }

    fn child_join(&self, children: &[u64]) -> Result<u64> {
        let graph = join_children(&self.shared, children)?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.graphs.lock().insert(id, Arc::new(graph));
        Ok(id)
    }

    unsafe fn graph_set_child(&self, g: RawGraph, i: usize, node: &ChildNode) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        unsafe { set_child(&self.shared, g, i, node) }
    }

    unsafe fn graph_launch(&self, g: RawGraph, s: RawStream) -> Result<()> {
        let graph = self
            .shared
            .graphs
            .lock()
            .get(&g.0)
            .cloned()
            .ok_or(Error::Driver {
                code: 400,
                name: "CUDA_ERROR_INVALID_HANDLE".into(),
                during: "launching an unknown graph",
            })?;
        let k = graph.launches.fetch_add(1, Ordering::Relaxed);
        for i in graph.replay_order(k) {
            let op = &graph.ops[i];
            self.submit(s, op.kind.clone(), op.accesses.clone())?;
        }
        Ok(())
    }

    fn capture_set_deps(&self, s: RawStream, deps: &[RawNode]) -> Result<()> {
        let st = self.stream(s)?;
        let mut q = st.queue.lock();
        let cap = q.capture.as_mut().ok_or(Error::Capturing {
            what: "setting the dependencies of a stream that is not capturing",
        })?;
        let n = cap.ops.len() as u64;
        if deps.iter().any(|d| d.0 == 0 || d.0 > n) {
            return Err(Error::Driver {
                code: 1,
                name: "CUDA_ERROR_INVALID_VALUE".into(),
                during: "setting a capture's dependencies to nodes it does not have",
            });
        }
        cap.next = deps.iter().map(|d| d.0 as usize - 1).collect();
        Ok(())
    }

    fn capture_tail(&self, s: RawStream) -> Result<Nodes> {
        let st = self.stream(s)?;
        let q = st.queue.lock();
        let cap = q.capture.as_ref().ok_or(Error::Capturing {
            what: "reading the dependencies of a stream that is not capturing",
        })?;
        // Node ids start at 1 (an index plus one).
        Ok(cap.next.iter().map(|&i| RawNode(i as u64 + 1)).collect())
    }

    fn graph_destroy(&self, g: RawGraph) -> Result<()> {
        self.shared.graphs.lock().remove(&g.0);
        Ok(())
    }

    unsafe fn graph_build(&self, spec: &GraphSpec<'_>) -> Result<RawGraph> {
        // SAFETY: this function's contract, passed on.
        unsafe { build_graph(&self.shared, spec) }
    }

    unsafe fn graph_set_kernel(&self, g: RawGraph, i: usize, node: &KernelNode) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        unsafe { set_kernel(&self.shared, g, i, node) }
    }

    unsafe fn host_gate(
        &self,
        s: RawStream,
        open: *const u32,
        timed_out: *mut u32,
        timeout_ns: u64,
    ) -> Result<()> {
        self.submit(
            s,
            OpKind::Gate {
                open: open as usize,
                timed_out: timed_out as usize,
                timeout: Duration::from_nanos(timeout_ns),
            },
            Vec::new(),
        )
    }
}

impl Drop for HostDriver {
    fn drop(&mut self) {
        let threads: Vec<_> = {
            let mut streams = self.shared.streams.write();
            streams
                .iter_mut()
                .filter_map(|slot| {
                    let mut q = slot.stream.queue.lock();
                    q.shutdown = true;
                    slot.stream.work.notify_all();
                    drop(q);
                    slot.thread.take()
                })
                .collect()
        };
        // Outside the streams' lock: a stream thread may take it (`floor`).
        for h in threads {
            let _ = h.join();
        }
    }
}
