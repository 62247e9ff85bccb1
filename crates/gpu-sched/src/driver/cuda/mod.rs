//! The CUDA backend: the driver API through cudarc's raw layer
//! (`cudarc::driver::sys`), loaded at run time.
//!
//! Every raw driver call of the crate is in this folder: [`probe`] loads the
//! library and checks it, [`error`] reads results, this file is the
//! [`Driver`]. Nothing here tracks anything: cudarc's safe types (and their
//! per-slice events) are not used.
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
    BackendKind, Driver, KernelCall, MemAccess, Nodes, RawEvent, RawGraph, RawNode, RawStream,
    SyncMode,
};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, LaunchConfig};
use cudarc::driver::sys::{self, CUresult};
use parking_lot::Mutex;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod error;
pub(crate) mod nccl;
mod probe;
#[cfg(test)]
mod test;

use error::{check_free, sticky_error};
#[cfg(test)]
pub(crate) use probe::cuda_available;
pub(crate) use probe::device_count;
use probe::driver_probe;

/// The most arguments [`Driver::launch`] passes (they live in a stack array).
pub(crate) const MAX_KERNEL_ARGS: usize = 16;

/// How long [`SyncMode::SpinThenYield`] polls a stream in a busy loop before
/// it yields the thread between polls.
const SPIN_FOR: Duration = Duration::from_micros(10);

static NEXT_DRIVER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The id of the driver whose context this thread made current last
    /// (0: none).
    static BOUND_DRIVER: Cell<u64> = const { Cell::new(0) };
}

fn cu_stream(s: RawStream) -> sys::CUstream {
    s.0 as usize as sys::CUstream
}

fn cu_event(e: RawEvent) -> sys::CUevent {
    e.0 as usize as sys::CUevent
}

fn cu_graph_exec(g: RawGraph) -> sys::CUgraphExec {
    g.0 as usize as sys::CUgraphExec
}

/// One kernel argument's value, at offset 0 whatever its type.
#[derive(Clone, Copy)]
#[repr(C)]
union ArgSlot {
    u64: u64,
    u32: u32,
    i32: i32,
    f32: f32,
    f64: f64,
}

impl ArgSlot {
    const ZERO: ArgSlot = ArgSlot { u64: 0 };
}

/// Writes each argument into `slots` and a pointer to it into `ptrs`, the
/// `kernelParams` layout of `cuLaunchKernel`. No allocation.
fn pack_args(
    args: &[KernelArg],
    slots: &mut [ArgSlot; MAX_KERNEL_ARGS],
    ptrs: &mut [*mut c_void; MAX_KERNEL_ARGS],
) -> Result<()> {
    if args.len() > MAX_KERNEL_ARGS {
        return Err(too_many_args("(launch)", args.len()));
    }
    for (slot, arg) in slots.iter_mut().zip(args) {
        *slot = match *arg {
            KernelArg::Ptr(v) | KernelArg::U64(v) => ArgSlot { u64: v },
            KernelArg::U32(v) => ArgSlot { u32: v },
            KernelArg::I32(v) => ArgSlot { i32: v },
            KernelArg::F32(v) => ArgSlot { f32: v },
            KernelArg::F64(v) => ArgSlot { f64: v },
        };
    }
    let base = slots.as_mut_ptr();
    for (i, p) in ptrs.iter_mut().enumerate().take(args.len()) {
        *p = base.wrapping_add(i).cast();
    }
    Ok(())
}

#[cold]
fn too_many_args(kernel: &'static str, n: usize) -> Error {
    Error::BadKernelArgs {
        kernel,
        problem: format!("{n} arguments; the CUDA backend passes at most {MAX_KERNEL_ARGS}"),
    }
}

/// The CUDA backend for one device: its retained primary context and the
/// modules loaded into it.
///
/// Handles are integers and the context is made current per calling thread,
/// so the driver is `Send + Sync` without `unsafe impl`.
#[derive(Debug)]
pub(crate) struct CudaDriver {
    /// Unique per driver, never reused: the thread-local binding cache key.
    id: u64,
    /// The device ordinal.
    ordinal: usize,
    /// The `CUdevice`.
    device: sys::CUdevice,
    /// The retained primary `CUcontext`, as an integer.
    ctx: u64,
    name: String,
    total_memory: usize,
    /// The first sticky error: code and name.
    sticky: OnceLock<(i32, String)>,
    /// Loaded `CUmodule`s, unloaded on drop.
    modules: Mutex<Vec<u64>>,
    /// (major, minor), for NVRTC's target.
    compute_capability: (i32, i32),
}

impl CudaDriver {
    /// Opens device `ordinal`: checks the library, initialises the driver and
    /// retains the device's primary context.
    ///
    /// # Errors
    ///
    /// [`Error::NoDevice`] when libcuda is absent or too old, `cuInit` fails,
    /// there is no device `ordinal`, or the device has no stream-ordered
    /// allocator; [`Error::Driver`] when a later setup call fails. Never
    /// panics.
    pub(crate) fn new(ordinal: usize) -> Result<CudaDriver> {
        let count = *driver_probe()
            .as_ref()
            .map_err(|e| Error::NoDevice(e.clone()))?;
        let index = match i32::try_from(ordinal) {
            Ok(i) if i < count => i,
            _ => {
                return Err(Error::NoDevice(format!(
                    "there is no CUDA device {ordinal}: the driver reports {count}"
                )))
            }
        };
        let mut device: sys::CUdevice = 0;
        // SAFETY: the driver is initialised (probe) and `index` is in range;
        // `device` is a valid out-pointer.
        let r = unsafe { sys::cuDeviceGet(&mut device, index) };
        check_free(r, "cuDeviceGet")?;

        use sys::CUdevice_attribute as A;
        let attribute = |a: A| -> Result<i32> {
            let mut v: i32 = 0;
            // SAFETY: `device` is a valid device; `v` is a valid out-pointer.
            let r = unsafe { sys::cuDeviceGetAttribute(&mut v, a, device) };
            check_free(r, "cuDeviceGetAttribute").map(|()| v)
        };
        if attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? == 0 {
            return Err(Error::NoDevice(format!(
                "CUDA device {ordinal} has no stream-ordered allocator (memory pools)"
            )));
        }

        let mut name_buf: [c_char; 256] = [0; 256];
        // SAFETY: the buffer holds 256 bytes and the driver writes at most
        // `len` bytes, NUL included.
        let r = unsafe { sys::cuDeviceGetName(name_buf.as_mut_ptr(), 256, device) };
        check_free(r, "cuDeviceGetName")?;
        // SAFETY: the driver wrote a NUL-terminated string into the buffer,
        // and the buffer was zeroed, so a NUL is within its bounds.
        let name = unsafe { CStr::from_ptr(name_buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();

        let mut total_memory: usize = 0;
        // SAFETY: `device` is valid; `total_memory` is a valid out-pointer.
        let r = unsafe { sys::cuDeviceTotalMem_v2(&mut total_memory, device) };
        check_free(r, "cuDeviceTotalMem")?;

        let mut ctx: sys::CUcontext = ptr::null_mut();
        // SAFETY: `device` is valid; `ctx` is a valid out-pointer. The
        // reference is released in `Drop`.
        let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) };
        check_free(r, "cuDevicePrimaryCtxRetain")?;

        let compute_capability = (
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );

        let driver = CudaDriver {
            compute_capability,
            id: NEXT_DRIVER_ID.fetch_add(1, Ordering::Relaxed),
            ordinal,
            device,
            ctx: ctx as usize as u64,
            name,
            total_memory,
            sticky: OnceLock::new(),
            modules: Mutex::new(Vec::new()),
        };
        // From here on `Drop` releases the context on failure.
        driver.enter()?;
        Ok(driver)
    }

    /// The device ordinal.
    pub(crate) fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Sets the release threshold of the device's default memory pool (the
    /// pool `alloc` draws from): freed memory up to `bytes` stays with the
    /// pool across synchronisations instead of going back to the system.
    /// The driver's default is 0, which makes the first allocation after a
    /// synchronize map memory again; `u64::MAX` keeps everything.
    ///
    /// # Errors
    ///
    /// [`Error::Driver`] when the driver refuses.
    pub(crate) fn set_pool_release_threshold(&self, bytes: u64) -> Result<()> {
        let mut pool: sys::CUmemoryPool = ptr::null_mut();
        // SAFETY: `call` made the context current; `pool` is a valid
        // out-pointer.
        self.call("cuDeviceGetDefaultMemPool", || unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, self.device)
        })?;
        let mut value: u64 = bytes;
        // SAFETY: `pool` is the device's default pool; the release threshold
        // attribute reads a `cuuint64_t` through `value`, which lives for the
        // call.
        self.call("cuMemPoolSetAttribute", || unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )
        })
    }

    /// The sticky-error check and the context binding, done before every
    /// driver call: one atomic load and one thread-local read on the hot path.
    #[inline]
    fn enter(&self) -> Result<()> {
        self.check_sticky()?;
        if BOUND_DRIVER.get() != self.id {
            return self.bind();
        }
        Ok(())
    }

    /// Makes the context current on this thread.
    #[cold]
    fn bind(&self) -> Result<()> {
        // SAFETY: `ctx` is the primary context retained by this driver and
        // not released before `Drop`.
        let r = unsafe { sys::cuCtxSetCurrent(self.ctx as usize as sys::CUcontext) };
        self.check(r, "cuCtxSetCurrent")?;
        BOUND_DRIVER.set(self.id);
        Ok(())
    }

    /// A driver call: [`Self::enter`], then `f`, then its result checked.
    /// Every call goes through here, or through [`Self::query`] and
    /// [`Self::call_alloc`], which read one more code as an answer; only
    /// setup ([`Self::new`]), `Drop`, and clean-ups that must run whatever
    /// came before call the driver directly.
    #[inline]
    fn call(&self, during: &'static str, f: impl FnOnce() -> CUresult) -> Result<()> {
        self.enter()?;
        self.check(f(), during)
    }

    /// [`Self::call`] for a query: `Ok(false)` when not ready yet.
    #[inline]
    fn query(&self, during: &'static str, f: impl FnOnce() -> CUresult) -> Result<bool> {
        self.enter()?;
        self.ready(f(), during)
    }

    /// [`Self::call`] for an allocation of `requested` bytes: out of memory
    /// is [`Error::OutOfMemory`].
    #[inline]
    fn call_alloc(
        &self,
        during: &'static str,
        requested: usize,
        f: impl FnOnce() -> CUresult,
    ) -> Result<()> {
        self.enter()?;
        self.check_alloc(f(), requested, during)
    }

    /// Looks up one kernel of a loaded module (the caller entered).
    fn get_function(&self, module: sys::CUmodule, name: &str) -> Result<sys::CUfunction> {
        let c_name = CString::new(name).map_err(|_| Error::NoSuchKernel(name.to_owned()))?;
        let mut f: sys::CUfunction = ptr::null_mut();
        // SAFETY: the context is current (the caller entered); `module` is a
        // loaded module, `c_name` a NUL-terminated string and `f` a valid
        // out-pointer.
        match unsafe { sys::cuModuleGetFunction(&mut f, module, c_name.as_ptr()) } {
            CUresult::CUDA_ERROR_NOT_FOUND => Err(Error::NoSuchKernel(name.to_owned())),
            r => self.check(r, "cuModuleGetFunction").map(|()| f),
        }
    }
}

impl Drop for CudaDriver {
    fn drop(&mut self) {
        // Bind even after a sticky error: unloading and releasing are still
        // owed. Errors are ignored: there is no one to report them to.
        // SAFETY: `ctx` is still retained by this driver.
        let r = unsafe { sys::cuCtxSetCurrent(self.ctx as usize as sys::CUcontext) };
        if r == CUresult::CUDA_SUCCESS {
            for module in self.modules.get_mut().drain(..) {
                // SAFETY: each module was loaded by this driver into its
                // context, which is current, and is unloaded once.
                let _ = unsafe { sys::cuModuleUnload(module as usize as sys::CUmodule) };
            }
        }
        // SAFETY: this driver retained the primary context once in `new` and
        // releases it once, here.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
        if BOUND_DRIVER.get() == self.id {
            BOUND_DRIVER.set(0);
        }
    }
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
            sys::cuEventElapsedTime(&mut ms, cu_event(start), cu_event(end))
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
        let access = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: self.device,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: `pool` is the other device's default pool; `access` is one
        // descriptor, alive for the call.
        self.call("cuMemPoolSetAccess", || unsafe {
            sys::cuMemPoolSetAccess(pool, &access, 1)
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
        self.call("cuGraphExecDestroy", || unsafe {
            sys::cuGraphExecDestroy(cu_graph_exec(g))
        })
    }

    fn capture_set_deps(&self, s: RawStream, deps: &[RawNode]) -> Result<()> {
        let mut nodes: Nodes = deps.iter().copied().collect();
        // SAFETY: `call` made the context current; `s` belongs to this
        // driver; `nodes` holds `deps.len()` node handles of the graph being
        // captured on `s` (from `capture_tail`), which the driver reads
        // during the call only (`RawNode` is a `CUgraphNode` as an integer,
        // of the same size).
        self.call("cuStreamUpdateCaptureDependencies", || unsafe {
            sys::cuStreamUpdateCaptureDependencies(
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
            sys::cuStreamGetCaptureInfo_v2(
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
