//! The one-time probe: the library loads, exports every function the
//! backend calls, and `cuInit` finds a device (see the module above).

use super::error::error_name;
use cudarc::driver::sys::{self, CUresult};
use std::ffi::c_void;
use std::sync::OnceLock;

/// Every driver function this backend calls, by the name cudarc (or
/// `compat`) loads. Checked before the first call, because cudarc panics on
/// a missing symbol.
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
    "cuMemPoolSetAccess",
    "cuDeviceCanAccessPeer",
    "cuCtxEnablePeerAccess",
    "cuMemcpyPeerAsync",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuPointerGetAttribute",
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
    "cuStreamGetCaptureInfo_v2",
    "cuStreamUpdateCaptureDependencies",
    "cuGraphInstantiateWithFlags",
    "cuGraphDestroy",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphCreate",
    "cuGraphAddKernelNode_v2",
    "cuGraphAddMemcpyNode",
    "cuGraphAddMemsetNode",
    "cuGraphExecKernelNodeSetParams_v2",
];

/// Result of the one-time probe of the library and the driver: the device
/// count, or why there is no usable driver.
pub(super) fn driver_probe() -> &'static Result<i32, String> {
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
    if r != CUresult::CUDA_SUCCESS {
        return Err(format!("cuInit failed: {} ({})", error_name(r), r as u32));
    }
    let mut count: i32 = 0;
    // SAFETY: the driver is initialised; `count` is a valid out-pointer.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    if r != CUresult::CUDA_SUCCESS {
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

/// How many devices the driver reports. The probe runs once (loading the
/// library and calling `cuInit`); later calls read the cached answer. Never
/// panics.
pub(crate) fn device_count() -> crate::error::Result<usize> {
    match driver_probe() {
        Ok(n) => Ok(*n as usize),
        Err(e) => Err(crate::error::Error::NoDevice(e.clone())),
    }
}

/// Whether a CUDA driver and at least one device are present (see
/// [`device_count`]).
#[cfg(test)]
pub(crate) fn cuda_available() -> bool {
    driver_probe().is_ok()
}
