//! The runtime of one device: the `Runtime` handle, its state and what
//! reads it. Beside this file: `options.rs` (how a runtime is set up, and
//! the views it hands out), `group.rs` (the devices of a process: one
//! ledger, a core per device, DESIGN "Beyond one GPU"), `extension.rs`
//! (what libraries keep per runtime), `status.rs` (the status words
//! libraries write their results into). Its kernel modules are the kernel
//! wing's (`kernel/modules.rs`).

use crate::driver::{BackendChoice, BackendKind, Driver, RawStream, SyncMode};
use crate::error::{Error, Result};
use crate::kernel::modules::Modules;
use crate::pool::PooledEvent;
use gpu_epoch::{CounterSnapshot, Ledger, StreamId, Task};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

mod deferred;
mod extension;
mod graph_memory;
mod group;
mod interop;
mod options;
mod pinned;
mod status;
mod usage;

pub(crate) use deferred::{DeferredCheck, Reaped};
pub use extension::Extension;
pub(crate) use graph_memory::{GraphMemory, Home};
use group::Member;
pub(crate) use group::{DeviceCore, Group};
pub use options::{LedgerView, LiveCounts, RuntimeOptions};
pub use status::{StatusJudge, StatusWord};

/// The size the driver allocates (and frees: the two must agree, DESIGN "Soundness") for
/// a buffer of `bytes`: at least 4, so that every buffer has an address of
/// its own and 4-byte memsets.
#[inline]
pub(crate) fn device_bytes(bytes: usize) -> usize {
    bytes.max(4)
}

/// The state of one device's runtime, behind every [`Runtime`] handle.
pub(crate) struct RuntimeInner {
    id: u64,
    core: Arc<DeviceCore>,
    group: Arc<Group>,
    /// The group's ledger, held here too: every tracked operation reaches
    /// it, one pointer from the runtime rather than two.
    ledger: Arc<Ledger>,
    /// The kernel modules loaded, built-in and from text.
    modules: Modules,
    sync_mode: SyncMode,
    /// Live device allocations and bytes, live page-locked bytes.
    usage: usage::Usage,
    /// The task that frees memory (X4), and its stream.
    reclaimer: Task,
    reclaim_stream: StreamId,
    tracer: crate::trace::Tracer,
    /// Page-locked host blocks handed out and cached for reuse.
    pinned: pinned::PinnedPool,
    /// Buffers' frees kept for later (`Runtime::retry_deferred_frees`),
    /// and at the drop.
    deferred_frees: deferred::DeferredFrees,
    /// cudarc's handle on this device's primary context, made on first
    /// use ([`Runtime::cuda_context`]).
    cudarc: OnceLock<Arc<cudarc::driver::CudaContext>>,
    /// State of libraries built on the public API, by type
    /// ([`Runtime::extension`]): torn down in the drop, streams idle.
    extensions: extension::Extensions,
    /// Words the libraries write their results into ([`StatusWord`]).
    status_words: status::StatusWords,
    /// Results of library operations found failed where nobody could be
    /// told (a task or fence dropped unwaited): reported by the runtime's
    /// next [`Runtime::synchronize`] only (never by an unrelated task's
    /// wait: DESIGN "Where a failure goes").
    unreported: parking_lot::Mutex<Option<Error>>,
    /// Whether `unreported` holds one.
    has_unreported: std::sync::atomic::AtomicBool,
    /// Checks of dropped tasks and fences, each with the fence of its
    /// work, checked on the reclaim path.
    deferred_checks: deferred::DeferredChecks,
    /// Streams outside the pool and the ledger, idle, on which a graphed
    /// scope captures foreign operations into child graphs
    /// ([`Runtime::with_side_stream`]): nothing runs on them.
    side_streams: parking_lot::Mutex<Vec<RawStream>>,
    /// Set once a wait kept failing past [`RuntimeOptions::wait_limit`]
    /// on a device that reports no broken context: every later wait that
    /// guards memory returns it (the device is treated as broken).
    unresponsive: OnceLock<Error>,
    /// [`RuntimeOptions::wait_limit`].
    wait_limit: std::time::Duration,
}

impl std::fmt::Debug for RuntimeInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.id)
            .field("backend", &self.core.driver.kind())
            .field("device", &self.core.ordinal)
            .finish_non_exhaustive()
    }
}

/// The runtime of one device (or of the host backend): the ledger, the
/// stream and event pools, and the backend. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Runtime {
    inner: RtRef,
}

/// A handle on a runtime's state: counted, or, for the process-wide runtime
/// (which is never dropped), a plain reference. Every task holds one, and
/// a counted clone is a read-modify-write of one cache line that all worker
/// threads share: with the global runtime a task starts and ends touching
/// nothing shared (DESIGN "Streams are a resource", B10).
#[derive(Clone, Debug)]
pub(crate) enum RtRef {
    Static(&'static RuntimeInner),
    Counted(Arc<RuntimeInner>),
}

impl std::ops::Deref for RtRef {
    type Target = RuntimeInner;
    #[inline]
    fn deref(&self) -> &RuntimeInner {
        match self {
            RtRef::Static(r) => r,
            RtRef::Counted(a) => a,
        }
    }
}

static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);
static GLOBAL: OnceLock<Result<Runtime>> = OnceLock::new();

impl Runtime {
    /// The process-wide runtime, started on first use with
    /// [`RuntimeOptions::default`] (so `GPU_BACKEND` chooses the backend).
    ///
    /// # Errors
    ///
    /// The error the first start gave, every time.
    pub fn global() -> Result<&'static Runtime> {
        GLOBAL
            .get_or_init(|| {
                let rt = Runtime::new(RuntimeOptions::default())?.into_static();
                if let Some(path) = std::env::var_os("GPU_TRACE") {
                    rt.trace_to_file(std::path::Path::new(&path))?;
                }
                Ok(rt)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The runtime, kept for the rest of the process: its handles are plain
    /// references from then on.
    fn into_static(self) -> Runtime {
        match self.inner {
            RtRef::Counted(a) => match Arc::try_unwrap(a) {
                Ok(inner) => {
                    let inner: &'static RuntimeInner = Box::leak(Box::new(inner));
                    inner.group.members.lock()[inner.core.ordinal] = Member::Static(inner);
                    Runtime {
                        inner: RtRef::Static(inner),
                    }
                }
                Err(a) => Runtime {
                    inner: RtRef::Counted(a),
                },
            },
            s @ RtRef::Static(_) => Runtime { inner: s },
        }
    }

    /// A new runtime, of device `opts.device`, in a group of its own: the
    /// other devices are reached through [`Runtime::device`] (DESIGN "Beyond one GPU").
    ///
    /// # Errors
    ///
    /// [`Error::NoDevice`] when CUDA was asked for and there is none (or no
    /// device `opts.device`); driver errors from creating the pools.
    pub fn new(opts: RuntimeOptions) -> Result<Runtime> {
        let device = opts.device;
        Group::open(opts)?.runtime(device)
    }

    /// The runtime of device `ordinal` of this runtime's group (DESIGN "Beyond one GPU"): one
    /// ledger and one stream-id space for all of them, so that a buffer
    /// handed from a task on one device to a task on another is ordered by
    /// a device wait on the other device's event. Opened on first use
    /// (CUDA: a context, pools and peer access with the devices open so
    /// far); the same runtime while a handle on it lives.
    ///
    /// # Errors
    ///
    /// [`Error::NoDevice`] when there is no device `ordinal`; driver errors
    /// opening it.
    pub fn device(&self, ordinal: usize) -> Result<Runtime> {
        if ordinal == self.inner.core.ordinal {
            return Ok(self.clone());
        }
        self.inner.group.runtime(ordinal)
    }

    /// This runtime's device ordinal (its place in the group).
    pub fn ordinal(&self) -> usize {
        self.inner.core.ordinal
    }

    /// How many devices the group has (CUDA: the devices the driver
    /// reports; the host backend: [`RuntimeOptions::host_devices`]).
    pub fn device_count(&self) -> usize {
        self.inner.group.cores.len()
    }

    /// Whether `other` is a runtime of this group (any device): its fences
    /// and events can be waited for here.
    pub fn same_group(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.inner.group, &other.inner.group)
    }

    /// A runtime on the host backend (tests, machines without a GPU).
    ///
    /// # Errors
    ///
    /// As [`Runtime::new`].
    pub fn host() -> Result<Runtime> {
        Runtime::new(RuntimeOptions {
            backend: BackendChoice::Host,
            ..RuntimeOptions::default()
        })
    }

    /// Which backend runs the work.
    pub fn backend(&self) -> BackendKind {
        self.inner.core.driver.kind()
    }

    /// The device's name.
    pub fn device_name(&self) -> String {
        self.inner.core.driver.device_name()
    }

    /// The device's total memory, bytes.
    pub fn total_memory(&self) -> usize {
        self.inner.core.driver.total_memory()
    }

    /// The ledger's decision counters (waits avoided by reason, device
    /// waits, host synchronizes).
    pub fn counters(&self) -> CounterSnapshot {
        self.inner.ledger.counters()
    }

    /// The ledger, read-only: epochs and facts, for tests and diagnostics.
    /// Only the runtime changes it (DESIGN "Soundness": one false fact makes a later use
    /// skip a wait it needs), so this view has no method that does:
    ///
    /// ```compile_fail
    /// # let rt = gpu_sched::Runtime::host().unwrap();
    /// let t = rt.begin_task().unwrap();
    /// rt.ledger().mark_completed(t.stream_id(), gpu_sched::StreamEpoch(99)); // error: no such method
    /// ```
    pub fn ledger(&self) -> LedgerView<'_> {
        LedgerView(&self.inner.ledger)
    }

    /// Turns the ledger's facts on (default) or off. Off is the
    /// wait-for-everything policy: every stream switch waits for all the old
    /// stream queued. Same code path, one setting (benchmarks B4, B5, B8).
    pub fn set_facts(&self, on: bool) {
        self.inner.ledger.set_facts(on);
    }

    /// Whether the ledger's facts are used.
    pub fn facts(&self) -> bool {
        self.inner.ledger.facts()
    }

    /// Live resources.
    pub fn live(&self) -> LiveCounts {
        let i = &self.inner;
        let (allocations, device_bytes, pinned_bytes) = i.usage.now();
        LiveCounts {
            streams: i.core.streams.created(),
            streams_in_use: i.core.streams.created() - i.core.streams.idle_count(),
            events: i.core.events.created(),
            events_in_use: i.core.events.created() - i.core.events.idle_count(),
            allocations,
            device_bytes,
            pinned_bytes,
        }
    }

    /// Waits on the host until every stream of the runtime finished all
    /// submitted work (a device-wide synchronize).
    ///
    /// It also reports a failure of library work that nobody took: the
    /// results of a task or fence dropped with them unchecked (dropping
    /// never blocks: they are checked on the runtime's reclaim path). Such
    /// a failure goes here and nowhere else: an unrelated task's wait never
    /// returns it (DESIGN "Where a failure goes").
    ///
    /// # Errors
    ///
    /// Driver errors (a sticky error, for one); the first failure of
    /// dropped work's library results ([`Error::NotPositiveDefinite`],
    /// ...), once; [`Error::DeviceUnresponsive`] once a wait kept failing.
    pub fn synchronize(&self) -> Result<()> {
        let mut first = None;
        let streams = &self.inner.core.streams;
        let (_held, all) = streams.all_held_with_ids();
        for (id, s) in all {
            // Under the stream's capture slot lock, as `handoff::host_wait`:
            // a stream a task is capturing cannot be synchronized (that
            // would fail, and end the capture), so wait for what it queued
            // before the capture, the only work of it that runs; any other
            // gets an event recorded (a capture cannot begin in between),
            // waited for after the lock is let go (no lock held across an
            // unbounded wait).
            let slot = streams.capture_slot(id).lock();
            let r = if let Some(pre) = slot.as_ref() {
                self.driver().event_sync(pre.raw)
            } else {
                match self.take_event() {
                    Ok(ev) => {
                        // Untracked: the event covers nothing (DESIGN "Soundness").
                        self.inner.ledger.record_untracked(&ev.coverage);
                        let recorded = self.driver().record(ev.raw, s);
                        drop(slot);
                        let r = recorded.and_then(|()| self.driver().event_sync(ev.raw));
                        self.give_event(ev);
                        r
                    }
                    Err(e) => Err(e),
                }
            };
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        self.retry_deferred_frees();
        // Every stream finished: the deferred checks' work is done.
        self.inner.deferred_checks.reap(self, true);
        if let Some(e) = self.inner.unresponsive.get() {
            first.get_or_insert(e.clone());
        }
        // A failure of dropped work nobody took is reported here (and only
        // here), after the wait.
        if let Some(e) = self.take_unreported() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// Races the host backend's detector found (always empty on CUDA).
    pub fn races(&self) -> Vec<String> {
        self.inner.core.driver.races()
    }

    /// Forgets the races found so far (host backend).
    pub fn clear_races(&self) {
        self.inner.core.driver.clear_races()
    }

    /// Turns the host backend's wait audit on, its counts from zero, or
    /// off ([`WaitAudit`](crate::WaitAudit): every device wait a hand-off
    /// inserts, judged needed or not by the race detector's clocks as its
    /// stream reaches it). Returns whether this runtime's backend audits:
    /// `false` on CUDA, which has no detector. Audited waits cost an extra
    /// operation on their stream: for measuring, not for production.
    pub fn set_wait_audit(&self, on: bool) -> bool {
        let audits = self.inner.core.driver.set_wait_audit(on);
        if on && audits {
            crate::driver::AUDITING.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        audits
    }

    /// The wait audit's counts: of the waits whose stream reached them
    /// (after [`Runtime::synchronize`], all of them). `None` on CUDA.
    pub fn wait_audit(&self) -> Option<crate::WaitAudit> {
        self.inner.core.driver.wait_audit()
    }

    /// Starts tracing every tracked operation (see [`crate::trace`]).
    ///
    /// # Errors
    ///
    /// Driver errors creating or recording the origin event.
    pub fn trace_start(&self) -> Result<()> {
        let raw = self.raw_stream(self.inner.reclaim_stream);
        self.inner.tracer.start(self.driver(), raw)
    }

    /// Writes completed spans to `path` (Chrome trace format, appended as
    /// they complete) from now on, and starts tracing.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be created or written; driver
    /// errors.
    pub fn trace_to_file(&self, path: &std::path::Path) -> Result<()> {
        let io = |source| Error::Io {
            during: "creating the trace file",
            source: Arc::new(source),
        };
        let f = std::fs::File::create(path).map_err(io)?;
        self.inner.tracer.set_file(f).map_err(io)?;
        self.trace_start()
    }

    /// Turns traced operations that completed into spans (and appends them
    /// to the trace file, if any). Never blocks.
    pub fn trace_flush(&self) {
        self.inner.tracer.flush(self.driver());
    }

    /// Stops tracing: waits for the traced work, and returns every span
    /// since [`Runtime::trace_start`], by start time.
    ///
    /// # Errors
    ///
    /// Driver errors from the wait.
    pub fn trace_stop(&self) -> Result<Vec<crate::trace::Span>> {
        self.synchronize()?;
        Ok(self.inner.tracer.stop(self.driver()))
    }

    /// Whether two handles are the same runtime.
    pub fn same(&self, other: &Runtime) -> bool {
        self.inner.id == other.inner.id
    }

    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    #[inline]
    pub(crate) fn driver(&self) -> &dyn Driver {
        &*self.inner.core.driver
    }

    /// The driver, shared (for what must outlive a borrow of the runtime:
    /// a captured child graph destroys itself through it).
    pub(crate) fn driver_arc(&self) -> Arc<dyn Driver> {
        self.inner.core.driver.clone()
    }

    /// Runs `f` with a stream outside the pool and the ledger, taken for
    /// `f` alone: a graphed scope captures a foreign operation on it into
    /// a child graph (`Driver::end_capture_child`), so nothing ever runs
    /// on it. `f` leaves it as it found it: not capturing.
    pub(crate) fn with_side_stream<R>(&self, f: impl FnOnce(RawStream) -> Result<R>) -> Result<R> {
        let taken = self.inner.side_streams.lock().pop();
        let s = match taken {
            Some(s) => s,
            None => self.driver().create_stream()?,
        };
        // Back on every path, unwinding included (`f` leaves it idle).
        struct Back<'a>(&'a parking_lot::Mutex<Vec<RawStream>>, RawStream);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.0.lock().push(self.1);
            }
        }
        let _back = Back(&self.inner.side_streams, s);
        f(s)
    }

    #[inline]
    pub(crate) fn raw_stream(&self, s: StreamId) -> RawStream {
        self.inner.core.streams.raw(s)
    }

    /// The ledger itself, to change (the crate's own operations;
    /// [`Runtime::ledger`] is the read-only view).
    #[inline]
    pub(crate) fn ledger_rw(&self) -> &Arc<Ledger> {
        &self.inner.ledger
    }

    /// This device's core: its driver and its stream and event pools.
    #[inline]
    pub(crate) fn core(&self) -> &DeviceCore {
        &self.inner.core
    }

    /// The group of devices this runtime is of (DESIGN "Beyond one GPU").
    #[inline]
    pub(crate) fn group(&self) -> &Group {
        &self.inner.group
    }

    /// How stream synchronizes wait ([`RuntimeOptions::sync_mode`]).
    #[inline]
    pub(crate) fn sync_mode(&self) -> SyncMode {
        self.inner.sync_mode
    }

    /// A word for a library's result, zeroed
    /// ([`crate::TaskContext::status_word`]).
    pub(crate) fn status_word(&self) -> Result<StatusWord> {
        self.inner
            .status_words
            .take(&*self.inner.core.driver, self.inner.id)
    }

    /// A run of `len` words for a batched call's results, zeroed
    /// ([`crate::TaskContext::status_words`]).
    pub(crate) fn status_words(&self, len: usize) -> Result<StatusWord> {
        self.inner
            .status_words
            .take_run(&*self.inner.core.driver, self.inner.id, len)
    }

    /// What the runtime's memory holds, counted.
    #[inline]
    pub(crate) fn usage(&self) -> &usage::Usage {
        &self.inner.usage
    }

    /// The kernel modules loaded (kernel/typed.rs, kernel/loader.rs).
    #[inline]
    pub(crate) fn modules(&self) -> &Modules {
        &self.inner.modules
    }

    /// The page-locked blocks handed out and cached (staging.rs).
    pub(crate) fn pinned(&self) -> &pinned::PinnedPool {
        &self.inner.pinned
    }

    /// The frees kept for later (handoff.rs).
    pub(crate) fn deferred_frees(&self) -> &deferred::DeferredFrees {
        &self.inner.deferred_frees
    }

    /// The checks deferred by dropped tasks and fences
    /// (`fence/checks.rs` keeps them; the ordered free and
    /// [`Runtime::synchronize`] reap them).
    pub(crate) fn deferred_checks(&self) -> &deferred::DeferredChecks {
        &self.inner.deferred_checks
    }

    /// The error of a device that stopped answering waits, once one did
    /// ([`Runtime::wait_past_errors`]).
    pub(crate) fn unresponsive(&self) -> &OnceLock<Error> {
        &self.inner.unresponsive
    }

    /// How long a wait guarding memory keeps retrying.
    pub(crate) fn wait_limit(&self) -> std::time::Duration {
        self.inner.wait_limit
    }

    /// Keeps `e` for the runtime's next [`Runtime::synchronize`].
    pub(crate) fn keep_unreported(&self, e: Error) {
        // The first is kept (one failure is reported).
        self.inner.unreported.lock().get_or_insert(e);
        self.inner.has_unreported.store(true, Ordering::Release);
    }

    /// The result kept by [`Runtime::keep_unreported`], if any: one
    /// atomic load when there is none.
    pub(crate) fn take_unreported(&self) -> Option<Error> {
        if !self.inner.has_unreported.load(Ordering::Acquire) {
            return None;
        }
        let mut u = self.inner.unreported.lock();
        self.inner.has_unreported.store(false, Ordering::Release);
        u.take()
    }

    /// The task that frees memory (X4).
    #[inline]
    pub(crate) fn reclaimer(&self) -> &Task {
        &self.inner.reclaimer
    }

    /// The reclaimer's stream.
    #[inline]
    pub(crate) fn reclaim_stream(&self) -> StreamId {
        self.inner.reclaim_stream
    }

    /// The tracer of tracked operations ([`crate::trace`]).
    #[inline]
    pub(crate) fn tracer(&self) -> &crate::trace::Tracer {
        &self.inner.tracer
    }

    pub(crate) fn take_event(&self) -> Result<Box<PooledEvent>> {
        self.inner.core.events.take(self.driver())
    }

    pub(crate) fn give_event(&self, e: Box<PooledEvent>) {
        self.inner.core.events.give(e)
    }

    /// [`Error::WrongDevice`] unless `other` is of this runtime's group (a
    /// fence or event of any of its devices can be waited for, DESIGN "Beyond one GPU").
    pub(crate) fn check_group(&self, other: &Runtime, what: &'static str) -> Result<()> {
        if self.same_group(other) {
            Ok(())
        } else {
            Err(Error::WrongDevice { what })
        }
    }

    pub(crate) fn check_same(&self, other: u64, what: &'static str) -> Result<()> {
        if other == self.inner.id {
            Ok(())
        } else {
            Err(Error::WrongDevice { what })
        }
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        // Finish everything on the device before its memory goes: no
        // memory is released while queued work may use it.
        let c = &self.core;
        for s in c.streams.all_raw() {
            let _ = c.driver.stream_sync(s, SyncMode::Blocking);
        }
        for s in self.side_streams.get_mut().drain(..) {
            // Only ever captured on (nothing queued): idle.
            let _ = c.driver.destroy_stream(s);
        }
        // The libraries' work is done (their streams synced): their
        // extensions destroy their handles, plans and generators while the
        // context is current ([`Extension::teardown`]).
        if c.driver.bind_context().is_ok() {
            self.extensions.teardown();
        }
        let deferred = self.deferred_frees.take_all();
        if !deferred.is_empty() {
            // A deferred free's users may be streams of any device of the
            // group (a peer copy): all of them finish first.
            let mut idle = true;
            for core in self.group.cores.iter().filter_map(OnceLock::get) {
                for s in core.streams.all_raw() {
                    idle &= core.driver.stream_sync(s, SyncMode::Blocking).is_ok();
                }
            }
            let raw = c.streams.raw(self.reclaim_stream);
            for (ptr, bytes, _) in deferred.into_iter().filter(|_| idle) {
                // SAFETY: deferred by `free_or_defer` (a buffer's allocation
                // of this size, freed once, used by nothing submitted since);
                // every stream of the group finished all its work above, so
                // no use of it is left. On a broken context it is kept.
                let _ = unsafe { c.driver.free(ptr, device_bytes(bytes), raw) };
            }
        }
        self.status_words.free_all(&*c.driver);
        for (p, bytes) in self.pinned.drain_cache() {
            // SAFETY: a cached block came from `alloc_host` with `bytes` and
            // was given back with no copy through it in flight
            // (`pinned_give`); it leaves the cache here, once.
            let _ = unsafe { c.driver.free_host(p as *mut u8, bytes) };
        }
        // The reclaim stream goes back to the device's pool (idle: synced).
        c.streams.unreserve(self.reclaim_stream);
        c.streams.release(
            self.reclaim_stream,
            crate::pool::Tail::Idle,
            &*c.driver,
            &self.ledger,
        );
    }
}
