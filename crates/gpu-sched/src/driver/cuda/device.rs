//! The driver of one CUDA device: opening it, its primary context made
//! current on each calling thread, the call helpers every driver call goes
//! through, and its release.

use super::error::check_free;
use super::probe::driver_probe;
use crate::driver::Driver;
use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUresult};
use parking_lot::Mutex;
use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static NEXT_DRIVER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The id of the driver whose context this thread made current last
    /// (0: none).
    pub(super) static BOUND_DRIVER: Cell<u64> = const { Cell::new(0) };
}

/// The CUDA backend for one device: its retained primary context and the
/// modules loaded into it.
///
/// Handles are integers and the context is made current per calling thread,
/// so the driver is `Send + Sync` without `unsafe impl`.
#[derive(Debug)]
pub(crate) struct CudaDriver {
    /// Unique per driver, never reused: the thread-local binding cache key.
    pub(super) id: u64,
    /// The device ordinal.
    pub(super) ordinal: usize,
    /// The `CUdevice`.
    pub(super) device: sys::CUdevice,
    /// The retained primary `CUcontext`, as an integer.
    pub(super) ctx: u64,
    pub(super) name: String,
    pub(super) total_memory: usize,
    /// The first sticky error: code and name.
    pub(super) sticky: OnceLock<(i32, String)>,
    /// Loaded `CUmodule`s, unloaded on drop.
    pub(super) modules: Mutex<Vec<u64>>,
    /// Graphs built through the explicit API (`graph_build`), by their
    /// executable graph: the `CUgraph` they were made from and its nodes,
    /// kept for `cuGraphExecKernelNodeSetParams` and destroyed with the
    /// executable graph.
    pub(super) built: Mutex<std::collections::HashMap<u64, (u64, Vec<u64>)>>,
    /// (major, minor), for NVRTC's target.
    pub(super) compute_capability: (i32, i32),
    /// The context's greatest stream priority, asked once
    /// (`cuCtxGetStreamPriorityRange`).
    pub(super) greatest_priority: OnceLock<i32>,
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
            greatest_priority: OnceLock::new(),
            id: NEXT_DRIVER_ID.fetch_add(1, Ordering::Relaxed),
            ordinal,
            device,
            ctx: ctx as usize as u64,
            name,
            total_memory,
            sticky: OnceLock::new(),
            modules: Mutex::new(Vec::new()),
            built: Mutex::new(std::collections::HashMap::new()),
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
    pub(super) fn enter(&self) -> Result<()> {
        self.check_sticky()?;
        if BOUND_DRIVER.get() != self.id {
            return self.bind();
        }
        Ok(())
    }

    /// Makes the context current on this thread.
    #[cold]
    pub(super) fn bind(&self) -> Result<()> {
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
    pub(super) fn call(&self, during: &'static str, f: impl FnOnce() -> CUresult) -> Result<()> {
        self.enter()?;
        self.check(timed(during, f), during)
    }

    /// [`Self::call`] for a query: `Ok(false)` when not ready yet.
    #[inline]
    pub(super) fn query(&self, during: &'static str, f: impl FnOnce() -> CUresult) -> Result<bool> {
        self.enter()?;
        self.ready(timed(during, f), during)
    }

    /// [`Self::call`] for an allocation of `requested` bytes: out of memory
    /// is [`Error::OutOfMemory`].
    #[inline]
    pub(super) fn call_alloc(
        &self,
        during: &'static str,
        requested: usize,
        f: impl FnOnce() -> CUresult,
    ) -> Result<()> {
        self.enter()?;
        self.check_alloc(timed(during, f), requested, during)
    }

    /// Looks up one kernel of a loaded module (the caller entered).
    pub(super) fn get_function(
        &self,
        module: sys::CUmodule,
        name: &str,
    ) -> Result<sys::CUfunction> {
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

/// `GPU_SLOW_CALLS_US`, read once: report every driver call that takes at
/// least this many microseconds (a diagnostic: which call holds a task's
/// thread, and when; DESIGN "Cold start"). Unset or not a number: off.
fn slow_calls() -> Option<(Duration, Instant)> {
    static SLOW: OnceLock<Option<(Duration, Instant)>> = OnceLock::new();
    *SLOW.get_or_init(|| {
        let us: u64 = std::env::var("GPU_SLOW_CALLS_US").ok()?.parse().ok()?;
        Some((Duration::from_micros(us), Instant::now()))
    })
}

/// Runs `f`, a driver call named `during`; with [`slow_calls`] on, says on
/// stderr when it took longer than the threshold: how long, on which
/// thread, and when it began (from the first call of the process).
#[inline]
fn timed(during: &'static str, f: impl FnOnce() -> CUresult) -> CUresult {
    let Some((threshold, origin)) = slow_calls() else {
        return f();
    };
    let begun = Instant::now();
    let r = f();
    let took = begun.elapsed();
    if took >= threshold {
        let me = std::thread::current();
        eprintln!(
            "gpu: slow driver call {during}: {:.3} ms, begun at {:.3} ms, on {}",
            took.as_secs_f64() * 1e3,
            begun.duration_since(origin).as_secs_f64() * 1e3,
            me.name().unwrap_or("an unnamed thread")
        );
    }
    r
}
