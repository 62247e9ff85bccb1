//! The driver functions whose names cudarc's bindings change with its
//! CUDA-version feature: CUDA 13's headers map `cuEventElapsedTime`,
//! `cuStreamGetCaptureInfo` and `cuStreamUpdateCaptureDependencies` to newer
//! versions (`_v2`, `_v3`, `_v2`, with other parameters), so cudarc's
//! `cuda-13000` and later bindings lack the names the backend calls. These
//! are loaded here by those names from the library cudarc loaded
//! (`sys::culib`), so that the backend compiles with every CUDA-version
//! feature of cudarc (the project's choice, see gpu-sched's `Cargo.toml`)
//! and calls the same driver functions whichever it is; a CUDA 13 driver
//! still exports them (programs built with CUDA 12 call them).

use cudarc::driver::sys::{self, CUevent, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus};
use std::ffi::c_uint;
use std::sync::OnceLock;

/// The function `name` of the driver library, as `F`, loaded once into
/// `slot`.
///
/// # Safety
///
/// The probe found the library and `name` in it (`REQUIRED_SYMBOLS`), and
/// `F` is the function's C type.
unsafe fn load<F: Copy>(slot: &OnceLock<F>, name: &str) -> F {
    *slot.get_or_init(|| {
        // SAFETY: the probe loaded the library (`is_culib_present`, the
        // names `culib` tries, in the same order), so `culib` finds it.
        let lib = unsafe { sys::culib() };
        // SAFETY: `F` is `name`'s C type (this function's contract).
        match unsafe { lib.get::<F>(name.as_bytes()) } {
            Ok(f) => *f,
            // Unreachable: the probe checked `name` before the first call.
            Err(e) => panic!("the CUDA driver library lacks `{name}`: {e}"),
        }
    })
}

/// `cuEventElapsedTime`.
///
/// # Safety
///
/// The driver is probed; the call's own contract (a current context, two
/// recorded events of it, a valid out-pointer).
pub(super) unsafe fn cu_event_elapsed_time(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult {
    type F = unsafe extern "C" fn(*mut f32, CUevent, CUevent) -> CUresult;
    static SLOT: OnceLock<F> = OnceLock::new();
    // SAFETY: `F` is the function's C type; the rest is the caller's.
    unsafe { load(&SLOT, "cuEventElapsedTime")(ms, start, end) }
}

/// `cuStreamGetCaptureInfo_v2`.
///
/// # Safety
///
/// The driver is probed; the call's own contract (a current context, a
/// stream of it, valid or null out-pointers).
pub(super) unsafe fn cu_stream_get_capture_info_v2(
    stream: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut u64,
    graph: *mut sys::CUgraph,
    deps: *mut *const CUgraphNode,
    n: *mut usize,
) -> CUresult {
    type F = unsafe extern "C" fn(
        CUstream,
        *mut CUstreamCaptureStatus,
        *mut u64,
        *mut sys::CUgraph,
        *mut *const CUgraphNode,
        *mut usize,
    ) -> CUresult;
    static SLOT: OnceLock<F> = OnceLock::new();
    // SAFETY: `F` is the function's C type; the rest is the caller's.
    unsafe { load(&SLOT, "cuStreamGetCaptureInfo_v2")(stream, status, id, graph, deps, n) }
}

/// `cuStreamUpdateCaptureDependencies`.
///
/// # Safety
///
/// The driver is probed; the call's own contract (a current context, a
/// capturing stream of it, `n` nodes of its graph at `deps`).
pub(super) unsafe fn cu_stream_update_capture_dependencies(
    stream: CUstream,
    deps: *mut CUgraphNode,
    n: usize,
    flags: c_uint,
) -> CUresult {
    type F = unsafe extern "C" fn(CUstream, *mut CUgraphNode, usize, c_uint) -> CUresult;
    static SLOT: OnceLock<F> = OnceLock::new();
    // SAFETY: `F` is the function's C type; the rest is the caller's.
    unsafe { load(&SLOT, "cuStreamUpdateCaptureDependencies")(stream, deps, n, flags) }
}

/// `CUmemAccessDesc` for a device location, laid out as C lays it out:
/// cudarc's `cuda-13020` and later bindings make `CUmemLocation`'s `id` a
/// field of an anonymous union (CUDA 13.2 added a second, as wide), which
/// the earlier bindings have as a plain field; this one struct is the same
/// bytes for every version.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct MemAccessDesc {
    /// `location.type`.
    pub(super) location_type: sys::CUmemLocationType,
    /// `location.id`: the device ordinal.
    pub(super) id: std::ffi::c_int,
    /// `flags`.
    pub(super) flags: sys::CUmemAccess_flags,
}

const _: () = assert!(
    std::mem::size_of::<MemAccessDesc>() == std::mem::size_of::<sys::CUmemAccessDesc>()
        && std::mem::align_of::<MemAccessDesc>() == std::mem::align_of::<sys::CUmemAccessDesc>()
        && std::mem::size_of::<sys::CUmemLocation>() == 8
);

impl MemAccessDesc {
    /// As the pointer cudarc's `cuMemPoolSetAccess` takes.
    pub(super) fn as_ptr(&self) -> *const sys::CUmemAccessDesc {
        (self as *const Self).cast()
    }
}

// The backend needs CUDA 12.0 or later (the kernel node parameters, the
// const descriptors of cuSPARSE, cuFFT's bindings): say so first where a
// project's cudarc selects an earlier CUDA version.
const _: () = assert!(
    sys::CUDA_VERSION >= 12000,
    "gpu-sched needs cudarc's CUDA 12.0 or later bindings (a `cuda-12000` .. `cuda-13040` feature)"
);
