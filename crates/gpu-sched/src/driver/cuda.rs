//! The CUDA backend: the driver API through cudarc's raw layer
//! (`cudarc::driver::sys`), loaded at run time.
//!
//! Every raw driver call of the crate is in this file. Nothing here tracks
//! anything: cudarc's safe types (and their per-slice events) are not used.
//!
//! # The library and the device
//!
//! cudarc panics when a function is called and `libcuda` cannot be loaded, and
//! again when a symbol is missing. [`CudaDriver::new`] therefore checks first,
//! with cudarc's own search (`sys::is_culib_present`, the same names in the
//! same order as the loader that panics), that the library loads, then that
//! it exports every function this file calls ([`REQUIRED_SYMBOLS`]); only
//! then does it call `cuInit`. Each failure is [`Error::NoDevice`].
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
    BackendKind, Driver, KernelArg, LaunchConfig, MemAccess, RawEvent, RawGraph, RawKernel,
    RawStream, SyncMode,
};
use crate::error::{Error, Result};
use crate::module::Module;
use cudarc::driver::sys;
use parking_lot::Mutex;
use std::borrow::Cow;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The most arguments [`Driver::launch`] passes (they live in a stack array).
pub(crate) const MAX_KERNEL_ARGS: usize = 16;

/// How long [`SyncMode::SpinThenYield`] polls a stream in a busy loop before
/// it yields the thread between polls.
const SPIN_FOR: Duration = Duration::from_micros(10);

/// Every driver function this file calls, by the name cudarc loads. Checked
/// before the first call, because cudarc panics on a missing symbol.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuGetErrorName",
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuStreamWriteValue32_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuDeviceGetDefaultMemPool",
    "cuMemPoolSetAttribute",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD32Async",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphDestroy",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
];

// `CUresult` codes as integers. Results are turned into integers at once and
// matched as integers, so a code this cudarc version does not list (a newer
// driver) takes the generic path.
const CUDA_SUCCESS: u32 = sys::CUresult::CUDA_SUCCESS as u32;
const CUDA_ERROR_OUT_OF_MEMORY: u32 = sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32;
const CUDA_ERROR_NOT_READY: u32 = sys::CUresult::CUDA_ERROR_NOT_READY as u32;
const CUDA_ERROR_NOT_FOUND: u32 = sys::CUresult::CUDA_ERROR_NOT_FOUND as u32;
const CUDA_ERROR_INVALID_PTX: u32 = sys::CUresult::CUDA_ERROR_INVALID_PTX as u32;

/// Codes after which the context is unusable until the process exits (the
/// driver documents each as leaving the process in an inconsistent state).
const STICKY_CODES: &[u32] = &[
    sys::CUresult::CUDA_ERROR_ECC_UNCORRECTABLE as u32,
    sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS as u32,
    sys::CUresult::CUDA_ERROR_LAUNCH_TIMEOUT as u32,
    sys::CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED as u32,
    sys::CUresult::CUDA_ERROR_ASSERT as u32,
    sys::CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR as u32,
    sys::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION as u32,
    sys::CUresult::CUDA_ERROR_MISALIGNED_ADDRESS as u32,
    sys::CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE as u32,
    sys::CUresult::CUDA_ERROR_INVALID_PC as u32,
    sys::CUresult::CUDA_ERROR_LAUNCH_FAILED as u32,
    sys::CUresult::CUDA_ERROR_EXTERNAL_DEVICE as u32,
];

/// Whether `code` breaks the context for good.
fn is_sticky_code(code: u32) -> bool {
    STICKY_CODES.contains(&code)
}

/// The driver's name for `r` (`CUDA_ERROR_...`).
#[cold]
fn error_name(r: sys::CUresult) -> String {
    let mut name: *const c_char = ptr::null();
    // SAFETY: `r` came from a driver call, so the library is loaded and
    // `cuGetErrorName` was checked to exist; it needs no context and writes
    // one pointer to a static NUL-terminated string (or fails).
    let ok = unsafe { sys::cuGetErrorName(r, &mut name) } as u32 == CUDA_SUCCESS;
    if ok && !name.is_null() {
        // SAFETY: on success `name` points to a static NUL-terminated string
        // owned by the driver.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("CUDA_ERROR_{}", r as u32)
    }
}

/// Result of the one-time probe of the library and the driver: the device
/// count, or why there is no usable driver.
fn driver_probe() -> &'static Result<i32, String> {
    static PROBE: OnceLock<Result<i32, String>> = OnceLock::new();
    PROBE.get_or_init(probe_driver)
}

/// The environment variable that sets how many hardware queues CUDA maps
/// streams onto.
pub(crate) const MAX_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

fn probe_driver() -> Result<i32, String> {
    // SAFETY: loading libcuda runs its initialisers, as cudarc's own loader
    // would; the handles are closed again at once.
    if !unsafe { sys::is_culib_present() } {
        let mut names = cudarc::get_lib_name_candidates("cuda");
        names.extend(cudarc::get_lib_name_candidates("nvcuda"));
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        return Err(format!(
            "the CUDA driver library could not be loaded (searched for {})",
            names.join(", ")
        ));
    }
    // SAFETY: `is_culib_present` loaded one of the names `culib` tries, in the
    // same order, so `culib` finds a library and does not panic.
    let lib = unsafe { sys::culib() };
    for name in REQUIRED_SYMBOLS {
        // SAFETY: only the symbol's presence is checked; the pointer type is
        // irrelevant and the symbol is never called through it.
        if unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_err() {
            return Err(format!(
                "the CUDA driver library lacks `{name}`; the driver is too old"
            ));
        }
    }
    // CUDA maps streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues
    // (default 8): with more busy streams than queues, one stream's kernel
    // can wait behind another's, which serializes siblings and can deadlock
    // work that waits on the host (a gate). A scheduler with hundreds of
    // streams wants the most the driver allows, 32: set it when the user
    // has not (read once, when the context is created). A value the user
    // set is kept.
    if std::env::var_os(MAX_CONNECTIONS).is_none() {
        std::env::set_var(MAX_CONNECTIONS, "32");
    }
    // SAFETY: the library and every symbol used here are present.
    let r = unsafe { sys::cuInit(0) };
    if r as u32 != CUDA_SUCCESS {
        return Err(format!("cuInit failed: {} ({})", error_name(r), r as u32));
    }
    let mut count: i32 = 0;
    // SAFETY: the driver is initialised; `count` is a valid out-pointer.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    if r as u32 != CUDA_SUCCESS {
        return Err(format!(
            "cuDeviceGetCount failed: {} ({})",
            error_name(r),
            r as u32
        ));
    }
    if count <= 0 {
        return Err("the CUDA driver reports no device".to_owned());
    }
    Ok(count)
}

/// Whether a CUDA driver and at least one device are present. The probe runs
/// once (loading the library and calling `cuInit`); later calls read the
/// cached answer. Never panics.
pub(crate) fn cuda_available() -> bool {
    driver_probe().is_ok()
}

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

        let mut pools: i32 = 0;
        // SAFETY: `device` is a valid device; `pools` is a valid out-pointer.
        let r = unsafe {
            sys::cuDeviceGetAttribute(
                &mut pools,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                device,
            )
        };
        check_free(r, "cuDeviceGetAttribute")?;
        if pools == 0 {
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

        let driver = CudaDriver {
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
        self.enter()?;
        let mut pool: sys::CUmemoryPool = ptr::null_mut();
        // SAFETY: the context is current; `pool` is a valid out-pointer.
        let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, self.device) };
        self.check(r, "cuDeviceGetDefaultMemPool")?;
        let mut value: u64 = bytes;
        // SAFETY: `pool` is the device's default pool; the release threshold
        // attribute reads a `cuuint64_t` through `value`, which lives for the
        // call.
        let r = unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )
        };
        self.check(r, "cuMemPoolSetAttribute")
    }

    /// The sticky-error check and the context binding, done before every
    /// driver call: one atomic load and one thread-local read on the hot path.
    #[inline]
    fn enter(&self) -> Result<()> {
        if let Some((code, name)) = self.sticky.get() {
            return Err(sticky_error(*code, name));
        }
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

    /// Maps a driver result to `Ok` or the error for it.
    #[inline]
    fn check(&self, r: sys::CUresult, during: &'static str) -> Result<()> {
        if r as u32 == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.fail(r, during))
        }
    }

    /// As [`Self::check`], with out-of-memory reported as such.
    #[inline]
    fn check_alloc(&self, r: sys::CUresult, requested: usize, during: &'static str) -> Result<()> {
        match r as u32 {
            CUDA_SUCCESS => Ok(()),
            CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory { requested, during }),
            _ => Err(self.fail(r, during)),
        }
    }

    /// The error for a failed call; remembers the first sticky one.
    #[cold]
    fn fail(&self, r: sys::CUresult, during: &'static str) -> Error {
        let code = r as u32;
        if is_sticky_code(code) {
            let (code, name) = self.sticky.get_or_init(|| (code as i32, error_name(r)));
            sticky_error(*code, name)
        } else {
            Error::Driver {
                code: code as i32,
                name: error_name(r),
                during,
            }
        }
    }

    /// Looks up one kernel of a loaded module.
    fn get_function(&self, module: sys::CUmodule, name: &str) -> Result<sys::CUfunction> {
        let c_name = CString::new(name).map_err(|_| Error::NoSuchKernel(name.to_owned()))?;
        let mut f: sys::CUfunction = ptr::null_mut();
        // SAFETY: the context is current (the caller entered); `module` is a
        // loaded module, `c_name` a NUL-terminated string and `f` a valid
        // out-pointer.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, module, c_name.as_ptr()) };
        if r as u32 == CUDA_ERROR_NOT_FOUND {
            return Err(Error::NoSuchKernel(name.to_owned()));
        }
        self.check(r, "cuModuleGetFunction")?;
        Ok(f)
    }
}

#[cold]
fn sticky_error(code: i32, name: &str) -> Error {
    Error::StickyDeviceError {
        code,
        name: name.to_owned(),
    }
}

/// `check` for calls made before a driver exists (setup).
fn check_free(r: sys::CUresult, during: &'static str) -> Result<()> {
    if r as u32 == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            code: r as u32 as i32,
            name: error_name(r),
            during,
        })
    }
}

impl Drop for CudaDriver {
    fn drop(&mut self) {
        // Bind even after a sticky error: unloading and releasing are still
        // owed. Errors are ignored: there is no one to report them to.
        // SAFETY: `ctx` is still retained by this driver.
        let r = unsafe { sys::cuCtxSetCurrent(self.ctx as usize as sys::CUcontext) };
        if r as u32 == CUDA_SUCCESS {
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
        self.enter()?;
        let mut s: sys::CUstream = ptr::null_mut();
        // SAFETY: the context is current; `s` is a valid out-pointer.
        let r = unsafe {
            sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        };
        self.check(r, "cuStreamCreate")?;
        Ok(RawStream(s as usize as u64))
    }

    fn destroy_stream(&self, s: RawStream) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; the caller passes a stream of this
        // driver that it no longer uses.
        let r = unsafe { sys::cuStreamDestroy_v2(cu_stream(s)) };
        self.check(r, "cuStreamDestroy")
    }

    fn check_sticky(&self) -> Result<()> {
        match self.sticky.get() {
            Some((code, name)) => Err(sticky_error(*code, name)),
            None => Ok(()),
        }
    }

    fn write_value(&self, s: RawStream, dptr: u64, value: u32) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `s` belongs to this driver and
        // `dptr` is the device address of live mapped pinned memory with 4
        // bytes to write (the caller's contract); default flags: the write
        // follows all prior work of the stream, with a memory barrier.
        let r = unsafe {
            sys::cuStreamWriteValue32_v2(
                cu_stream(s),
                dptr as sys::CUdeviceptr,
                value,
                sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
            )
        };
        self.check(r, "cuStreamWriteValue32")
    }

    fn stream_query(&self, s: RawStream) -> Result<bool> {
        self.enter()?;
        // SAFETY: the context is current; `s` is a stream of this driver.
        let r = unsafe { sys::cuStreamQuery(cu_stream(s)) };
        match r as u32 {
            CUDA_SUCCESS => Ok(true),
            CUDA_ERROR_NOT_READY => Ok(false),
            _ => Err(self.fail(r, "cuStreamQuery")),
        }
    }

    fn stream_sync(&self, s: RawStream, mode: SyncMode) -> Result<()> {
        self.enter()?;
        let stream = cu_stream(s);
        match mode {
            SyncMode::Blocking => {
                // SAFETY: the context is current; `s` is a stream of this
                // driver.
                let r = unsafe { sys::cuStreamSynchronize(stream) };
                self.check(r, "cuStreamSynchronize")
            }
            SyncMode::SpinThenYield => {
                let mut spin_since: Option<Instant> = None;
                loop {
                    // SAFETY: the context is current; `s` is a stream of
                    // this driver.
                    let r = unsafe { sys::cuStreamQuery(stream) };
                    match r as u32 {
                        CUDA_SUCCESS => return Ok(()),
                        CUDA_ERROR_NOT_READY => {}
                        _ => return Err(self.fail(r, "cuStreamQuery")),
                    }
                    let since = *spin_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < SPIN_FOR {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
    }

    fn create_event(&self, timing: bool) -> Result<RawEvent> {
        self.enter()?;
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT as u32
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        };
        let mut e: sys::CUevent = ptr::null_mut();
        // SAFETY: the context is current; `e` is a valid out-pointer.
        let r = unsafe { sys::cuEventCreate(&mut e, flags) };
        self.check(r, "cuEventCreate")?;
        Ok(RawEvent(e as usize as u64))
    }

    fn destroy_event(&self, e: RawEvent) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; the caller passes an event of this
        // driver that it no longer uses.
        let r = unsafe { sys::cuEventDestroy_v2(cu_event(e)) };
        self.check(r, "cuEventDestroy")
    }

    fn record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `e` and `s` belong to this driver.
        let r = unsafe { sys::cuEventRecord(cu_event(e), cu_stream(s)) };
        self.check(r, "cuEventRecord")
    }

    fn wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `s` and `e` belong to this driver;
        // flags 0 is the only documented value.
        let r = unsafe { sys::cuStreamWaitEvent(cu_stream(s), cu_event(e), 0) };
        self.check(r, "cuStreamWaitEvent")
    }

    fn wait_event_in_capture(&self, s: RawStream, e: RawEvent) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `s` and `e` belong to this driver;
        // CU_EVENT_WAIT_EXTERNAL makes the captured wait an external-event
        // node, the documented way to wait on an event recorded outside the
        // capture.
        let r = unsafe {
            sys::cuStreamWaitEvent(
                cu_stream(s),
                cu_event(e),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_EXTERNAL as u32,
            )
        };
        self.check(r, "cuStreamWaitEvent (in a capture)")
    }

    fn event_sync(&self, e: RawEvent) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `e` belongs to this driver.
        let r = unsafe { sys::cuEventSynchronize(cu_event(e)) };
        self.check(r, "cuEventSynchronize")
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        self.enter()?;
        // SAFETY: the context is current; `e` belongs to this driver.
        let r = unsafe { sys::cuEventQuery(cu_event(e)) };
        match r as u32 {
            CUDA_SUCCESS => Ok(true),
            CUDA_ERROR_NOT_READY => Ok(false),
            _ => Err(self.fail(r, "cuEventQuery")),
        }
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        self.enter()?;
        let mut ms: f32 = 0.0;
        // SAFETY: the context is current; both events belong to this driver;
        // `ms` is a valid out-pointer.
        let r = unsafe { sys::cuEventElapsedTime(&mut ms, cu_event(start), cu_event(end)) };
        self.check(r, "cuEventElapsedTime")?;
        Ok(ms)
    }

    fn alloc(&self, bytes: usize, s: RawStream) -> Result<u64> {
        self.enter()?;
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: the context is current; `s` belongs to this driver; `dptr`
        // is a valid out-pointer. Zero bytes are rounded up to one so that
        // every allocation has its own address.
        let r = unsafe { sys::cuMemAllocAsync(&mut dptr, bytes.max(1), cu_stream(s)) };
        self.check_alloc(r, bytes, "cuMemAllocAsync")?;
        Ok(dptr)
    }

    fn free(&self, ptr: u64, _bytes: usize, s: RawStream) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; the caller passes an allocation of
        // `alloc` that nothing uses once `s` reaches this point.
        let r = unsafe { sys::cuMemFreeAsync(ptr, cu_stream(s)) };
        self.check(r, "cuMemFreeAsync")
    }

    fn alloc_host(&self, bytes: usize, mapped: bool) -> Result<(*mut u8, u64)> {
        self.enter()?;
        let mut flags = sys::CU_MEMHOSTALLOC_PORTABLE;
        if mapped {
            flags |= sys::CU_MEMHOSTALLOC_DEVICEMAP;
        }
        let mut host: *mut c_void = ptr::null_mut();
        // SAFETY: the context is current; `host` is a valid out-pointer.
        // Zero bytes are rounded up to one (a distinct, non-null address).
        let r = unsafe { sys::cuMemHostAlloc(&mut host, bytes.max(1), flags) };
        self.check_alloc(r, bytes, "cuMemHostAlloc")?;
        if !mapped {
            return Ok((host.cast(), 0));
        }
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `host` was just allocated with `DEVICEMAP`; flags must be 0.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, host, 0) };
        if let Err(e) = self.check(r, "cuMemHostGetDevicePointer") {
            // SAFETY: `host` was allocated above and is not handed out.
            let _ = unsafe { sys::cuMemFreeHost(host) };
            return Err(e);
        }
        Ok((host.cast(), dptr))
    }

    fn free_host(&self, ptr: *mut u8, _bytes: usize) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        self.enter()?;
        // SAFETY: the caller passes memory of `alloc_host` that no pending
        // copy or kernel uses any more.
        let r = unsafe { sys::cuMemFreeHost(ptr.cast()) };
        self.check(r, "cuMemFreeHost")
    }

    fn copy_htod(&self, dst: u64, src: *const u8, bytes: usize, s: RawStream) -> Result<()> {
        self.enter()?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the context is current; the caller guarantees `dst` and
        // `src` are live for `bytes` and that pinned `src` outlives the copy.
        let r = unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), bytes, cu_stream(s)) };
        self.check(r, "cuMemcpyHtoDAsync")
    }

    fn copy_dtoh(&self, dst: *mut u8, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        self.enter()?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the context is current; the caller guarantees `dst` and
        // `src` are live for `bytes` and that `dst` outlives the copy.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, cu_stream(s)) };
        self.check(r, "cuMemcpyDtoHAsync")
    }

    fn copy_dtod(&self, dst: u64, src: u64, bytes: usize, s: RawStream) -> Result<()> {
        self.enter()?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the context is current; the caller guarantees both ranges
        // are live allocations of at least `bytes`.
        let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, cu_stream(s)) };
        self.check(r, "cuMemcpyDtoDAsync")
    }

    fn memset_u32(&self, dst: u64, value: u32, count: usize, s: RawStream) -> Result<()> {
        self.enter()?;
        if count == 0 {
            return Ok(());
        }
        // SAFETY: the context is current; the caller guarantees `dst` is a
        // live, 4-byte aligned allocation of at least `count` words.
        let r = unsafe { sys::cuMemsetD32Async(dst, value, count, cu_stream(s)) };
        self.check(r, "cuMemsetD32Async")
    }

    fn load_module(&self, m: &Module) -> Result<Vec<RawKernel>> {
        self.enter()?;
        if let Some(k) = m.kernels.iter().find(|k| k.params.len() > MAX_KERNEL_ARGS) {
            return Err(too_many_args(k.name, k.params.len()));
        }
        let image: Cow<'_, CStr> = match CStr::from_bytes_with_nul(m.ptx.as_bytes()) {
            Ok(c) => Cow::Borrowed(c),
            Err(_) => Cow::Owned(CString::new(m.ptx).map_err(|_| Error::Driver {
                code: CUDA_ERROR_INVALID_PTX as i32,
                name: "CUDA_ERROR_INVALID_PTX".to_owned(),
                during: "cuModuleLoadData (the PTX text holds a NUL byte; not sent)",
            })?),
        };
        let mut module: sys::CUmodule = ptr::null_mut();
        // SAFETY: the context is current; `image` is NUL-terminated PTX text
        // that lives for the call; `module` is a valid out-pointer.
        let r = unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) };
        self.check(r, "cuModuleLoadData")?;
        let mut kernels = Vec::with_capacity(m.kernels.len());
        for k in m.kernels {
            match self.get_function(module, k.name) {
                Ok(f) => kernels.push(RawKernel {
                    handle: f as usize as u64,
                    host: k.host,
                }),
                Err(e) => {
                    // SAFETY: `module` was loaded above and no function of it
                    // was handed out.
                    let _ = unsafe { sys::cuModuleUnload(module) };
                    return Err(e);
                }
            }
        }
        self.modules.lock().push(module as usize as u64);
        Ok(kernels)
    }

    fn launch(
        &self,
        k: RawKernel,
        cfg: LaunchConfig,
        args: &[KernelArg],
        _accesses: &[MemAccess],
        s: RawStream,
    ) -> Result<()> {
        self.enter()?;
        let mut slots = [ArgSlot::ZERO; MAX_KERNEL_ARGS];
        let mut params = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        pack_args(args, &mut slots, &mut params)?;
        let [gx, gy, gz] = cfg.grid;
        let [bx, by, bz] = cfg.block;
        // SAFETY: the context is current; `k.handle` is a `CUfunction` of a
        // module this driver loaded (kept until drop); `params` holds one
        // pointer per argument into `slots`, both alive for the call (the
        // driver copies the values before returning); the caller guarantees
        // the arguments match the kernel's parameters and every pointer
        // argument is a live allocation.
        let r = unsafe {
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
        };
        self.check(r, "cuLaunchKernel")
    }

    fn begin_capture(&self, s: RawStream) -> Result<()> {
        self.enter()?;
        // Relaxed: the capturing thread may still synchronize other streams
        // and events, which a hand-off onto a capturing stream does (R9:
        // "where a device wait is impossible, the host synchronizes").
        // SAFETY: the context is current; `s` belongs to this driver.
        let r = unsafe {
            sys::cuStreamBeginCapture_v2(
                cu_stream(s),
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        };
        self.check(r, "cuStreamBeginCapture")
    }

    fn end_capture(&self, s: RawStream) -> Result<RawGraph> {
        self.enter()?;
        let mut graph: sys::CUgraph = ptr::null_mut();
        // SAFETY: the context is current; `s` belongs to this driver;
        // `graph` is a valid out-pointer.
        let r = unsafe { sys::cuStreamEndCapture(cu_stream(s), &mut graph) };
        self.check(r, "cuStreamEndCapture")?;
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

    fn graph_launch(&self, g: RawGraph, s: RawStream) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; `g` is an executable graph of this
        // driver and `s` one of its streams.
        let r = unsafe { sys::cuGraphLaunch(cu_graph_exec(g), cu_stream(s)) };
        self.check(r, "cuGraphLaunch")
    }

    fn graph_destroy(&self, g: RawGraph) -> Result<()> {
        self.enter()?;
        // SAFETY: the context is current; the caller passes an executable
        // graph of this driver that it no longer launches.
        let r = unsafe { sys::cuGraphExecDestroy(cu_graph_exec(g)) };
        self.check(r, "cuGraphExecDestroy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{KernelDef, Param};
    use std::process::Command;

    // The test kernels, compiled by NVRTC 12.0 (`cargo xtask ptx`'s options:
    // `--gpu-architecture=compute_70 --std=c++17`); the unused `.global`
    // constants NVRTC emits and its comments are stripped from the PTX.
    //
    // extern "C" __global__ void probe_args(unsigned long long* out, unsigned long long a,
    //                                       unsigned int b, int c, float d, double e) {
    //     if (blockIdx.x == 0 && threadIdx.x == 0) {
    //         out[0] = a;
    //         out[1] = b;
    //         out[2] = (unsigned long long)(long long)c;
    //         out[3] = __float_as_uint(d);
    //         out[4] = (unsigned long long)__double_as_longlong(e);
    //     }
    // }
    //
    // extern "C" __global__ void add_u32(unsigned int* p, unsigned int v, unsigned long long n) {
    //     unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    //     for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    //          i < n; i += stride) {
    //         p[i] += v;
    //     }
    // }
    //
    // extern "C" __global__ void sum15(unsigned int* out,
    //     unsigned int a1, unsigned int a2, unsigned int a3, unsigned int a4, unsigned int a5,
    //     unsigned int a6, unsigned int a7, unsigned int a8, unsigned int a9, unsigned int a10,
    //     unsigned int a11, unsigned int a12, unsigned int a13, unsigned int a14, unsigned int a15) {
    //     if (blockIdx.x == 0 && threadIdx.x == 0) {
    //         *out = a1 + 2u * a2 + 3u * a3 + 4u * a4 + 5u * a5 + 6u * a6 + 7u * a7 + 8u * a8
    //              + 9u * a9 + 10u * a10 + 11u * a11 + 12u * a12 + 13u * a13 + 14u * a14 + 15u * a15;
    //     }
    // }
    //
    // extern "C" __global__ void wait_flag(const volatile unsigned int* flag, unsigned int* timed_out,
    //                                      unsigned long long max_cycles) {
    //     long long start = clock64();
    //     while (*flag == 0) {
    //         if ((unsigned long long)(clock64() - start) > max_cycles) {
    //             *timed_out = 1;
    //             return;
    //         }
    //     }
    // }
    const TEST_PTX: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry probe_args(
	.param .u64 probe_args_param_0,
	.param .u64 probe_args_param_1,
	.param .u32 probe_args_param_2,
	.param .u32 probe_args_param_3,
	.param .f32 probe_args_param_4,
	.param .f64 probe_args_param_5
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<2>;
	.reg .b32 	%r<7>;
	.reg .f64 	%fd<2>;
	.reg .b64 	%rd<7>;
	ld.param.u64 	%rd1, [probe_args_param_0];
	ld.param.u64 	%rd2, [probe_args_param_1];
	ld.param.u32 	%r1, [probe_args_param_2];
	ld.param.u32 	%r2, [probe_args_param_3];
	ld.param.f32 	%f1, [probe_args_param_4];
	ld.param.f64 	%fd1, [probe_args_param_5];
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %ctaid.x;
	or.b32  	%r5, %r4, %r3;
	setp.ne.s32 	%p1, %r5, 0;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	st.global.u64 	[%rd3], %rd2;
	cvt.u64.u32 	%rd4, %r1;
	st.global.u64 	[%rd3+8], %rd4;
	cvt.s64.s32 	%rd5, %r2;
	st.global.u64 	[%rd3+16], %rd5;
	mov.b32 	%r6, %f1;
	cvt.u64.u32 	%rd6, %r6;
	st.global.u64 	[%rd3+24], %rd6;
	st.global.f64 	[%rd3+32], %fd1;
$L__BB0_2:
	ret;
}
.visible .entry add_u32(
	.param .u64 add_u32_param_0,
	.param .u32 add_u32_param_1,
	.param .u64 add_u32_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<15>;
	ld.param.u64 	%rd7, [add_u32_param_0];
	ld.param.u32 	%r1, [add_u32_param_1];
	ld.param.u64 	%rd8, [add_u32_param_2];
	mov.u32 	%r2, %ntid.x;
	cvt.u64.u32 	%rd1, %r2;
	mov.u32 	%r3, %ctaid.x;
	mul.wide.u32 	%rd9, %r3, %r2;
	mov.u32 	%r4, %tid.x;
	cvt.u64.u32 	%rd10, %r4;
	add.s64 	%rd14, %rd9, %rd10;
	setp.ge.u64 	%p1, %rd14, %rd8;
	@%p1 bra 	$L__BB1_3;
	mov.u32 	%r5, %nctaid.x;
	cvt.u64.u32 	%rd11, %r5;
	mul.lo.s64 	%rd3, %rd11, %rd1;
	cvta.to.global.u64 	%rd4, %rd7;
$L__BB1_2:
	shl.b64 	%rd12, %rd14, 2;
	add.s64 	%rd13, %rd4, %rd12;
	ld.global.u32 	%r6, [%rd13];
	add.s32 	%r7, %r6, %r1;
	st.global.u32 	[%rd13], %r7;
	add.s64 	%rd14, %rd14, %rd3;
	setp.lt.u64 	%p2, %rd14, %rd8;
	@%p2 bra 	$L__BB1_2;
$L__BB1_3:
	ret;
}
.visible .entry sum15(
	.param .u64 sum15_param_0,
	.param .u32 sum15_param_1,
	.param .u32 sum15_param_2,
	.param .u32 sum15_param_3,
	.param .u32 sum15_param_4,
	.param .u32 sum15_param_5,
	.param .u32 sum15_param_6,
	.param .u32 sum15_param_7,
	.param .u32 sum15_param_8,
	.param .u32 sum15_param_9,
	.param .u32 sum15_param_10,
	.param .u32 sum15_param_11,
	.param .u32 sum15_param_12,
	.param .u32 sum15_param_13,
	.param .u32 sum15_param_14,
	.param .u32 sum15_param_15
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<36>;
	.reg .b64 	%rd<3>;
	ld.param.u64 	%rd1, [sum15_param_0];
	ld.param.u32 	%r1, [sum15_param_1];
	ld.param.u32 	%r2, [sum15_param_2];
	ld.param.u32 	%r3, [sum15_param_3];
	ld.param.u32 	%r4, [sum15_param_4];
	ld.param.u32 	%r5, [sum15_param_5];
	ld.param.u32 	%r6, [sum15_param_6];
	ld.param.u32 	%r7, [sum15_param_7];
	ld.param.u32 	%r8, [sum15_param_8];
	ld.param.u32 	%r9, [sum15_param_9];
	ld.param.u32 	%r10, [sum15_param_10];
	ld.param.u32 	%r11, [sum15_param_11];
	ld.param.u32 	%r12, [sum15_param_12];
	ld.param.u32 	%r13, [sum15_param_13];
	ld.param.u32 	%r14, [sum15_param_14];
	ld.param.u32 	%r15, [sum15_param_15];
	mov.u32 	%r16, %ctaid.x;
	mov.u32 	%r17, %tid.x;
	or.b32  	%r18, %r16, %r17;
	setp.ne.s32 	%p1, %r18, 0;
	@%p1 bra 	$L__BB2_2;
	cvta.to.global.u64 	%rd2, %rd1;
	shl.b32 	%r19, %r2, 1;
	add.s32 	%r20, %r19, %r1;
	mad.lo.s32 	%r21, %r3, 3, %r20;
	shl.b32 	%r22, %r4, 2;
	add.s32 	%r23, %r21, %r22;
	mad.lo.s32 	%r24, %r5, 5, %r23;
	mad.lo.s32 	%r25, %r6, 6, %r24;
	mad.lo.s32 	%r26, %r7, 7, %r25;
	shl.b32 	%r27, %r8, 3;
	add.s32 	%r28, %r26, %r27;
	mad.lo.s32 	%r29, %r9, 9, %r28;
	mad.lo.s32 	%r30, %r10, 10, %r29;
	mad.lo.s32 	%r31, %r11, 11, %r30;
	mad.lo.s32 	%r32, %r12, 12, %r31;
	mad.lo.s32 	%r33, %r13, 13, %r32;
	mad.lo.s32 	%r34, %r14, 14, %r33;
	mad.lo.s32 	%r35, %r15, 15, %r34;
	st.global.u32 	[%rd2], %r35;
$L__BB2_2:
	ret;
}
.visible .entry wait_flag(
	.param .u64 wait_flag_param_0,
	.param .u64 wait_flag_param_1,
	.param .u64 wait_flag_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<10>;
	ld.param.u64 	%rd6, [wait_flag_param_0];
	ld.param.u64 	%rd7, [wait_flag_param_1];
	ld.param.u64 	%rd4, [wait_flag_param_2];
	cvta.to.global.u64 	%rd1, %rd7;
	cvta.to.global.u64 	%rd2, %rd6;
	// begin inline asm
	mov.u64 	%rd5, %clock64;
	// end inline asm
$L__BB3_1:
	ld.volatile.global.u32 	%r1, [%rd2];
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB3_4;
	// begin inline asm
	mov.u64 	%rd8, %clock64;
	// end inline asm
	sub.s64 	%rd9, %rd8, %rd5;
	setp.le.u64 	%p2, %rd9, %rd4;
	@%p2 bra 	$L__BB3_1;
	mov.u32 	%r2, 1;
	st.global.u32 	[%rd1], %r2;
$L__BB3_4:
	ret;
}
"#;

    /// Never called: the CUDA backend runs the PTX.
    unsafe fn no_host(_: &[KernelArg], _: LaunchConfig) {
        unreachable!("host implementation of a CUDA-only test kernel")
    }

    const PROBE_ARGS: usize = 0;
    const ADD_U32: usize = 1;
    const SUM15: usize = 2;
    const WAIT_FLAG: usize = 3;

    const TEST_MODULE: Module = Module {
        name: "cuda-driver-tests",
        ptx: TEST_PTX,
        kernels: &[
            KernelDef {
                name: "probe_args",
                params: &[
                    Param::PtrWrite,
                    Param::U64,
                    Param::U32,
                    Param::I32,
                    Param::F32,
                    Param::F64,
                ],
                host: no_host,
            },
            KernelDef {
                name: "add_u32",
                params: &[Param::PtrWrite, Param::U32, Param::U64],
                host: no_host,
            },
            KernelDef {
                name: "sum15",
                params: &[
                    Param::PtrWrite,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                    Param::U32,
                ],
                host: no_host,
            },
            KernelDef {
                name: "wait_flag",
                params: &[Param::PtrRead, Param::PtrWrite, Param::U64],
                host: no_host,
            },
        ],
    };

    /// Set in the child process of `sticky_error_is_remembered`.
    const FAULT_CHILD_ENV: &str = "GPU_SCHED_CUDA_FAULT_CHILD";

    /// About ten seconds of GPU clock: the gate kernel gives up after this.
    const GATE_TIMEOUT_CYCLES: u64 = 20_000_000_000;

    fn gpu() -> CudaDriver {
        match CudaDriver::new(0) {
            Ok(d) => d,
            Err(e) => panic!("this test needs a CUDA device: {e}"),
        }
    }

    fn kernels(d: &CudaDriver) -> Vec<RawKernel> {
        let k = d.load_module(&TEST_MODULE).expect("load the test module");
        assert_eq!(k.len(), TEST_MODULE.kernels.len());
        assert!(k.iter().all(|k| k.handle != 0));
        k
    }

    fn read_u32(d: &CudaDriver, src: u64, n: usize, s: RawStream) -> Vec<u32> {
        let mut v = vec![0u32; n];
        d.copy_dtoh(v.as_mut_ptr().cast(), src, n * 4, s)
            .expect("copy_dtoh");
        d.stream_sync(s, SyncMode::Blocking).expect("stream_sync");
        v
    }

    // ---- without a GPU ------------------------------------------------------

    #[test]
    fn new_is_no_device_without_a_driver() {
        let r = CudaDriver::new(0);
        if cuda_available() {
            let d = r.expect("cuda_available() said yes, so new(0) must succeed");
            assert_eq!(d.kind(), BackendKind::Cuda);
        } else {
            match r {
                Err(Error::NoDevice(why)) => assert!(!why.is_empty()),
                other => panic!("expected Error::NoDevice, got {other:?}"),
            }
        }
    }

    #[test]
    fn new_with_a_missing_ordinal_is_no_device() {
        match CudaDriver::new(100_000) {
            Err(Error::NoDevice(_)) => {}
            other => panic!("expected Error::NoDevice, got {other:?}"),
        }
    }

    #[test]
    fn cuda_available_is_stable() {
        assert_eq!(cuda_available(), cuda_available());
    }

    #[test]
    fn sticky_codes_are_classified() {
        assert!(is_sticky_code(
            sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS as u32
        ));
        assert!(is_sticky_code(
            sys::CUresult::CUDA_ERROR_LAUNCH_FAILED as u32
        ));
        assert!(is_sticky_code(sys::CUresult::CUDA_ERROR_ASSERT as u32));
        assert!(!is_sticky_code(CUDA_ERROR_OUT_OF_MEMORY));
        assert!(!is_sticky_code(CUDA_ERROR_NOT_READY));
        assert!(!is_sticky_code(
            sys::CUresult::CUDA_ERROR_INVALID_VALUE as u32
        ));
    }

    #[test]
    fn args_are_packed_by_value_at_offset_zero() {
        let args = [
            KernelArg::Ptr(0xdead_beef_0000_1234),
            KernelArg::U64(u64::MAX - 1),
            KernelArg::U32(0x8000_0001),
            KernelArg::I32(-7),
            KernelArg::F32(1.5),
            KernelArg::F64(-2.25),
        ];
        let mut slots = [ArgSlot::ZERO; MAX_KERNEL_ARGS];
        let mut ptrs = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        pack_args(&args, &mut slots, &mut ptrs).expect("six arguments fit");
        // SAFETY: each pointer points at the slot holding the argument of
        // that index, written with the type read back here.
        unsafe {
            assert_eq!(*ptrs[0].cast::<u64>(), 0xdead_beef_0000_1234);
            assert_eq!(*ptrs[1].cast::<u64>(), u64::MAX - 1);
            assert_eq!(*ptrs[2].cast::<u32>(), 0x8000_0001);
            assert_eq!(*ptrs[3].cast::<i32>(), -7);
            assert_eq!(*ptrs[4].cast::<f32>(), 1.5);
            assert_eq!(*ptrs[5].cast::<f64>(), -2.25);
        }
        assert!(ptrs[6..].iter().all(|p| p.is_null()));
        for (i, p) in ptrs.iter().take(args.len()).enumerate() {
            assert_eq!(p.cast_const(), ptr::addr_of!(slots[i]).cast::<c_void>());
        }

        let sixteen = [KernelArg::U32(1); MAX_KERNEL_ARGS];
        pack_args(&sixteen, &mut slots, &mut ptrs).expect("sixteen arguments fit");
        let seventeen = [KernelArg::U32(1); MAX_KERNEL_ARGS + 1];
        match pack_args(&seventeen, &mut slots, &mut ptrs) {
            Err(Error::BadKernelArgs { .. }) => {}
            other => panic!("expected Error::BadKernelArgs, got {other:?}"),
        }
    }

    // ---- on a GPU -------------------------------------------------------------

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn device_reports_name_and_memory() {
        assert!(cuda_available());
        let d = gpu();
        assert_eq!(d.kind(), BackendKind::Cuda);
        assert_eq!(d.ordinal(), 0);
        assert!(!d.device_name().is_empty());
        assert!(d.total_memory() > 1 << 30, "{} bytes", d.total_memory());
        d.set_pool_release_threshold(u64::MAX)
            .expect("set the release threshold");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn round_trip_through_the_device() {
        let d = gpu();
        let s = d.create_stream().expect("stream");
        let n = 1 << 20;
        let bytes = n * 4;
        let src: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let a = d.alloc(bytes, s).expect("alloc a");
        let b = d.alloc(bytes, s).expect("alloc b");
        assert_ne!(a, b);
        d.copy_htod(a, src.as_ptr().cast(), bytes, s).expect("htod");
        d.copy_dtod(b, a, bytes, s).expect("dtod");

        // Into pinned memory, synchronised by polling.
        let (pinned, mapped_ptr) = d.alloc_host(bytes, false).expect("pinned host memory");
        assert!(!pinned.is_null());
        assert_eq!(mapped_ptr, 0);
        d.copy_dtoh(pinned, b, bytes, s).expect("dtoh pinned");
        d.stream_sync(s, SyncMode::SpinThenYield)
            .expect("spin sync");
        assert!(d.stream_query(s).expect("query"));
        // SAFETY: `pinned` holds `bytes` bytes, 4-aligned (page-aligned), and
        // the copy into it completed.
        let back = unsafe { std::slice::from_raw_parts(pinned.cast::<u32>(), n) };
        assert_eq!(back, &src[..]);

        // Into pageable memory, synchronised by blocking.
        assert_eq!(read_u32(&d, b, n, s), src);

        d.free_host(pinned, bytes).expect("free pinned");
        d.free(a, bytes, s).expect("free a");
        d.free(b, bytes, s).expect("free b");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn memset_sets_words() {
        let d = gpu();
        let s = d.create_stream().expect("stream");
        let n = 1000;
        let p = d.alloc(n * 4, s).expect("alloc");
        d.memset_u32(p, 0xdead_beef, n, s).expect("memset all");
        d.memset_u32(p + 40, 7, 5, s).expect("memset part");
        let v = read_u32(&d, p, n, s);
        for (i, x) in v.iter().enumerate() {
            let want = if (10..15).contains(&i) {
                7
            } else {
                0xdead_beef
            };
            assert_eq!(*x, want, "word {i}");
        }
        d.free(p, n * 4, s).expect("free");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn kernels_get_every_argument_type() {
        let d = gpu();
        let k = kernels(&d);
        let s = d.create_stream().expect("stream");
        let out = d.alloc(5 * 8, s).expect("alloc");
        d.memset_u32(out, 0, 10, s).expect("memset");
        let args = [
            KernelArg::Ptr(out),
            KernelArg::U64(0x0123_4567_89ab_cdef),
            KernelArg::U32(0xfedc_ba98),
            KernelArg::I32(-5),
            KernelArg::F32(3.5),
            KernelArg::F64(-1.0e100),
        ];
        d.launch(k[PROBE_ARGS], LaunchConfig::linear(1, 32), &args, &[], s)
            .expect("launch probe_args");
        let mut got = [0u64; 5];
        d.copy_dtoh(got.as_mut_ptr().cast(), out, 40, s)
            .expect("dtoh");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        assert_eq!(got[0], 0x0123_4567_89ab_cdef);
        assert_eq!(got[1], 0xfedc_ba98);
        assert_eq!(got[2], (-5i64) as u64);
        assert_eq!(got[3], u64::from(3.5f32.to_bits()));
        assert_eq!(got[4], (-1.0e100f64).to_bits());

        // Sixteen arguments, the most there is room for.
        let mut args = [KernelArg::U32(0); MAX_KERNEL_ARGS];
        args[0] = KernelArg::Ptr(out);
        let mut want = 0u32;
        for (i, arg) in args.iter_mut().enumerate().skip(1) {
            let v = 100 + i as u32;
            *arg = KernelArg::U32(v);
            want += i as u32 * v;
        }
        d.launch(k[SUM15], LaunchConfig::linear(1, 1), &args, &[], s)
            .expect("launch sum15");
        assert_eq!(read_u32(&d, out, 1, s), vec![want]);

        // Seventeen are refused before the driver sees them.
        let too_many = [KernelArg::U32(0); MAX_KERNEL_ARGS + 1];
        match d.launch(k[SUM15], LaunchConfig::linear(1, 1), &too_many, &[], s) {
            Err(Error::BadKernelArgs { .. }) => {}
            other => panic!("expected Error::BadKernelArgs, got {other:?}"),
        }
        d.free(out, 40, s).expect("free");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn mapped_host_memory_is_shared_with_kernels() {
        let d = gpu();
        let k = kernels(&d);
        let s = d.create_stream().expect("stream");
        let n = 4096;
        let (host, dev) = d.alloc_host(n * 4, true).expect("mapped host memory");
        assert!(!host.is_null());
        assert_ne!(dev, 0);
        let words = host.cast::<u32>();
        for i in 0..n {
            // SAFETY: `host` holds `n` words and no device work uses it yet.
            unsafe { words.add(i).write_volatile(i as u32) };
        }
        let args = [
            KernelArg::Ptr(dev),
            KernelArg::U32(5),
            KernelArg::U64(n as u64),
        ];
        d.launch(
            k[ADD_U32],
            LaunchConfig::for_elements(n, 256),
            &args,
            &[],
            s,
        )
        .expect("launch add_u32");
        d.stream_sync(s, SyncMode::SpinThenYield).expect("sync");
        for i in 0..n {
            // SAFETY: the kernel that wrote the words completed.
            let x = unsafe { words.add(i).read_volatile() };
            assert_eq!(x, i as u32 + 5, "word {i}");
        }
        d.free_host(host, n * 4).expect("free host");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn queries_and_waits_follow_a_gate() {
        let d = gpu();
        let k = kernels(&d);
        let a = d.create_stream().expect("stream a");
        let b = d.create_stream().expect("stream b");
        let e = d.create_event(false).expect("event");
        assert!(d.event_query(e).expect("query an unrecorded event"));

        let (gate, gate_dev) = d.alloc_host(8, true).expect("gate");
        let flag = gate.cast::<u32>();
        // SAFETY: `gate` holds two words; no device work uses them yet.
        unsafe {
            flag.write_volatile(0);
            flag.add(1).write_volatile(0);
        }
        let buf = d.alloc(4, b).expect("alloc");
        d.memset_u32(buf, 1, 1, b).expect("memset");
        d.stream_sync(b, SyncMode::Blocking).expect("sync b");

        // a: wait for the gate, then record e. b: wait for e, then add 1.
        let gate_args = [
            KernelArg::Ptr(gate_dev),
            KernelArg::Ptr(gate_dev + 4),
            KernelArg::U64(GATE_TIMEOUT_CYCLES),
        ];
        d.launch(k[WAIT_FLAG], LaunchConfig::linear(1, 1), &gate_args, &[], a)
            .expect("launch wait_flag");
        d.record(e, a).expect("record");
        d.wait_event(b, e).expect("wait_event");
        let add = [KernelArg::Ptr(buf), KernelArg::U32(1), KernelArg::U64(1)];
        d.launch(k[ADD_U32], LaunchConfig::linear(1, 32), &add, &[], b)
            .expect("launch add_u32");

        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !d.event_query(e).expect("query"),
            "the event completed behind a closed gate"
        );
        assert!(
            !d.stream_query(a).expect("query a"),
            "stream a finished behind a closed gate"
        );
        assert!(
            !d.stream_query(b).expect("query b"),
            "stream b did not wait for the event"
        );

        // SAFETY: the word is mapped memory the kernel polls; a volatile
        // write is what it waits for.
        unsafe { flag.write_volatile(1) };
        d.event_sync(e).expect("event_sync");
        assert!(d.event_query(e).expect("query"));
        d.stream_sync(b, SyncMode::SpinThenYield).expect("sync b");
        assert!(d.stream_query(a).expect("query a"));
        // SAFETY: the gate kernel completed.
        let timed_out = unsafe { flag.add(1).read_volatile() };
        assert_eq!(timed_out, 0, "the gate kernel never saw the host's write");
        assert_eq!(read_u32(&d, buf, 1, b), vec![2]);

        d.free(buf, 4, b).expect("free");
        d.stream_sync(b, SyncMode::Blocking).expect("sync b");
        d.free_host(gate, 8).expect("free gate");
        d.destroy_event(e).expect("destroy event");
        d.destroy_stream(a).expect("destroy a");
        d.destroy_stream(b).expect("destroy b");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn timing_events_measure_and_plain_ones_do_not() {
        let d = gpu();
        let k = kernels(&d);
        let s = d.create_stream().expect("stream");
        let start = d.create_event(true).expect("timing event");
        let end = d.create_event(true).expect("timing event");
        let n = 1 << 24;
        let p = d.alloc(n * 4, s).expect("alloc");
        d.record(start, s).expect("record start");
        let args = [
            KernelArg::Ptr(p),
            KernelArg::U32(1),
            KernelArg::U64(n as u64),
        ];
        d.launch(
            k[ADD_U32],
            LaunchConfig::for_elements(n, 256),
            &args,
            &[],
            s,
        )
        .expect("launch");
        d.record(end, s).expect("record end");
        d.event_sync(end).expect("sync end");
        let ms = d.event_elapsed_ms(start, end).expect("elapsed");
        assert!(ms > 0.0 && ms < 10_000.0, "{ms} ms");

        let plain_a = d.create_event(false).expect("event");
        let plain_b = d.create_event(false).expect("event");
        d.record(plain_a, s).expect("record");
        d.record(plain_b, s).expect("record");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        match d.event_elapsed_ms(plain_a, plain_b) {
            Err(Error::Driver { during, .. }) => assert_eq!(during, "cuEventElapsedTime"),
            other => panic!("events without timing must not time: {other:?}"),
        }
        d.free(p, n * 4, s).expect("free");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        for e in [start, end, plain_a, plain_b] {
            d.destroy_event(e).expect("destroy event");
        }
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn captured_graph_replays() {
        let d = gpu();
        let k = kernels(&d);
        let s = d.create_stream().expect("stream");
        let n = 10_000;
        let p = d.alloc(n * 4, s).expect("alloc");
        d.memset_u32(p, 0, n, s).expect("memset");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");

        d.begin_capture(s).expect("begin capture");
        let args = [
            KernelArg::Ptr(p),
            KernelArg::U32(1),
            KernelArg::U64(n as u64),
        ];
        d.launch(
            k[ADD_U32],
            LaunchConfig::for_elements(n, 256),
            &args,
            &[],
            s,
        )
        .expect("captured launch");
        d.memset_u32(p, 100, 1, s).expect("captured memset");
        let g = d.end_capture(s).expect("end capture");
        assert_ne!(g.0, 0);
        // Nothing ran while capturing.
        assert_eq!(read_u32(&d, p, 1, s), vec![0]);

        for _ in 0..3 {
            d.graph_launch(g, s).expect("graph launch");
        }
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        let v = read_u32(&d, p, n, s);
        assert_eq!(v[0], 100);
        assert!(v[1..].iter().all(|&x| x == 3), "{:?}", &v[..8]);

        d.graph_destroy(g).expect("graph destroy");
        d.free(p, n * 4, s).expect("free");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn allocation_errors_are_typed() {
        let d = gpu();
        let s = d.create_stream().expect("stream");
        let huge = 1usize << 46; // 64 TiB
        match d.alloc(huge, s) {
            Err(Error::OutOfMemory { requested, during }) => {
                assert_eq!(requested, huge);
                assert_eq!(during, "cuMemAllocAsync");
            }
            other => panic!("expected Error::OutOfMemory, got {other:?}"),
        }
        // The failure is not sticky: the device still works.
        let z1 = d.alloc(0, s).expect("zero bytes");
        let z2 = d.alloc(0, s).expect("zero bytes");
        assert!(z1 != 0 && z2 != 0 && z1 != z2);
        d.free(z1, 0, s).expect("free");
        d.free(z2, 0, s).expect("free");
        d.stream_sync(s, SyncMode::Blocking).expect("sync");
        d.destroy_stream(s).expect("destroy stream");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn unknown_kernel_is_no_such_kernel() {
        let d = gpu();
        let m = Module {
            name: "missing",
            ptx: TEST_PTX,
            kernels: &[KernelDef {
                name: "not_in_the_ptx",
                params: &[],
                host: no_host,
            }],
        };
        match d.load_module(&m) {
            Err(Error::NoSuchKernel(name)) => assert_eq!(name, "not_in_the_ptx"),
            other => panic!("expected Error::NoSuchKernel, got {other:?}"),
        }
        let bad = Module {
            name: "bad",
            ptx: "this is not PTX",
            kernels: &[],
        };
        match d.load_module(&bad) {
            Err(Error::Driver { during, .. }) => assert_eq!(during, "cuModuleLoadData"),
            other => panic!("expected Error::Driver, got {other:?}"),
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn other_threads_bind_the_context() {
        let d = gpu();
        let k = kernels(&d);
        std::thread::scope(|scope| {
            for t in 0..4u32 {
                let (d, k) = (&d, &k);
                scope.spawn(move || {
                    let s = d.create_stream().expect("stream");
                    let n = 1000;
                    let p = d.alloc(n * 4, s).expect("alloc");
                    d.memset_u32(p, t, n, s).expect("memset");
                    let args = [
                        KernelArg::Ptr(p),
                        KernelArg::U32(10),
                        KernelArg::U64(n as u64),
                    ];
                    d.launch(
                        k[ADD_U32],
                        LaunchConfig::for_elements(n, 128),
                        &args,
                        &[],
                        s,
                    )
                    .expect("launch");
                    assert!(read_u32(d, p, n, s).iter().all(|&x| x == t + 10));
                    d.free(p, n * 4, s).expect("free");
                    d.stream_sync(s, SyncMode::Blocking).expect("sync");
                    d.destroy_stream(s).expect("destroy stream");
                });
            }
        });
    }

    /// Runs `sticky_fault_child` in a child process: a faulting kernel breaks
    /// the context for the whole process, which the other tests share.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sticky_error_is_remembered() {
        let path = concat!(module_path!(), "::sticky_fault_child");
        let name = path.split_once("::").map_or(path, |(_, rest)| rest);
        let exe = std::env::current_exe().expect("the test binary");
        let out = Command::new(exe)
            .args([
                name,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(FAULT_CHILD_ENV, "1")
            .output()
            .expect("run the child test");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 passed"),
            "child did not run:\n{stdout}\n{stderr}"
        );
    }

    /// The child of `sticky_error_is_remembered`; does nothing elsewhere.
    #[test]
    #[ignore = "child process of sticky_error_is_remembered"]
    fn sticky_fault_child() {
        if std::env::var_os(FAULT_CHILD_ENV).is_none() {
            return;
        }
        let d = gpu();
        let k = kernels(&d);
        let s = d.create_stream().expect("stream");
        let e = d.create_event(false).expect("event");
        // Writes to address 16: an illegal address.
        let args = [KernelArg::Ptr(16), KernelArg::U32(1), KernelArg::U64(1)];
        d.launch(k[ADD_U32], LaunchConfig::linear(1, 1), &args, &[], s)
            .expect("the launch itself succeeds");
        let first = match d.stream_sync(s, SyncMode::Blocking) {
            Err(err @ Error::StickyDeviceError { .. }) => err,
            other => panic!("expected Error::StickyDeviceError, got {other:?}"),
        };
        assert!(first.is_sticky());
        let Error::StickyDeviceError { code, .. } = first else {
            unreachable!()
        };
        assert_eq!(code, sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS as i32);
        // Every later call returns the same error without the driver.
        for r in [
            d.record(e, s),
            d.stream_sync(s, SyncMode::SpinThenYield),
            d.create_stream().map(drop),
        ] {
            match r {
                Err(Error::StickyDeviceError { code: later, .. }) => assert_eq!(later, code),
                other => panic!("expected the remembered sticky error, got {other:?}"),
            }
        }
    }
}
