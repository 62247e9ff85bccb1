//! The one internal layer that talks to a backend. Raw handles are plain
//! integers so that the trait is object-safe and every handle is `Send`.
//!
//! Two implementations: [`cuda`] (the driver API through cudarc, dynamically
//! loaded) and [`host`] (streams as CPU threads, kernels as Rust functions,
//! with a race detector). Nothing here tracks anything: the ledger does.

use crate::error::Result;
use crate::kernel::{BuiltinHost, ErasedHost, KernelArg, LaunchConfig};
use gpu_epoch::Access;
use std::fmt::Debug;
use std::sync::Arc;

pub(crate) mod collective;
pub(crate) mod cuda;
mod fault;
pub(crate) mod host;
mod node;

pub use collective::ReduceOp;
pub(crate) use collective::{CallKind, Collectives, DataType, RankCall};
pub use fault::{FaultInjector, FaultKind};
pub(crate) use node::{BatchTag, ChildGraph, ChildNode, GraphSpec, KernelNode, Likeness, NodeOp};

/// The backend `choice` names, `Auto` resolved by the environment variable
/// `GPU_BACKEND` (`cuda` or `host`) where it is set; an `Auto` left is
/// decided by opening a device.
pub(crate) fn resolve(choice: BackendChoice) -> BackendChoice {
    match (choice, std::env::var("GPU_BACKEND").ok().as_deref()) {
        (BackendChoice::Auto, Some("host")) => BackendChoice::Host,
        (BackendChoice::Auto, Some("cuda")) => BackendChoice::Cuda,
        (c, _) => c,
    }
}

/// The host backend, with `memory_limit` bytes of "device" memory and
/// `stream_limit` streams (shared by the devices it simulates).
/// With `faults`, every call goes through a [`fault::FaultDriver`] first.
pub(crate) fn open_host(
    memory_limit: usize,
    stream_limit: usize,
    faults: Option<Arc<FaultInjector>>,
) -> Arc<dyn Driver> {
    let host: Arc<dyn Driver> = Arc::new(host::HostDriver::new(memory_limit, stream_limit));
    match faults {
        Some(f) => Arc::new(fault::FaultDriver::new(host, f)),
        None => host,
    }
}

/// How many CUDA devices the driver reports.
///
/// # Errors
///
/// [`crate::Error::NoDevice`] when there is no driver or no device.
pub(crate) fn cuda_device_count() -> Result<usize> {
    cuda::device_count()
}

/// Opens the CUDA backend on device `ordinal`.
pub(crate) fn open_cuda(ordinal: usize) -> Result<Arc<dyn Driver>> {
    let d = cuda::CudaDriver::new(ordinal)?;
    // Keep freed pool memory mapped: stream-ordered allocation then costs no
    // remapping after a synchronize.
    d.set_pool_release_threshold(u64::MAX)?;
    Ok(Arc::new(d))
}

/// A backend stream handle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct RawStream(pub(crate) u64);

/// A backend event handle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct RawEvent(pub(crate) u64);

/// A backend executable graph handle.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct RawGraph(pub(crate) u64);

/// A node of a graph being captured (`CUgraphNode`; the host backend has
/// none).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct RawNode(pub(crate) u64);

/// The nodes one captured operation depends on, or that it added.
pub(crate) type Nodes = smallvec::SmallVec<[RawNode; 4]>;

/// A loaded kernel of a built-in module: a `CUfunction` on CUDA (0 on the
/// host backend, where the kernel's static holds its host implementation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawKernel {
    /// `CUfunction` as an integer (0 on the host backend).
    pub(crate) handle: u64,
}

/// What a launch runs: the function on CUDA, and on the host backend its
/// host implementation.
pub(crate) struct KernelCall<'a> {
    /// `CUfunction` as an integer (0 on the host backend).
    pub(crate) handle: u64,
    /// The host implementation.
    pub(crate) host: HostCall<'a>,
}

/// A kernel's host implementation, as the host backend calls it: over the
/// arguments and the buffers' lengths.
pub(crate) enum HostCall<'a> {
    /// A built-in kernel's, through its static.
    Builtin(&'static dyn BuiltinHost),
    /// A user's kernel's ([`crate::Kernel::with_host`]).
    User(&'a std::sync::Arc<ErasedHost>),
    /// None (CUDA launches of a kernel without one).
    None,
}

impl From<RawKernel> for KernelCall<'static> {
    fn from(k: RawKernel) -> Self {
        KernelCall {
            handle: k.handle,
            host: HostCall::None,
        }
    }
}

/// A memory range an operation touches, for the host backend's race
/// detector (the CUDA backend ignores it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct MemAccess {
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    pub(crate) access: Access,
}

/// Whether a runtime's wait audit is on (any runtime's): the hand-off
/// decisions then tell the driver ([`Driver::audit_decision`]). One
/// relaxed load on the hot path otherwise.
pub(crate) static AUDITING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The host backend's audit of the waits the runtime inserts
/// ([`crate::Runtime::set_wait_audit`]; DESIGN "Tests"): each device wait of
/// a hand-off, as its stream reaches it, is judged by the race detector's
/// vector clocks. It is *needed* where it orders, before the access it was
/// inserted for, an earlier conflicting access to that memory (a write
/// after a write or a read, a read after a write) that nothing ordered
/// before: not the stream's own order, not an earlier wait, not what the
/// host knew complete when the hand-off was decided. Otherwise the ledger
/// asked for more than the work needs: *unnecessary*.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitAudit {
    /// Device waits that ordered a conflicting access nothing else did.
    pub needed: u64,
    /// Device waits for accesses already ordered.
    pub unnecessary: u64,
    /// Waits not classified: the host's synchronizations of a hand-off
    /// (while the old stream captures), and device waits with no one
    /// access behind them (a split's views rejoined).
    pub unclassified: u64,
}

impl WaitAudit {
    /// The share of the classified waits that were unnecessary (0 where
    /// there were none).
    pub fn unnecessary_share(&self) -> f64 {
        let all = self.needed + self.unnecessary;
        if all == 0 {
            0.0
        } else {
            self.unnecessary as f64 / all as f64
        }
    }
}

impl std::fmt::Display for WaitAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} waits: {} needed, {} unnecessary ({:.1} %), {} not classified",
            self.needed + self.unnecessary + self.unclassified,
            self.needed,
            self.unnecessary,
            100.0 * self.unnecessary_share(),
            self.unclassified
        )
    }
}

/// A task's priority (DESIGN "Streams are a resource"): the priority of
/// the stream it takes, so that the device's scheduler runs its kernels
/// ahead of waiting kernels of normal streams (CUDA stream priorities: a
/// kernel already running is not preempted). The pool keeps streams of
/// each priority apart. The host backend runs every stream alike.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub enum Priority {
    /// The default: CUDA's least priority.
    #[default]
    Normal,
    /// CUDA's greatest stream priority: for the critical path (a
    /// factorization's panel, a solver's reduction).
    High,
}

/// How a stream synchronize waits.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum SyncMode {
    /// Poll the stream, spinning briefly and then yielding the thread.
    #[default]
    SpinThenYield,
    /// Block in the driver.
    Blocking,
}

/// Which backend to start.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum BackendChoice {
    /// CUDA when a device is present, the host backend otherwise. The
    /// environment variable `GPU_BACKEND` (`cuda` or `host`) overrides.
    #[default]
    Auto,
    /// CUDA, or an error if there is no device.
    Cuda,
    /// The host backend.
    Host,
}

/// Which backend a runtime uses.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BackendKind {
    /// CUDA, through the driver API.
    Cuda,
    /// The host backend: streams as CPU threads, kernels as Rust functions.
    Host,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Host => "host",
        })
    }
}

/// The backend operations. Every call is non-blocking unless its name says
/// sync; none takes a ledger lock (R14).
///
/// Pointers are device addresses as integers; on the host backend they are
/// host addresses. The methods that take one are `unsafe`; in their
/// `# Safety` sections, *live* memory was allocated by this driver and is not
/// freed before the stream reaches the operation, and an operation is
/// *ordered* when every other access to the same bytes, one of the two a
/// write, comes before it or after it (stream order, an event wait, a host
/// synchronize). On the host backend device memory is process memory, so an
/// unordered pair is a data race in this process.
pub(crate) trait Driver: Send + Sync + Debug {
    fn kind(&self) -> BackendKind;
    fn device_name(&self) -> String;
    /// Total device memory, bytes.
    fn total_memory(&self) -> usize;

    fn create_stream(&self) -> Result<RawStream>;
    /// A stream of priority `priority`; by default (the host backend) the
    /// same as [`Driver::create_stream`].
    fn create_stream_with(&self, priority: Priority) -> Result<RawStream> {
        let _ = priority;
        self.create_stream()
    }
    fn destroy_stream(&self, s: RawStream) -> Result<()>;
    /// True when all work on `s` finished.
    fn stream_query(&self, s: RawStream) -> Result<bool>;
    /// The sticky error, if the context has one (no driver call).
    fn check_sticky(&self) -> Result<()>;
    /// Writes `value` to the 4 bytes at `dptr` (mapped pinned memory, see
    /// [`Driver::alloc_host`]) once everything queued on `s` before is done.
    ///
    /// # Safety
    ///
    /// `dptr` is the device address of 4 aligned bytes of mapped pinned
    /// memory of this driver, live until `s` reached the write, which the
    /// host only reads, atomically, meanwhile.
    unsafe fn write_value(&self, s: RawStream, dptr: u64, value: u32) -> Result<()>;
    /// Whether the 4 bytes at `host`, the host side of a
    /// [`Driver::write_value`] target, hold `value`: then what was queued
    /// before that write is done. A plain load: no driver call.
    ///
    /// # Safety
    ///
    /// `host` is 4-aligned, mapped pinned memory of this driver, alive.
    unsafe fn value_written(&self, host: *const u32, value: u32) -> bool {
        // SAFETY: the caller guarantees `host` is aligned and alive; the
        // device writes it, so it is read atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(host as *mut u32) }
            .load(std::sync::atomic::Ordering::Acquire)
            == value
    }
    fn stream_sync(&self, s: RawStream, mode: SyncMode) -> Result<()>;

    /// Events are created without timing unless `timing` is set.
    fn create_event(&self, timing: bool) -> Result<RawEvent>;
    fn destroy_event(&self, e: RawEvent) -> Result<()>;
    /// An event without timing whose [`Driver::event_sync`] sleeps in the
    /// driver until the event completes, rather than spinning (CUDA's
    /// `CU_EVENT_BLOCKING_SYNC`): for the runtime's waiter thread, which
    /// wakes futures (`crate::future`). The host backend's syncs always
    /// sleep.
    fn create_blocking_event(&self) -> Result<RawEvent> {
        self.create_event(false)
    }
    fn record(&self, e: RawEvent, s: RawStream) -> Result<()>;
    fn wait_event(&self, s: RawStream, e: RawEvent) -> Result<()>;
    /// A wait from a capturing stream on an event recorded outside the
    /// capture (an external-event node in the graph).
    fn wait_event_in_capture(&self, s: RawStream, e: RawEvent) -> Result<()> {
        self.wait_event(s, e)
    }
    fn event_sync(&self, e: RawEvent) -> Result<()>;
    /// True when the event's last record completed (or it was never recorded).
    fn event_query(&self, e: RawEvent) -> Result<bool>;
    /// Milliseconds between two completed timing events.
    #[allow(dead_code)] // used by the benchmarks' timelines
    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32>;

    /// Stream-ordered allocation.
    fn alloc(&self, bytes: usize, s: RawStream) -> Result<u64>;
    /// Stream-ordered free: the memory is released once `s` reaches it.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`Driver::alloc`] of this driver with `bytes` and is
    /// freed once; every use of it is ordered before `s` reaches the free,
    /// and none is submitted after it.
    unsafe fn free(&self, ptr: u64, bytes: usize, s: RawStream) -> Result<()>;
    /// Page-locked host memory; `mapped`: also mapped into the device
    /// (returns the device address). Host backend: plain memory.
    fn alloc_host(&self, bytes: usize, mapped: bool) -> Result<(*mut u8, u64)>;
    /// Frees memory of [`Driver::alloc_host`] at once.
    ///
    /// # Safety
    ///
    /// `ptr` is null or came from [`Driver::alloc_host`] of this driver with
    /// `bytes`, and is freed once; no queued operation and no reference uses
    /// it any more.
    unsafe fn free_host(&self, ptr: *mut u8, bytes: usize) -> Result<()>;
    /// Whether the driver takes `ptr` for page-locked host memory (its own,
    /// another runtime's or another library's): a copy from it then runs
    /// after the call returns, reading the memory late. Host backend: its
    /// own page-locked blocks, those of every device of its group (it
    /// copies pageable memory at once).
    fn is_page_locked(&self, _ptr: *const u8) -> bool {
        false
    }

    /// Asynchronous copy from host memory. Pageable `src` may be reused when
    /// the call returns (the driver staged it).
    ///
    /// # Safety
    ///
    /// `dst` is live and ordered for `bytes`; `src` is readable for `bytes`
    /// and, if page-locked ([`Driver::alloc_host`]), stays alive and
    /// unmodified until `s` reached the copy.
    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: usize, s: RawStream) -> Result<()>;
    /// Asynchronous copy to host memory.
    ///
    /// # Safety
    ///
    /// `src` is live and ordered for `bytes`; `dst` is writable for `bytes`,
    /// and nothing else reads or writes it, until `s` reached the copy.
    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: usize, s: RawStream) -> Result<()>;
    /// Asynchronous copy between device ranges.
    ///
    /// # Safety
    ///
    /// `src` and `dst` are live and ordered for `bytes`.
    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: usize, s: RawStream) -> Result<()>;
    /// Asynchronous copy of `bytes` from `src`, memory of `src_dev`'s
    /// device, to `dst`, memory of `dst_dev`'s, on `s` (a stream of this
    /// driver). The host backend: one process, one memory, a device copy.
    ///
    /// # Safety
    ///
    /// `dst` is live memory of `dst_dev` and `src` of `src_dev`, both
    /// ordered for `bytes`.
    unsafe fn copy_peer(
        &self,
        dst: u64,
        dst_dev: &dyn Driver,
        src: u64,
        src_dev: &dyn Driver,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        let _ = (src_dev, dst_dev);
        // SAFETY: the caller's contract, which is `copy_dtod`'s: both ranges
        // are live and ordered (one memory on this backend).
        unsafe { self.copy_dtod(dst, src, bytes, s) }
    }
    /// The `CUcontext` and `CUdevice` (as integers), for peer copies and
    /// peer access; `(0, -1)` on the host backend.
    fn peer_handles(&self) -> (u64, i32) {
        (0, -1)
    }
    /// Lets this device's kernels and copies reach `other`'s memory where
    /// the topology allows it (`cuCtxEnablePeerAccess`, and access to its
    /// memory pool: `cuMemPoolSetAccess`); whether it does.
    /// The host backend: always (one memory).
    fn enable_peer_access(&self, other: &dyn Driver) -> Result<bool> {
        let _ = other;
        Ok(true)
    }
    /// Sets `count` 32-bit words at `dst` to `value`.
    ///
    /// # Safety
    ///
    /// `dst` is 4-aligned, live and ordered for `count` words.
    unsafe fn memset_u32(&self, dst: u64, value: u32, count: usize, s: RawStream) -> Result<()>;

    /// Loads PTX text (checked by [`crate::kernel::ptx`] first) as a module of this
    /// context, kept until the driver is dropped; returns its handle (the
    /// host backend: a number).
    fn load_ptx(&self, ptx: &str) -> Result<u64>;
    /// The kernel `name` of the module `module` ([`Driver::load_ptx`]):
    /// a `CUfunction` on CUDA, 0 on the host backend.
    fn function(&self, module: u64, name: &str) -> Result<u64>;
    /// The device's compute capability (major, minor); `None` on the host
    /// backend.
    fn compute_capability(&self) -> Option<(i32, i32)> {
        None
    }
    /// Launches `k` on `s`.
    ///
    /// # Safety
    ///
    /// `k` is a function of this driver (or a host implementation) and
    /// `args` match its parameter list, with `lens` the element counts of
    /// its buffers (for a user's host implementation); what the kernel
    /// touches with `cfg` through `args` is live and ordered memory, listed
    /// in `accesses` (for the host backend's detector).
    unsafe fn launch(
        &self,
        k: &KernelCall<'_>,
        cfg: LaunchConfig,
        args: &[KernelArg],
        lens: &[usize],
        accesses: &[MemAccess],
        s: RawStream,
    ) -> Result<()>;

    fn begin_capture(&self, s: RawStream) -> Result<()>;
    /// Ends the capture and instantiates the graph.
    fn end_capture(&self, s: RawStream) -> Result<RawGraph>;
    /// Runs the captured graph `g` on `s`.
    ///
    /// # Safety
    ///
    /// What the captured operations touch is live and ordered with this
    /// launch, as for each operation when it was captured: on the host
    /// backend they are closures over raw addresses.
    unsafe fn graph_launch(&self, g: RawGraph, s: RawStream) -> Result<()>;
    fn graph_destroy(&self, g: RawGraph) -> Result<()>;

    /// Builds an executable graph of `spec`'s operations through the
    /// explicit graph API (no stream capture), nodes added in `spec.topo`'s
    /// order; node `i` of the graph is `spec.ops[i]` (for
    /// [`Driver::graph_set_kernel`]).
    ///
    /// # Safety
    ///
    /// As for each operation submitted on its own (`launch`, `copy_dtod`,
    /// `memset_u32`): the arguments match each kernel, and what the nodes
    /// touch is live and ordered with the graph's launches.
    unsafe fn graph_build(&self, spec: &GraphSpec<'_>) -> Result<RawGraph>;

    /// Sets the arguments of kernel node `i` of `g` (from
    /// [`Driver::graph_build`]) to `node`'s, for the launches after this
    /// call; launches already queued run with the old ones. `node` is a
    /// launch of the same kernel with the same configuration.
    ///
    /// # Safety
    ///
    /// As for [`Driver::graph_build`], for the new arguments.
    unsafe fn graph_set_kernel(&self, g: RawGraph, i: usize, node: &KernelNode) -> Result<()>;

    /// Ends the capture on `s` and returns the captured graph itself, not
    /// instantiated: a child graph for a graphed scope's node
    /// ([`NodeOp::Child`]), destroyed by [`Driver::child_destroy`].
    fn end_capture_child(&self, s: RawStream) -> Result<u64>;

    /// Destroys a child graph of [`Driver::end_capture_child`]. Graphs
    /// built from it hold their own copy.
    fn child_destroy(&self, g: u64);

    /// A child graph that runs the child graphs `children` (of
    /// [`Driver::end_capture_child`] or this call) one after the other, in
    /// that order: a graphed scope's batched group on the host backend,
    /// which has no batched library call of its own. Destroyed by
    /// [`Driver::child_destroy`]; the children stay the caller's. CUDA
    /// batches through the library instead: [`Error::Unsupported`].
    fn child_join(&self, children: &[u64]) -> Result<u64> {
        let _ = children;
        Err(crate::Error::Unsupported(
            "joining child graphs (the host backend's batched group)",
        ))
    }

    /// Sets child node `i` of `g` (from [`Driver::graph_build`]) to
    /// `node`'s graph, for the launches after this call; launches already
    /// queued run the old one. Fails, changing nothing, where the new
    /// graph's topology differs from the node's.
    ///
    /// # Safety
    ///
    /// As for [`Driver::graph_build`], for the new graph's operations.
    unsafe fn graph_set_child(&self, g: RawGraph, i: usize, node: &ChildNode) -> Result<()>;

    /// While `s` is capturing: the next operation captured on `s` depends
    /// on `deps` alone (none: a root of the graph). A scope capture sets
    /// each operation's dependencies this way (`crate::capture`). The host
    /// backend replays a graph in capture order, which every dependency
    /// set allows: nothing to do.
    fn capture_set_deps(&self, s: RawStream, deps: &[RawNode]) -> Result<()> {
        let _ = (s, deps);
        Ok(())
    }

    /// While `s` is capturing: the nodes the next captured operation would
    /// depend on, that is the ones the last operation added. The host
    /// backend: none.
    fn capture_tail(&self, s: RawStream) -> Result<Nodes> {
        let _ = s;
        Ok(Nodes::new())
    }

    /// The backend's collectives (DESIGN "Beyond one GPU"): NCCL on CUDA, threads on the host
    /// backend. No driver call.
    fn collectives(&self) -> &dyn Collectives;

    /// Makes the device's context current on the calling thread, for a
    /// library that uses the current device (NCCL's communicator setup).
    /// The host backend: nothing to do.
    fn bind_context(&self) -> Result<()> {
        Ok(())
    }

    /// Host backend only: runs `body` on `s` in stream order, as an
    /// operation that touches `accesses` (which the race detector checks
    /// against the stream's order, like a kernel's). The host collectives
    /// are such operations. CUDA: [`crate::Error::Unsupported`].
    ///
    /// # Safety
    ///
    /// What `body` touches is live until `s` reached it and `body` ran.
    /// Its accesses listed in `accesses` are ordered (see the trait); any
    /// other memory it touches is ordered by `body` itself with everything
    /// else that touches it (a collective's rendezvous with its other
    /// ranks, each of which lists its own buffers).
    unsafe fn host_op(
        &self,
        s: RawStream,
        body: Arc<dyn Fn() + Send + Sync>,
        accesses: &[MemAccess],
    ) -> Result<()> {
        let _ = (s, body, accesses);
        Err(crate::error::Error::Unsupported(
            "host operations on a device backend",
        ))
    }

    /// The host backend's wait audit, while it is on (see
    /// [`WaitAudit`]): classifies the device wait of `s` on `e` submitted
    /// next as needed or not, for `on_behalf`, the access about to be made
    /// on `s` that the wait is for; `None`: a wait not classified (a host
    /// synchronization, or a hand-off with no one access), only counted.
    /// Nothing on CUDA.
    fn audit_wait(&self, s: RawStream, e: RawEvent, on_behalf: Option<MemAccess>) {
        let _ = (s, e, on_behalf);
    }

    /// The wait audit, while it is on: a hand-off decision is made on this
    /// thread now, so the waits it asks for are judged with what the host
    /// knew complete at this point, not later (what it learns after the
    /// decision could not have spared the wait). Nothing on CUDA.
    fn audit_decision(&self) {}

    /// Turns the wait audit on (its counts from zero) or off; whether the
    /// backend has one (the host backend).
    fn set_wait_audit(&self, on: bool) -> bool {
        let _ = on;
        false
    }

    /// The wait audit's counts so far (the waits that ran); `None` where
    /// the backend has none.
    fn wait_audit(&self) -> Option<WaitAudit> {
        None
    }

    /// Races found by the host backend's detector (none on CUDA).
    fn races(&self) -> Vec<String> {
        Vec::new()
    }

    /// Forgets the races found (host backend).
    fn clear_races(&self) {}

    /// Host backend only: blocks `s` until `open` is non-zero, or sets
    /// `timed_out` after `timeout_ns`. CUDA gates are a kernel instead.
    ///
    /// # Safety
    ///
    /// `open` and `timed_out` are 4-aligned, stay allocated until `s` passed
    /// the gate, and are only accessed atomically meanwhile.
    unsafe fn host_gate(
        &self,
        _s: RawStream,
        _open: *const u32,
        _timed_out: *mut u32,
        _timeout_ns: u64,
    ) -> Result<()> {
        Err(crate::error::Error::Unsupported(
            "host gate on a device backend",
        ))
    }
}
