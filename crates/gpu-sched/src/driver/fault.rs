//! Fault injection for tests: a [`Driver`] over the host backend's that
//! counts every fallible driver call and makes the `k`-th fail with a
//! chosen error, as a device would (a driver error that leaves the context
//! usable, out of memory for an allocation, a sticky error that breaks it
//! for good). Host backend only ([`crate::RuntimeOptions::fault_injection`]),
//! never on a real device.
//!
//! A failing call does nothing and returns the error. After a sticky error
//! every fallible call fails with it, as on CUDA (whose calls all check the
//! sticky error first); a synchronize first waits for what the host
//! backend's streams still run (a broken device runs nothing more, but
//! the host backend's streams go on), so that nothing the runtime frees
//! after a failed synchronize is still in use. Calls that cannot fail (no
//! `Result`) are passed through uncounted, and so is `check_sticky`, which
//! makes no driver call.

use super::{
    BackendKind, Collectives, Driver, KernelCall, MemAccess, Nodes, RawEvent, RawGraph, RawNode,
    RawStream, SyncMode, WaitAudit,
};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, LaunchConfig};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Which error an injected fault returns.
#[doc(hidden)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FaultKind {
    /// A driver error that leaves the context usable
    /// ([`Error::Driver`], `CUDA_ERROR_UNKNOWN`).
    Driver,
    /// [`Error::OutOfMemory`] (allocations only).
    OutOfMemory,
    /// A sticky error ([`Error::StickyDeviceError`],
    /// `CUDA_ERROR_ILLEGAL_ADDRESS`): every later call fails with it.
    Sticky,
}

/// The calls that allocate: they can also fail with out of memory.
const ALLOCATING: &[&str] = &["alloc", "alloc_host"];

/// The calls that fail only on a broken context, so only a sticky error is
/// injected there: the releases (their other documented errors are an
/// invalid handle or value, which the runtime never passes; were a free to
/// fail on a live context, the memory would stay allocated whatever the
/// runtime did). Waits and queries get every kind: the runtime waits again
/// for memory it is about to hand back (`Runtime::wait_past_errors`).
const STICKY_ONLY: &[&str] = &[
    "free",
    "free_host",
    "destroy_stream",
    "destroy_event",
    "graph_destroy",
];

/// The plan and the record of a fault injection, shared by the test and
/// the runtime's driver ([`crate::RuntimeOptions::fault_injection`]). Calls
/// are numbered from 0 in the order they are made, over all threads, from
/// the runtime's start.
#[doc(hidden)]
#[derive(Debug)]
pub struct FaultInjector {
    /// The call to fail (`u64::MAX`: none) and how.
    target: AtomicU64,
    kind: Mutex<FaultKind>,
    /// Or the next call of this name fails (with `kind`).
    next: Mutex<Option<&'static str>>,
    /// Or every call of this name fails (with `kind`), until disarmed.
    always: Mutex<Option<&'static str>>,
    /// The name of every call made, in order (its index is its number).
    log: Mutex<Vec<&'static str>>,
    /// The call that failed, if one did: its number, name and error.
    fired: Mutex<Option<(u64, &'static str, FaultKind)>>,
    /// A sticky fault fired: every later call fails.
    broken: AtomicBool,
}

impl FaultInjector {
    /// An injector that fails nothing (it counts).
    pub fn new() -> Arc<FaultInjector> {
        Arc::new(FaultInjector {
            target: AtomicU64::new(u64::MAX),
            kind: Mutex::new(FaultKind::Driver),
            next: Mutex::new(None),
            always: Mutex::new(None),
            log: Mutex::new(Vec::new()),
            fired: Mutex::new(None),
            broken: AtomicBool::new(false),
        })
    }

    /// An injector that fails call number `k` with `kind`. A kind that
    /// does not fit the call ([`FaultInjector::kinds`]) gives the first
    /// that does: a driver error, or a sticky error (see `STICKY_ONLY`).
    pub fn failing(k: u64, kind: FaultKind) -> Arc<FaultInjector> {
        let f = FaultInjector::new();
        *f.kind.lock() = kind;
        f.target.store(k, Ordering::SeqCst);
        f
    }

    /// Makes the next call named `name` (a [`Driver`] method's name) fail
    /// with `kind`, once.
    pub fn fail_next(&self, name: &'static str, kind: FaultKind) {
        *self.kind.lock() = kind;
        *self.next.lock() = Some(name);
    }

    /// Makes every call named `name` fail with `kind` until
    /// [`FaultInjector::disarm`]: a driver that keeps failing a wait while
    /// reporting no broken context.
    pub fn fail_always(&self, name: &'static str, kind: FaultKind) {
        *self.kind.lock() = kind;
        *self.always.lock() = Some(name);
    }

    /// Fails no call from now on (the one armed, if it has not failed yet).
    pub fn disarm(&self) {
        self.target.store(u64::MAX, Ordering::SeqCst);
        *self.next.lock() = None;
        *self.always.lock() = None;
    }

    /// How many calls were made.
    pub fn calls(&self) -> u64 {
        self.log.lock().len() as u64
    }

    /// The names of the calls made, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.log.lock().clone()
    }

    /// The call that failed, if one did: its number, name and error.
    pub fn fired(&self) -> Option<(u64, &'static str, FaultKind)> {
        *self.fired.lock()
    }

    /// The errors the call `name` can return, as injected.
    pub fn kinds(name: &str) -> &'static [FaultKind] {
        if ALLOCATING.contains(&name) {
            &[FaultKind::OutOfMemory, FaultKind::Driver, FaultKind::Sticky]
        } else if STICKY_ONLY.contains(&name) {
            &[FaultKind::Sticky]
        } else {
            &[FaultKind::Driver, FaultKind::Sticky]
        }
    }

    /// Counts the call `name` (of `bytes`, for an allocation); the error
    /// it must return instead of running, if any.
    fn enter(&self, name: &'static str, bytes: usize) -> Result<()> {
        let n = {
            let mut log = self.log.lock();
            log.push(name);
            log.len() as u64 - 1
        };
        if self.broken.load(Ordering::SeqCst) {
            return Err(sticky());
        }
        let next = {
            let mut next = self.next.lock();
            let hit = *next == Some(name);
            if hit {
                *next = None;
            }
            hit || *self.always.lock() == Some(name)
        };
        if !next && n != self.target.load(Ordering::SeqCst) {
            return Ok(());
        }
        let asked = *self.kind.lock();
        let kind = *FaultInjector::kinds(name)
            .iter()
            .find(|&&k| k == asked)
            .unwrap_or(&FaultInjector::kinds(name)[0]);
        *self.fired.lock() = Some((n, name, kind));
        match kind {
            FaultKind::Sticky => {
                self.broken.store(true, Ordering::SeqCst);
                Err(sticky())
            }
            FaultKind::OutOfMemory => Err(Error::OutOfMemory {
                requested: bytes,
                during: "an injected fault",
            }),
            FaultKind::Driver => Err(Error::Driver {
                code: 999,
                name: "CUDA_ERROR_UNKNOWN".into(),
                during: name,
            }),
        }
    }
}

/// The sticky error injected.
fn sticky() -> Error {
    Error::StickyDeviceError {
        code: 700,
        name: "CUDA_ERROR_ILLEGAL_ADDRESS (injected)".into(),
    }
}

/// The host backend's driver with faults injected ([`FaultInjector`]).
#[derive(Debug)]
pub(crate) struct FaultDriver {
    /// The host backend's driver, which runs the calls that do not fail.
    real: Arc<dyn Driver>,
    faults: Arc<FaultInjector>,
}

impl FaultDriver {
    pub(crate) fn new(real: Arc<dyn Driver>, faults: Arc<FaultInjector>) -> Self {
        FaultDriver { real, faults }
    }

    /// A synchronize: on a broken context, after waiting for what the
    /// host streams still run.
    fn sync(&self, name: &'static str, wait: impl FnOnce() -> Result<()>) -> Result<()> {
        match self.faults.enter(name, 0) {
            Ok(()) => wait(),
            Err(e) if e.is_sticky() => {
                let _ = wait();
                Err(e)
            }
            Err(e) => Err(e),
        }
    }
}

impl Driver for FaultDriver {
    fn kind(&self) -> BackendKind {
        self.real.kind()
    }

    fn device_name(&self) -> String {
        self.real.device_name()
    }

    fn total_memory(&self) -> usize {
        self.real.total_memory()
    }

    fn create_stream(&self) -> Result<RawStream> {
        self.faults.enter("create_stream", 0)?;
        self.real.create_stream()
    }

    fn create_stream_with(&self, priority: super::Priority) -> Result<RawStream> {
        self.faults.enter("create_stream", 0)?;
        self.real.create_stream_with(priority)
    }

    fn destroy_stream(&self, s: RawStream) -> Result<()> {
        self.faults.enter("destroy_stream", 0)?;
        self.real.destroy_stream(s)
    }

    fn stream_query(&self, s: RawStream) -> Result<bool> {
        self.faults.enter("stream_query", 0)?;
        self.real.stream_query(s)
    }

    fn check_sticky(&self) -> Result<()> {
        if self.faults.broken.load(Ordering::SeqCst) {
            return Err(sticky());
        }
        self.real.check_sticky()
    }

    unsafe fn write_value(&self, s: RawStream, dptr: u64, value: u32) -> Result<()> {
        self.faults.enter("write_value", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.write_value(s, dptr, value) }
    }

    unsafe fn value_written(&self, host: *const u32, value: u32) -> bool {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.value_written(host, value) }
    }

    fn stream_sync(&self, s: RawStream, mode: SyncMode) -> Result<()> {
        self.sync("stream_sync", || self.real.stream_sync(s, mode))
    }

    fn create_event(&self, timing: bool) -> Result<RawEvent> {
        self.faults.enter("create_event", 0)?;
        self.real.create_event(timing)
    }

    fn create_blocking_event(&self) -> Result<RawEvent> {
        self.faults.enter("create_event", 0)?;
        self.real.create_blocking_event()
    }

    fn destroy_event(&self, e: RawEvent) -> Result<()> {
        self.faults.enter("destroy_event", 0)?;
        self.real.destroy_event(e)
    }

    fn record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        self.faults.enter("record", 0)?;
        self.real.record(e, s)
    }

    fn wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        self.faults.enter("wait_event", 0)?;
        self.real.wait_event(s, e)
    }

    fn wait_event_in_capture(&self, s: RawStream, e: RawEvent) -> Result<()> {
        self.faults.enter("wait_event_in_capture", 0)?;
        self.real.wait_event_in_capture(s, e)
    }

    fn event_sync(&self, e: RawEvent) -> Result<()> {
        self.sync("event_sync", || self.real.event_sync(e))
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        self.faults.enter("event_query", 0)?;
        self.real.event_query(e)
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        self.faults.enter("event_elapsed_ms", 0)?;
        self.real.event_elapsed_ms(start, end)
    }

    fn alloc(&self, bytes: usize, s: RawStream) -> Result<u64> {
        self.faults.enter("alloc", bytes)?;
        self.real.alloc(bytes, s)
    }

    unsafe fn free(&self, ptr: u64, bytes: usize, s: RawStream) -> Result<()> {
        self.faults.enter("free", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.free(ptr, bytes, s) }
    }

    fn alloc_host(&self, bytes: usize, mapped: bool) -> Result<(*mut u8, u64)> {
        self.faults.enter("alloc_host", bytes)?;
        self.real.alloc_host(bytes, mapped)
    }

    unsafe fn free_host(&self, ptr: *mut u8, bytes: usize) -> Result<()> {
        self.faults.enter("free_host", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.free_host(ptr, bytes) }
    }

    fn is_page_locked(&self, ptr: *const u8) -> bool {
        self.real.is_page_locked(ptr)
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: usize, s: RawStream) -> Result<()> {
        self.faults.enter("copy_htod", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.copy_htod(dst, src, bytes, s) }
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        self.faults.enter("copy_dtoh", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.copy_dtoh(dst, src, bytes, s) }
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        self.faults.enter("copy_dtod", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.copy_dtod(dst, src, bytes, s) }
    }

    unsafe fn copy_peer(
        &self,
        dst: u64,
        dst_dev: &dyn Driver,
        src: u64,
        src_dev: &dyn Driver,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        self.faults.enter("copy_peer", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.copy_peer(dst, dst_dev, src, src_dev, bytes, s) }
    }

    fn peer_handles(&self) -> (u64, i32) {
        self.real.peer_handles()
    }

    fn enable_peer_access(&self, other: &dyn Driver) -> Result<bool> {
        self.faults.enter("enable_peer_access", 0)?;
        self.real.enable_peer_access(other)
    }

    unsafe fn memset_u32(&self, dst: u64, value: u32, count: usize, s: RawStream) -> Result<()> {
        self.faults.enter("memset_u32", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.memset_u32(dst, value, count, s) }
    }

    fn load_ptx(&self, ptx: &str) -> Result<u64> {
        self.faults.enter("load_ptx", 0)?;
        self.real.load_ptx(ptx)
    }

    fn function(&self, module: u64, name: &str) -> Result<u64> {
        self.faults.enter("function", 0)?;
        self.real.function(module, name)
    }

    fn compute_capability(&self) -> Option<(i32, i32)> {
        self.real.compute_capability()
    }

    unsafe fn launch(
        &self,
        k: &KernelCall<'_>,
        cfg: LaunchConfig,
        args: &[KernelArg],
        lens: &[usize],
        accesses: &[MemAccess],
        s: RawStream,
    ) -> Result<()> {
        self.faults.enter("launch", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.launch(k, cfg, args, lens, accesses, s) }
    }

    fn begin_capture(&self, s: RawStream) -> Result<()> {
        self.faults.enter("begin_capture", 0)?;
        self.real.begin_capture(s)
    }

    fn end_capture(&self, s: RawStream) -> Result<RawGraph> {
        // CUDA ends the capture whatever `cuStreamEndCapture` returns (an
        // invalidated capture gives no graph): a failure injected here ends
        // it too, rather than leave the stream capturing, which no driver
        // does (the pool would hand it on, and the next task's wait on it
        // would fail).
        let injected = self.faults.enter("end_capture", 0);
        let ended = self.real.end_capture(s);
        match (injected, ended) {
            (Err(e), Ok(g)) => {
                let _ = self.real.graph_destroy(g);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
            (Ok(()), ended) => ended,
        }
    }

    unsafe fn graph_launch(&self, g: RawGraph, s: RawStream) -> Result<()> {
        self.faults.enter("graph_launch", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.graph_launch(g, s) }
    }

    fn graph_destroy(&self, g: RawGraph) -> Result<()> {
        self.faults.enter("graph_destroy", 0)?;
        self.real.graph_destroy(g)
    }

    unsafe fn graph_build(&self, spec: &super::GraphSpec<'_>) -> Result<RawGraph> {
        self.faults.enter("graph_build", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.graph_build(spec) }
    }

    unsafe fn graph_set_kernel(
        &self,
        g: RawGraph,
        i: usize,
        node: &super::KernelNode,
    ) -> Result<()> {
        self.faults.enter("graph_set_kernel", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.graph_set_kernel(g, i, node) }
    }

    fn end_capture_child(&self, s: RawStream) -> Result<u64> {
        // As `end_capture`: the capture ends whatever is injected.
        let injected = self.faults.enter("end_capture_child", 0);
        let ended = self.real.end_capture_child(s);
        match (injected, ended) {
            (Err(e), Ok(g)) => {
                self.real.child_destroy(g);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
            (Ok(()), ended) => ended,
        }
    }

    fn child_destroy(&self, g: u64) {
        self.real.child_destroy(g)
    }

    unsafe fn graph_set_child(&self, g: RawGraph, i: usize, node: &super::ChildNode) -> Result<()> {
        self.faults.enter("graph_set_child", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.graph_set_child(g, i, node) }
    }

    fn capture_set_deps(&self, s: RawStream, deps: &[RawNode]) -> Result<()> {
        self.faults.enter("capture_set_deps", 0)?;
        self.real.capture_set_deps(s, deps)
    }

    fn capture_tail(&self, s: RawStream) -> Result<Nodes> {
        self.faults.enter("capture_tail", 0)?;
        self.real.capture_tail(s)
    }

    fn collectives(&self) -> &dyn Collectives {
        // The host backend's, which queue their parts through the
        // runtime's driver (this one: `host_op` counts).
        self.real.collectives()
    }

    fn bind_context(&self) -> Result<()> {
        self.faults.enter("bind_context", 0)?;
        self.real.bind_context()
    }

    unsafe fn host_op(
        &self,
        s: RawStream,
        body: Arc<dyn Fn() + Send + Sync>,
        accesses: &[MemAccess],
    ) -> Result<()> {
        self.faults.enter("host_op", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.host_op(s, body, accesses) }
    }

    fn races(&self) -> Vec<String> {
        self.real.races()
    }

    fn clear_races(&self) {
        self.real.clear_races()
    }

    fn audit_wait(&self, s: RawStream, e: RawEvent, on_behalf: Option<MemAccess>) {
        self.real.audit_wait(s, e, on_behalf)
    }

    fn audit_decision(&self) {
        self.real.audit_decision()
    }

    fn set_wait_audit(&self, on: bool) -> bool {
        self.real.set_wait_audit(on)
    }

    fn wait_audit(&self) -> Option<WaitAudit> {
        self.real.wait_audit()
    }

    unsafe fn host_gate(
        &self,
        s: RawStream,
        open: *const u32,
        timed_out: *mut u32,
        timeout_ns: u64,
    ) -> Result<()> {
        self.faults.enter("host_gate", 0)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.real.host_gate(s, open, timed_out, timeout_ns) }
    }
}
