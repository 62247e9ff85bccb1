//! The runtime of one device: backend, ledger, pools, loaded modules.

use crate::driver::{BackendChoice, BackendKind, Driver, RawKernel, RawStream, SyncMode};
use crate::error::{Error, Result};
use crate::kernel::Module;
use crate::pool::{EventPool, PooledEvent, StreamPool};
use crate::ptx::LoadedPtx;
use gpu_epoch::{CounterSnapshot, Generation, Ledger, StreamEpoch, StreamId, Task, TaskId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// How many kernel modules one runtime can load.
const MAX_MODULES: usize = 64;

/// A loaded module: the address of its `Module`, and its kernels.
type LoadedModule = (usize, Box<[RawKernel]>);

/// A module being loaded from text, or its outcome.
type LoadSlot = Arc<OnceLock<Result<Arc<LoadedPtx>>>>;

/// How a runtime is set up.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// The backend.
    pub backend: BackendChoice,
    /// The CUDA device ordinal.
    pub device: usize,
    /// Streams created up front (X5).
    pub warm_streams: usize,
    /// Events created up front (X5).
    pub warm_events: usize,
    /// The most streams the ledger tracks (at most 256).
    pub max_streams: usize,
    /// How stream synchronizes wait.
    pub sync_mode: SyncMode,
    /// Host backend: bytes of "device" memory before allocations fail.
    pub host_memory_limit: usize,
    /// Host backend: how many streams it creates before creating one fails
    /// (a driver error, as a device out of resources gives).
    pub host_stream_limit: usize,
    /// Whether the device marks the end of each task's work in mapped
    /// pinned memory (`cuStreamWriteValue32`), so that the stream pool sees
    /// a stream idle with a load. Off, or where the device refuses, the pool
    /// asks the driver (`cuStreamQuery`, about 1.4 us on an H200).
    pub end_flags: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            backend: BackendChoice::Auto,
            device: 0,
            warm_streams: 8,
            warm_events: 32,
            max_streams: 256,
            sync_mode: SyncMode::SpinThenYield,
            host_memory_limit: 8 << 30,
            host_stream_limit: usize::MAX,
            end_flags: true,
        }
    }
}

/// Read-only questions to a runtime's ledger ([`Runtime::ledger`]).
#[derive(Clone, Copy, Debug)]
pub struct LedgerView<'a>(&'a Ledger);

impl LedgerView<'_> {
    /// `s`'s current epoch (the stamp of new work).
    pub fn epoch(&self, s: StreamId) -> StreamEpoch {
        self.0.epoch(s)
    }

    /// The highest epoch of `s` known finished.
    pub fn completed(&self, s: StreamId) -> StreamEpoch {
        self.0.completed(s)
    }

    /// The highest epoch of `of` that `s` is known ordered after.
    pub fn waited(&self, s: StreamId, of: StreamId) -> StreamEpoch {
        self.0.waited(s, of)
    }

    /// `s`'s generation (moves on when it is recycled).
    pub fn generation(&self, s: StreamId) -> Generation {
        self.0.generation(s)
    }

    /// The task that owns `s`, if any.
    pub fn owner(&self, s: StreamId) -> Option<TaskId> {
        self.0.owner(s)
    }

    /// Whether `s` is shared (its closes no longer count).
    pub fn is_shared(&self, s: StreamId) -> bool {
        self.0.is_shared(s)
    }

    /// Whether `s` is being captured into a graph.
    pub fn is_capturing(&self, s: StreamId) -> bool {
        self.0.is_capturing(s)
    }

    /// How many streams the ledger tracks (retired ones left out).
    pub fn stream_count(&self) -> usize {
        self.0.live_stream_count()
    }

    /// The decision counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.0.counters()
    }
}

/// Counts of live resources, to check that faults leak nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LiveCounts {
    /// Streams created.
    pub streams: usize,
    /// Streams held by tasks (not in the pool).
    pub streams_in_use: usize,
    /// Events created.
    pub events: usize,
    /// Events out of the pool.
    pub events_in_use: usize,
    /// Live device allocations.
    pub allocations: usize,
    /// Bytes of live device allocations.
    pub device_bytes: usize,
    /// Bytes of live pinned host allocations.
    pub pinned_bytes: usize,
}

pub(crate) struct RuntimeInner {
    pub(crate) id: u64,
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) ledger: Ledger,
    pub(crate) streams: StreamPool,
    pub(crate) events: EventPool,
    /// Loaded modules by the address of their `Module`, filled front to
    /// back: a launch finds its kernel with a load or two, no lock.
    modules: Box<[OnceLock<LoadedModule>]>,
    /// Serializes loading, so a module is loaded once.
    loading: parking_lot::Mutex<()>,
    /// Modules loaded from text, by their source and options (§10): a
    /// source is loaded (or compiled) once per runtime, the built-in
    /// modules and users' alike.
    by_source: parking_lot::Mutex<HashMap<String, LoadSlot>>,
    pub(crate) sync_mode: SyncMode,
    pub(crate) allocations: AtomicUsize,
    pub(crate) device_bytes: AtomicUsize,
    pub(crate) pinned_bytes: AtomicUsize,
    /// The task that frees memory (X4), and its stream.
    pub(crate) reclaimer: Task,
    pub(crate) reclaim_stream: StreamId,
    pub(crate) tracer: crate::trace::Tracer,
    /// Pinned host blocks kept for reuse: (bytes, address).
    pub(crate) pinned_cache: parking_lot::Mutex<Vec<(usize, usize)>>,
    /// Pinned host blocks handed out (address, bytes): a safe copy from
    /// one of them must wait for the device (§8).
    pub(crate) pinned_live: parking_lot::Mutex<Vec<(usize, usize)>>,
}

impl std::fmt::Debug for RuntimeInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.id)
            .field("backend", &self.driver.kind())
            .finish_non_exhaustive()
    }
}

/// The runtime of one device (or of the host backend): the ledger, the
/// stream and event pools, and the backend. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub(crate) inner: RtRef,
}

/// A handle on a runtime's state: counted, or, for the process-wide runtime
/// (which is never dropped), a plain reference. Every task holds one, and
/// a counted clone is a read-modify-write of one cache line that all worker
/// threads share: with the global runtime a task starts and ends touching
/// nothing shared (§9, B10).
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
                Ok(inner) => Runtime {
                    inner: RtRef::Static(Box::leak(Box::new(inner))),
                },
                Err(a) => Runtime {
                    inner: RtRef::Counted(a),
                },
            },
            s @ RtRef::Static(_) => Runtime { inner: s },
        }
    }

    /// A new runtime.
    ///
    /// # Errors
    ///
    /// [`Error::NoDevice`] when CUDA was asked for and there is none; driver
    /// errors from creating the pools.
    pub fn new(opts: RuntimeOptions) -> Result<Runtime> {
        let driver = crate::driver::open(
            opts.backend,
            opts.device,
            opts.host_memory_limit,
            opts.host_stream_limit,
        )?;
        let ledger = Ledger::new(opts.max_streams.clamp(2, gpu_epoch::MAX_STREAMS));
        let streams = StreamPool::new(ledger.capacity(), opts.warm_streams);
        if opts.end_flags {
            streams.init_flags(&*driver);
        }
        let events = EventPool::new();
        streams.warm(&*driver, &ledger, opts.warm_streams.max(1))?;
        events.warm(&*driver, opts.warm_events)?;
        let reclaimer = ledger.begin_task();
        let (reclaim_stream, _) = streams.acquire(&*driver, &ledger)?;
        streams.reserve(reclaim_stream);
        ledger.bind(&reclaimer, reclaim_stream);
        Ok(Runtime {
            inner: RtRef::Counted(Arc::new(RuntimeInner {
                id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
                driver,
                ledger,
                streams,
                events,
                modules: (0..MAX_MODULES).map(|_| OnceLock::new()).collect(),
                loading: parking_lot::Mutex::new(()),
                by_source: Default::default(),
                sync_mode: opts.sync_mode,
                allocations: AtomicUsize::new(0),
                device_bytes: AtomicUsize::new(0),
                pinned_bytes: AtomicUsize::new(0),
                reclaimer,
                reclaim_stream,
                tracer: Default::default(),
                pinned_cache: Default::default(),
                pinned_live: Default::default(),
            })),
        })
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
        self.inner.driver.kind()
    }

    /// The device's name.
    pub fn device_name(&self) -> String {
        self.inner.driver.device_name()
    }

    /// The device's total memory, bytes.
    pub fn total_memory(&self) -> usize {
        self.inner.driver.total_memory()
    }

    /// The ledger's decision counters (waits avoided by reason, device
    /// waits, host synchronizes).
    pub fn counters(&self) -> CounterSnapshot {
        self.inner.ledger.counters()
    }

    /// The ledger, read-only: epochs and facts, for tests and diagnostics.
    /// Only the runtime changes it (§8: one false fact makes a later use
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
        LiveCounts {
            streams: i.streams.created(),
            streams_in_use: i.streams.created() - i.streams.idle_count(),
            events: i.events.created(),
            events_in_use: i.events.created() - i.events.idle_count(),
            allocations: i.allocations.load(Ordering::Relaxed),
            device_bytes: i.device_bytes.load(Ordering::Relaxed),
            pinned_bytes: i.pinned_bytes.load(Ordering::Relaxed),
        }
    }

    /// Waits on the host until every stream of the runtime finished all
    /// submitted work (a device-wide synchronize).
    ///
    /// # Errors
    ///
    /// Driver errors (a sticky error, for one).
    pub fn synchronize(&self) -> Result<()> {
        let mut first = None;
        let (_held, all) = self.inner.streams.all_held();
        for s in all {
            if let Err(e) = self.driver().stream_sync(s, self.inner.sync_mode) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Races the host backend's detector found (always empty on CUDA).
    pub fn races(&self) -> Vec<String> {
        self.inner.driver.races()
    }

    /// Forgets the races found so far (host backend).
    pub fn clear_races(&self) {
        self.inner.driver.clear_races()
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
        &*self.inner.driver
    }

    #[inline]
    pub(crate) fn raw_stream(&self, s: StreamId) -> RawStream {
        self.inner.streams.raw(s)
    }

    /// The driver's handle of `kernel` (`CUfunction` as an integer on CUDA,
    /// 0 on the host backend), loading its module on first use; for interop
    /// and for benchmarks against raw launches.
    ///
    /// # Errors
    ///
    /// A driver error loading the module.
    pub fn cu_function(&self, kernel: crate::KernelRef) -> Result<u64> {
        Ok(self.kernel(kernel.module(), kernel.index())?.handle)
    }

    /// The `index`-th kernel of `m`, loading the module on first use. The
    /// common path takes no lock: a scan of the filled `OnceLock` slots, in
    /// load order, for `m`'s address.
    #[inline]
    pub(crate) fn kernel(&self, m: &'static Module, index: usize) -> Result<RawKernel> {
        let key = m as *const Module as usize;
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let _g = self.inner.loading.lock();
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let slot = self
            .inner
            .modules
            .iter()
            .find(|s| s.get().is_none())
            .ok_or(Error::Unsupported(
                "more than 64 kernel modules in one runtime",
            ))?;
        let ptx = self.load_text(m.ptx, || self.load_checked_ptx(m.ptx.to_owned()))?;
        let k = m
            .kernels
            .iter()
            .map(|def| {
                ptx.entry(def.name, def.params)
                    .map_err(|problem| Error::BadKernelArgs {
                        kernel: def.name,
                        problem,
                    })?;
                Ok(RawKernel {
                    handle: self.driver().function(ptx.handle, def.name)?,
                    host: def.host,
                })
            })
            .collect::<Result<Box<[RawKernel]>>>()?;
        let r = k[index];
        // Only loaders set slots, one at a time (the lock): this one is free.
        let _ = slot.set((key, k));
        Ok(r)
    }

    /// The module loaded from `key` (its source and options), loading it
    /// with `load` the first time; a failure is not kept (the next call
    /// tries again).
    pub(crate) fn load_text(
        &self,
        key: &str,
        load: impl FnOnce() -> Result<LoadedPtx>,
    ) -> Result<Arc<LoadedPtx>> {
        let cell = self
            .inner
            .by_source
            .lock()
            .entry(key.to_owned())
            .or_default()
            .clone();
        // Loaded outside the map's lock: loading other sources goes on.
        let r = cell.get_or_init(|| load().map(Arc::new)).clone();
        if r.is_err() {
            self.inner.by_source.lock().remove(key);
        }
        r
    }

    /// Checks `ptx` ([`crate::ptx`]) and loads it.
    pub(crate) fn load_checked_ptx(&self, ptx: String) -> Result<LoadedPtx> {
        let entries = crate::ptx::entries(&ptx).map_err(|problem| Error::BadPtx { problem })?;
        Ok(LoadedPtx {
            handle: self.driver().load_ptx(&ptx)?,
            entries,
            nvrtc: false,
        })
    }

    /// The kernels of the module at `key`, if loaded.
    #[inline]
    fn loaded(&self, key: usize) -> Option<&[RawKernel]> {
        for slot in self.inner.modules.iter() {
            match slot.get() {
                Some((k, ks)) if *k == key => return Some(ks),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    pub(crate) fn take_event(&self) -> Result<Box<PooledEvent>> {
        self.inner.events.take(self.driver())
    }

    pub(crate) fn give_event(&self, e: Box<PooledEvent>) {
        self.inner.events.give(e)
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
        // Finish everything before the driver goes: no memory is released
        // while queued work may use it.
        for s in self.streams.all_raw() {
            let _ = self.driver.stream_sync(s, SyncMode::Blocking);
        }
        for e in self.events.drain() {
            let _ = self.driver.destroy_event(e.raw);
        }
        for (bytes, p) in std::mem::take(&mut *self.pinned_cache.lock()) {
            // SAFETY: a cached block came from `alloc_host` with `bytes` and
            // was given back with no copy through it in flight
            // (`pinned_give`); it leaves the cache here, once.
            let _ = unsafe { self.driver.free_host(p as *mut u8, bytes) };
        }
        if let Some((p, bytes)) = self.streams.flag_memory() {
            // SAFETY: the end-of-work flags came from `alloc_host` with
            // `bytes`; every stream that writes them was synchronized above
            // (on a broken context the CUDA driver refuses the free), and
            // nothing reads them once the runtime drops.
            let _ = unsafe { self.driver.free_host(p, bytes) };
        }
        for s in self.streams.all_raw() {
            let _ = self.driver.destroy_stream(s);
        }
    }
}
