//! The CUDA backend: the driver API through cudarc's raw layer
//! (`cudarc::driver::sys`), loaded at run time.
//!
//! Every raw driver call of the crate is in this folder: [`probe`] loads the
//! library and checks it, [`error`] reads results, [`device`] opens a device
//! and makes its context current (the [`CudaDriver`] type and the call
//! helpers), [`args`] lays out a launch's arguments, [`nccl`] is the
//! collectives, this file is the [`Driver`]. Nothing here tracks anything:
//! cudarc's safe types (and their per-slice events) are not used.
//!
//! # The library and the device
//!
//! cudarc panics when a function is called and `libcuda` cannot be loaded, and
//! again when a symbol is missing. [`CudaDriver::new`] therefore checks first,
//! with cudarc's own search (`sys::is_culib_present`, the same names in the
//! same order as the loader that panics), that the library loads, then that
//! it exports every function this backend calls
//! ([`probe::REQUIRED_SYMBOLS`]); only then does it call `cuInit`. Each
//! failure is [`Error::NoDevice`].
//!
//! # Contexts
//!
//! The driver retains the device's primary context and makes it current on a
//! calling thread the first time that thread calls it: a thread-local holds
//! the id of the driver last bound on the thread, so the check on every call
//! is one thread-local read and a compare. Driver ids are never reused.
//! Nothing else in the process may change a thread's current context.
//!
//! # Sticky errors
//!
//! An error that breaks the context for good (an illegal address in a
//! kernel, ...) is kept: every later call returns it at once, without calling
//! the driver.

use super::{
    BackendKind, Driver, GraphSpec, KernelCall, KernelNode, MemAccess, Nodes, Priority, RawEvent,
    RawGraph, RawNode, RawStream, SyncMode,
};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, LaunchConfig};
use cudarc::driver::sys::{self, CUresult};
use std::ffi::{c_void, CString};
use std::ptr;
use std::time::{Duration, Instant};

mod args;
mod compat;
mod device;
mod error;
mod graph;
#[cfg(feature = "nccl-any")]
pub(crate) mod nccl;
#[cfg(not(feature = "nccl-any"))]
#[path = "nccl_off.rs"]
pub(crate) mod nccl;
mod probe;
#[cfg(test)]
mod test;

use args::{pack_args, ArgSlot};
pub(crate) use device::CudaDriver;

use error::sticky_error;
#[cfg(test)]
pub(crate) use probe::cuda_available;
pub(crate) use probe::device_count;

/// The most arguments [`Driver::launch`] passes (they live in a stack array).
pub(crate) const MAX_KERNEL_ARGS: usize = 16;

/// How long [`SyncMode::SpinThenYield`] polls a stream in a busy loop before
/// it yields the thread between polls.
const SPIN_FOR: Duration = Duration::from_micros(10);

fn cu_stream(s: RawStream) -> sys::CUstream {
    s.0 as usize as sys::CUstream
}

fn cu_event(e: RawEvent) -> sys::CUevent {
    e.0 as usize as sys::CUevent
}

fn cu_graph_exec(g: RawGraph) -> sys::CUgraphExec {
    g.0 as usize as sys::CUgraphExec
}

impl Driver for CudaDriver {
    fn bind_context(&self) -> Result<()> {
        self.enter()
    }

    fn collectives(&self) -> &dyn crate::driver::Collectives {
        &nccl::Nccl
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device_name(&self) -> String {
        format!("{} (device {})", self.name, self.ordinal())
    }

    fn total_memory(&self) -> usize {
        self.total_memory
    }

    fn create_stream(&self) -> Result<RawStream> {
        let mut s: sys::CUstream = ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: `call` made the context current; `s` is a valid out-pointer.
        self.call("cuStreamCreate", || unsafe {
            sys::cuStreamCreate(&mut s, flags)
        })?;
        Ok(RawStream(s as usize as u64))
    }

    fn create_stream_with(&self, priority: Priority) -> Result<RawStream> {
        if priority == Priority::Normal {
            return self.create_stream();
        }
        let greatest = match self.greatest_priority.get() {
            Some(&g) => g,
            None => {
                let (mut least, mut greatest) = (0, 0);
                // SAFETY: `call` made the context current; both are valid
                // out-pointers.
                self.call("cuCtxGetStreamPriorityRange", || unsafe {
                    sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
                })?;
                *self.greatest_priority.get_or_init(|| greatest)
            }
        };
        let mut s: sys::CUstream = ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: `call` made the context current; `s` is a valid
        // out-pointer; `greatest` is in the context's priority range.
        self.call("cuStreamCreateWithPriority", || unsafe {
            sys::cuStreamCreateWithPriority(&mut s, flags, greatest)
        })?;
        Ok(RawStream(s as usize as u64))
    }

    fn destroy_stream(&self, s: RawStream) -> Result<()> {
        // SAFETY: `call` made the context current; the caller passes a stream
        // of this driver that it no longer uses.
        self.call("cuStreamDestroy", || unsafe {
            sys::cuStreamDestroy_v2(cu_stream(s))
        })
    }

    #[inline]
    fn check_sticky(&self) -> Result<()> {
        match self.sticky.get() {
            Some((code, name)) => Err(sticky_error(*code, name)),
            None => Ok(()),
        }
    }

    unsafe fn write_value(&self, s: RawStream, dptr: u64, value: u32) -> Result<()> {
        let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; `dptr` is 4 aligned bytes of live mapped pinned memory
        // (this function's contract); default flags: the write follows all
        // prior work of the stream, with a memory barrier.
        self.call("cuStreamWriteValue32", || unsafe {
            sys::cuStreamWriteValue32_v2(cu_stream(s), dptr, value, flags)
        })
    }

    fn stream_query(&self, s: RawStream) -> Result<bool> {
        // SAFETY: `query` made the context current; `s` is a stream of this
        // driver.
        self.query("cuStreamQuery", || unsafe {
            sys::cuStreamQuery(cu_stream(s))
        })
    }

    fn stream_sync(&self, s: RawStream, mode: SyncMode) -> Result<()> {
        if mode == SyncMode::Blocking {
            // SAFETY: `call` made the context current; `s` is a stream of
            // this driver.
            return self.call("cuStreamSynchronize", || unsafe {
                sys::cuStreamSynchronize(cu_stream(s))
            });
        }
        let mut spin_since: Option<Instant> = None;
        while !self.stream_query(s)? {
            let since = *spin_since.get_or_insert_with(Instant::now);
            if since.elapsed() < SPIN_FOR {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn create_event(&self, timing: bool) -> Result<RawEvent> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT as u32
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        };
        let mut e: sys::CUevent = ptr::null_mut();
        // SAFETY: `call` made the context current; `e` is a valid out-pointer.
        self.call("cuEventCreate", || unsafe {
            sys::cuEventCreate(&mut e, flags)
        })?;
        Ok(RawEvent(e as usize as u64))
    }

    fn create_blocking_event(&self) -> Result<RawEvent> {
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
            | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        let mut e: sys::CUevent = ptr::null_mut();
        // SAFETY: `call` made the context current; `e` is a valid out-pointer.
        self.call("cuEventCreate", || unsafe {
            sys::cuEventCreate(&mut e, flags)
        })?;
        Ok(RawEvent(e as usize as u64))
    }

    fn destroy_event(&self, e: RawEvent) -> Result<()> {
        // SAFETY: `call` made the context current; the caller passes an event
        // of this driver that it no longer uses.
        self.call("cuEventDestroy", || unsafe {
            sys::cuEventDestroy_v2(cu_event(e))
        })
    }

    fn record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        // SAFETY: `call` made the context current; `e` and `s` belong to this
        // driver.
        self.call("cuEventRecord", || unsafe {
            sys::cuEventRecord(cu_event(e), cu_stream(s))
        })
    }

    fn wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        // SAFETY: `call` made the context current; `s` and `e` belong to this
        // driver; flags 0 is the only documented value.
        self.call("cuStreamWaitEvent", || unsafe {
            sys::cuStreamWaitEvent(cu_stream(s), cu_event(e), 0)
        })
    }

    fn wait_event_in_capture(&self, s: RawStream, e: RawEvent) -> Result<()> {
        let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_EXTERNAL as u32;
        // SAFETY: `call` made the context current; `s` and `e` belong to this
        // driver; CU_EVENT_WAIT_EXTERNAL makes the captured wait an
        // external-event node, the documented way to wait on an event
        // recorded outside the capture.
        self.call("cuStreamWaitEvent (in a capture)", || unsafe {
            sys::cuStreamWaitEvent(cu_stream(s), cu_event(e), flags)
        })
    }

    fn event_sync(&self, e: RawEvent) -> Result<()> {
        // SAFETY: `call` made the context current; `e` belongs to this driver.
        self.call("cuEventSynchronize", || unsafe {
            sys::cuEventSynchronize(cu_event(e))
        })
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        // SAFETY: `query` made the context current; `e` belongs to this
        // driver.
        self.query("cuEventQuery", || unsafe { sys::cuEventQuery(cu_event(e)) })
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        let mut ms: f32 = 0.0;
        // SAFETY: `call` made the context current; both events belong to this
        // driver; `ms` is a valid out-pointer.
        self.call("cuEventElapsedTime", || unsafe {
            compat::cu_event_elapsed_time(&mut ms, cu_event(start), cu_event(end))
        })?;
        Ok(ms)
    }

    fn alloc(&self, bytes: usize, s: RawStream) -> Result<u64> {
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `call_alloc` made the context current; `s` belongs to this
        // driver; `dptr` is a valid out-pointer. Zero bytes are rounded up to
        // one so that every allocation has its own address.
        self.call_alloc("cuMemAllocAsync", bytes, || unsafe {
            sys::cuMemAllocAsync(&mut dptr, bytes.max(1), cu_stream(s))
        })?;
        Ok(dptr)
    }

    unsafe fn free(&self, ptr: u64, _bytes: usize, s: RawStream) -> Result<()> {
        // SAFETY: `call` made the context current; `ptr` is an allocation of
        // `alloc` that nothing uses once `s` reaches this point (this
        // function's contract).
        self.call("cuMemFreeAsync", || unsafe {
            sys::cuMemFreeAsync(ptr, cu_stream(s))
        })
    }

    fn alloc_host(&self, bytes: usize, mapped: bool) -> Result<(*mut u8, u64)> {
        let mut flags = sys::CU_MEMHOSTALLOC_PORTABLE;
        if mapped {
            flags |= sys::CU_MEMHOSTALLOC_DEVICEMAP;
        }
        let mut host: *mut c_void = ptr::null_mut();
        // SAFETY: `call_alloc` made the context current; `host` is a valid
        // out-pointer. Zero bytes are rounded up to one (a distinct, non-null
        // address).
        self.call_alloc("cuMemHostAlloc", bytes, || unsafe {
            sys::cuMemHostAlloc(&mut host, bytes.max(1), flags)
        })?;
        if !mapped {
            return Ok((host.cast(), 0));
        }
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `host` was just allocated with `DEVICEMAP`; flags must be 0.
        let mapped = self.call("cuMemHostGetDevicePointer", || unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut dptr, host, 0)
        });
        if let Err(e) = mapped {
            // SAFETY: `host` was allocated above and is not handed out.
            let _ = unsafe { sys::cuMemFreeHost(host) };
            return Err(e);
        }
        Ok((host.cast(), dptr))
    }

    fn is_page_locked(&self, ptr: *const u8) -> bool {
        // A broken context fails the copy that follows anyway.
        if self.enter().is_err() {
            return false;
        }
        let mut kind: u32 = 0;
        // SAFETY: the context is current (entered above); `kind` is a valid
        // out-pointer for the 4 bytes MEMORY_TYPE writes (a CUmemorytype);
        // any address may be asked. Pageable memory is unknown to the
        // driver: an error, and no error name is looked up for it (the
        // common case, on the copy's path).
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr as u64,
            )
        };
        r == CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
    }

    unsafe fn free_host(&self, ptr: *mut u8, _bytes: usize) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: `call` made the context current; `ptr` is memory of
        // `alloc_host` that nothing uses any more (this function's contract).
        self.call("cuMemFreeHost", || unsafe {
            sys::cuMemFreeHost(ptr.cast())
        })
    }

    unsafe fn copy_htod(&self, dst: u64, src: *const u8, bytes: usize, s: RawStream) -> Result<()> {
        if bytes == 0 {
            return self.enter();
        }
        // SAFETY: `call` made the context current; this function's contract:
        // `dst` is live and ordered for `bytes`, `src` readable for `bytes`
        // and, if pinned, kept unmodified until the copy ran.
        self.call("cuMemcpyHtoDAsync", || unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), bytes, cu_stream(s))
        })
    }

    unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        if bytes == 0 {
            return self.enter();
        }
        // SAFETY: `call` made the context current; this function's contract:
        // `src` is live and ordered for `bytes`, `dst` writable for `bytes`
        // and untouched by others until the copy ran.
        self.call("cuMemcpyDtoHAsync", || unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, cu_stream(s))
        })
    }

    unsafe fn copy_dtod(&self, dst: u64, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        if bytes == 0 {
            return self.enter();
        }
        // SAFETY: `call` made the context current; both ranges are live and
        // ordered for `bytes` (this function's contract).
        self.call("cuMemcpyDtoDAsync", || unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, cu_stream(s))
        })
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
        if bytes == 0 {
            return self.enter();
        }
        let ((dst_ctx, _), (src_ctx, _)) = (dst_dev.peer_handles(), src_dev.peer_handles());
        if src_ctx == 0 || dst_ctx == 0 {
            return Err(Error::Unsupported(
                "a peer copy with memory of another backend",
            ));
        }
        // SAFETY: `call` made the context current; `dst` is live memory of
        // `dst_ctx` and `src` of `src_ctx`, contexts retained by their
        // drivers, both ranges ordered for `bytes` (this function's
        // contract).
        self.call("cuMemcpyPeerAsync", || unsafe {
            sys::cuMemcpyPeerAsync(
                dst,
                dst_ctx as usize as sys::CUcontext,
                src,
                src_ctx as usize as sys::CUcontext,
                bytes,
                cu_stream(s),
            )
        })
    }

    fn peer_handles(&self) -> (u64, i32) {
        (self.ctx, self.device)
    }

    fn enable_peer_access(&self, other: &dyn Driver) -> Result<bool> {
        let (ctx, dev) = other.peer_handles();
        if ctx == 0 || dev == self.device {
            return Ok(dev == self.device);
        }
        let mut can: i32 = 0;
        // SAFETY: both are valid devices; `can` is a valid out-pointer.
        self.call("cuDeviceCanAccessPeer", || unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.device, dev)
        })?;
        if can == 0 {
            return Ok(false);
        }
        self.enter()?;
        // SAFETY: this context is current (`enter`); `ctx` is the other
        // driver's retained primary context.
        let r = unsafe { sys::cuCtxEnablePeerAccess(ctx as usize as sys::CUcontext, 0) };
        match r {
            CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            r => return self.check(r, "cuCtxEnablePeerAccess").map(|()| false),
        }
        // Stream-ordered allocations (the default pool's, which buffers are)
        // are out of a peer's reach even with peer access on, until the
        // pool grants it: without this, a kernel reading or writing the
        // other device's buffer faults, NCCL's among them (within one
        // process NCCL's kernels use peer buffers directly).
        let mut pool: sys::CUmemoryPool = ptr::null_mut();
        // SAFETY: `dev` is a valid device; `pool` is a valid out-pointer.
        self.call("cuDeviceGetDefaultMemPool", || unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, dev)
        })?;
        let access = compat::MemAccessDesc {
            location_type: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.device,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: `pool` is the other device's default pool; `access` is one
        // descriptor, alive for the call, laid out as `CUmemAccessDesc`
        // (`compat::MemAccessDesc`).
        self.call("cuMemPoolSetAccess", || unsafe {
            sys::cuMemPoolSetAccess(pool, access.as_ptr(), 1)
        })?;
        Ok(true)
    }

    unsafe fn memset_u32(&self, dst: u64, value: u32, count: usize, s: RawStream) -> Result<()> {
        if count == 0 {
            return self.enter();
        }
        // SAFETY: `call` made the context current; `dst` is 4-aligned, live
        // and ordered for `count` words (this function's contract).
        self.call("cuMemsetD32Async", || unsafe {
            sys::cuMemsetD32Async(dst, value, count, cu_stream(s))
        })
    }

    fn load_ptx(&self, ptx: &str) -> Result<u64> {
        let image = CString::new(ptx.trim_end_matches('\0')).map_err(|_| Error::BadPtx {
            problem: "the text holds a NUL byte".to_owned(),
        })?;
        let mut module: sys::CUmodule = ptr::null_mut();
        // SAFETY: `call` made the context current; `image` is NUL-terminated
        // PTX text that lives for the call; `module` is a valid out-pointer.
        let loaded = self.call("cuModuleLoadData", || unsafe {
            sys::cuModuleLoadData(&mut module, image.as_ptr().cast())
        });
        match loaded {
            Ok(()) => {
                self.modules.lock().push(module as usize as u64);
                Ok(module as usize as u64)
            }
            // The JIT refused what the runtime's own check let through.
            Err(Error::Driver { code, name, .. })
                if code == CUresult::CUDA_ERROR_INVALID_PTX as i32
                    || code == CUresult::CUDA_ERROR_INVALID_IMAGE as i32
                    || code == CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION as i32
                    || code == CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU as i32 =>
            {
                Err(Error::BadPtx {
                    problem: format!("the driver's JIT refused it ({name})"),
                })
            }
            Err(e) => Err(e),
        }
    }

    fn function(&self, module: u64, name: &str) -> Result<u64> {
        self.enter()?;
        self.get_function(module as usize as sys::CUmodule, name)
            .map(|f| f as usize as u64)
    }

    fn compute_capability(&self) -> Option<(i32, i32)> {
        Some(self.compute_capability)
    }

    unsafe fn launch(
        &self,
        k: &KernelCall<'_>,
        cfg: LaunchConfig,
        args: &[KernelArg],
        _lens: &[usize],
        _accesses: &[MemAccess],
        s: RawStream,
    ) -> Result<()> {
        let mut slots = [ArgSlot::ZERO; MAX_KERNEL_ARGS];
        let mut params = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        pack_args(args, &mut slots, &mut params)?;
        let ([gx, gy, gz], [bx, by, bz]) = (cfg.grid, cfg.block);
        // SAFETY: `call` made the context current; `k.handle` is a
        // `CUfunction` of a module this driver loaded (kept until drop);
        // `params` holds one pointer per argument into `slots`, both alive
        // for the call (the driver copies the values before returning); the
        // arguments match the kernel's parameters and it touches only live,
        // ordered memory (this function's contract).
        self.call("cuLaunchKernel", || unsafe {
            sys::cuLaunchKernel(
                k.handle as usize as sys::CUfunction,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                cfg.shared_mem_bytes,
                cu_stream(s),
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    fn begin_capture(&self, s: RawStream) -> Result<()> {
        // Relaxed: the capturing thread may still synchronize other streams
        // and events, which a hand-off onto a capturing stream does (R9:
        // "where a device wait is impossible, the host synchronizes").
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver.
        self.call("cuStreamBeginCapture", || unsafe {
            sys::cuStreamBeginCapture_v2(cu_stream(s), mode)
        })
    }

    fn end_capture(&self, s: RawStream) -> Result<RawGraph> {
        let mut graph: sys::CUgraph = ptr::null_mut();
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; `graph` is a valid out-pointer.
        self.call("cuStreamEndCapture", || unsafe {
            sys::cuStreamEndCapture(cu_stream(s), &mut graph)
        })?;
        // Both calls below run whatever the other returns.
        let mut exec: sys::CUgraphExec = ptr::null_mut();
        // SAFETY: `graph` is the graph just captured; `exec` is a valid
        // out-pointer.
        let instantiated = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
        // SAFETY: `graph` is ours and not used after this; an instantiated
        // executable graph does not depend on it.
        let destroyed = unsafe { sys::cuGraphDestroy(graph) };
        self.check(instantiated, "cuGraphInstantiateWithFlags")?;
        if let Err(e) = self.check(destroyed, "cuGraphDestroy") {
            // SAFETY: `exec` was instantiated above and is not handed out.
            let _ = unsafe { sys::cuGraphExecDestroy(exec) };
            return Err(e);
        }
        Ok(RawGraph(exec as usize as u64))
    }

    unsafe fn graph_launch(&self, g: RawGraph, s: RawStream) -> Result<()> {
        // SAFETY: `call` made the context current; `g` is an executable graph
        // of this driver and `s` one of its streams; what the graph touches
        // is live and ordered (this function's contract).
        self.call("cuGraphLaunch", || unsafe {
            sys::cuGraphLaunch(cu_graph_exec(g), cu_stream(s))
        })
    }

    fn graph_destroy(&self, g: RawGraph) -> Result<()> {
        // SAFETY: `call` made the context current; the caller passes an
        // executable graph of this driver that it no longer launches.
        // Launches still queued run to their end (CUDA frees it then).
        let destroyed = self.call("cuGraphExecDestroy", || unsafe {
            sys::cuGraphExecDestroy(cu_graph_exec(g))
        });
        let forgotten = self.forget_built(g);
        destroyed.and(forgotten)
    }

    unsafe fn graph_build(&self, spec: &GraphSpec<'_>) -> Result<RawGraph> {
        // SAFETY: this function's contract, passed on.
        unsafe { self.build_graph(spec) }
    }

    unsafe fn graph_set_kernel(&self, g: RawGraph, i: usize, node: &KernelNode) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        unsafe { self.set_kernel(g, i, node) }
    }

    fn end_capture_child(&self, s: RawStream) -> Result<u64> {
        let mut graph: sys::CUgraph = ptr::null_mut();
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; `graph` is a valid out-pointer.
        self.call("cuStreamEndCapture", || unsafe {
            sys::cuStreamEndCapture(cu_stream(s), &mut graph)
        })?;
        Ok(graph as usize as u64)
    }

    fn child_destroy(&self, g: u64) {
        // SAFETY: `call` made the context current; `g` is a graph of
        // `end_capture_child`, destroyed once (its `ChildGraph`'s drop);
        // the graphs built from it cloned it.
        let _ = self.call("cuGraphDestroy", || unsafe {
            sys::cuGraphDestroy(g as usize as sys::CUgraph)
        });
    }

    unsafe fn graph_set_child(
        &self,
        g: RawGraph,
        i: usize,
        node: &crate::driver::ChildNode,
    ) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        unsafe { self.set_child(g, i, node) }
    }

    fn capture_set_deps(&self, s: RawStream, deps: &[RawNode]) -> Result<()> {
        let mut nodes: Nodes = deps.iter().copied().collect();
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; `nodes` holds `deps.len()` node handles of the graph being
        // captured on `s` (from `capture_tail`), which the driver reads
        // during the call only (`RawNode` is a `CUgraphNode` as an integer,
        // of the same size).
        self.call("cuStreamUpdateCaptureDependencies", || unsafe {
            compat::cu_stream_update_capture_dependencies(
                cu_stream(s),
                nodes.as_mut_ptr() as *mut sys::CUgraphNode,
                deps.len(),
                sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
                    as u32,
            )
        })
    }

    fn capture_tail(&self, s: RawStream) -> Result<Nodes> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut deps: *const sys::CUgraphNode = ptr::null();
        let mut n = 0usize;
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; every out-pointer is valid (null for the id and graph,
        // which are not wanted).
        self.call("cuStreamGetCaptureInfo_v2", || unsafe {
            compat::cu_stream_get_capture_info_v2(
                cu_stream(s),
                &mut status,
                ptr::null_mut(),
                ptr::null_mut(),
                &mut deps,
                &mut n,
            )
        })?;
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Err(Error::Capturing {
                what: "reading the dependencies of a stream that is not capturing (the capture was invalidated)",
            });
        }
        if n == 0 || deps.is_null() {
            return Ok(Nodes::new());
        }
        // SAFETY: the driver returned `n` node handles at `deps`, valid
        // until the next call on `s`; they are copied out at once.
        let got = unsafe { std::slice::from_raw_parts(deps, n) };
        Ok(got.iter().map(|&d| RawNode(d as usize as u64)).collect())
    }
}
