//! cuSOLVER on the CUDA backend: the one-time probe, the handles (a pool
//! per stream slot of a runtime), the per-type functions, and the calls.

use super::LIBRARY;
use crate::blas::{Op, Uplo};
use crate::error::Result;
use crate::libs::SlotPool;
use crate::TaskContext;
use cudarc::cusolver::sys::{
    self, cublasFillMode_t, cublasOperation_t, cusolverDnHandle_t, cusolverStatus_t,
};
use std::ffi::c_int;

crate::libs::library_probe!(
    /// cuSOLVER loaded and every function the wrappers call present;
    /// probed once, never a panic.
    pub(super) fn library = cudarc::cusolver::sys, LIBRARY, "cusolver", SYMBOLS
);

/// The cuSOLVER functions the wrappers call, checked by the probe.
const SYMBOLS: &[&str] = &[
    "cusolverDnCreate",
    "cusolverDnDestroy",
    "cusolverDnSetStream",
    "cusolverDnSpotrf_bufferSize",
    "cusolverDnDpotrf_bufferSize",
    "cusolverDnSpotrf",
    "cusolverDnDpotrf",
    "cusolverDnSpotrs",
    "cusolverDnDpotrs",
    "cusolverDnSgetrf_bufferSize",
    "cusolverDnDgetrf_bufferSize",
    "cusolverDnSgetrf",
    "cusolverDnDgetrf",
    "cusolverDnSgetrs",
    "cusolverDnDgetrs",
    "cusolverDnSgeqrf_bufferSize",
    "cusolverDnDgeqrf_bufferSize",
    "cusolverDnSgeqrf",
    "cusolverDnDgeqrf",
];

type H = cusolverDnHandle_t;
type St = cusolverStatus_t;
type Fill = cublasFillMode_t;

/// `?potrf_bufferSize`, `?getrf_bufferSize` and `?geqrf_bufferSize`
/// (potrf's takes the fill mode first: `PotrfLworkFn`).
pub(crate) type LworkFn<T> = unsafe fn(H, c_int, c_int, *mut T, c_int, *mut c_int) -> St;
/// `?potrf_bufferSize`.
pub(crate) type PotrfLworkFn<T> = unsafe fn(H, Fill, c_int, *mut T, c_int, *mut c_int) -> St;
/// `?potrf`.
pub(crate) type PotrfFn<T> =
    unsafe fn(H, Fill, c_int, *mut T, c_int, *mut T, c_int, *mut c_int) -> St;
/// `?potrs`.
pub(crate) type PotrsFn<T> =
    unsafe fn(H, Fill, c_int, c_int, *const T, c_int, *mut T, c_int, *mut c_int) -> St;
/// `?getrf`.
pub(crate) type GetrfFn<T> =
    unsafe fn(H, c_int, c_int, *mut T, c_int, *mut T, *mut c_int, *mut c_int) -> St;
/// `?getrs`.
pub(crate) type GetrsFn<T> = unsafe fn(
    H,
    cublasOperation_t,
    c_int,
    c_int,
    *const T,
    c_int,
    *const c_int,
    *mut T,
    c_int,
    *mut c_int,
) -> St;
/// `?geqrf`.
pub(crate) type GeqrfFn<T> =
    unsafe fn(H, c_int, c_int, *mut T, c_int, *mut T, *mut T, c_int, *mut c_int) -> St;

/// The cuSOLVER functions of one element type, by name and function.
pub trait Sealed: Sized + 'static {
    /// `?potrf_bufferSize`.
    const POTRF_LWORK: (&'static str, PotrfLworkFn<Self>);
    /// `?potrf`.
    const POTRF: (&'static str, PotrfFn<Self>);
    /// `?potrs`.
    const POTRS: (&'static str, PotrsFn<Self>);
    /// `?getrf_bufferSize`.
    const GETRF_LWORK: (&'static str, LworkFn<Self>);
    /// `?getrf`.
    const GETRF: (&'static str, GetrfFn<Self>);
    /// `?getrs`.
    const GETRS: (&'static str, GetrsFn<Self>);
    /// `?geqrf_bufferSize`.
    const GEQRF_LWORK: (&'static str, LworkFn<Self>);
    /// `?geqrf`.
    const GEQRF: (&'static str, GeqrfFn<Self>);
}

macro_rules! sealed {
    ($t:ty, $plw:ident, $potrf:ident, $potrs:ident, $glw:ident, $getrf:ident, $getrs:ident, $qlw:ident, $geqrf:ident) => {
        impl Sealed for $t {
            const POTRF_LWORK: (&'static str, PotrfLworkFn<Self>) = (stringify!($plw), sys::$plw);
            const POTRF: (&'static str, PotrfFn<Self>) = (stringify!($potrf), sys::$potrf);
            const POTRS: (&'static str, PotrsFn<Self>) = (stringify!($potrs), sys::$potrs);
            const GETRF_LWORK: (&'static str, LworkFn<Self>) = (stringify!($glw), sys::$glw);
            const GETRF: (&'static str, GetrfFn<Self>) = (stringify!($getrf), sys::$getrf);
            const GETRS: (&'static str, GetrsFn<Self>) = (stringify!($getrs), sys::$getrs);
            const GEQRF_LWORK: (&'static str, LworkFn<Self>) = (stringify!($qlw), sys::$qlw);
            const GEQRF: (&'static str, GeqrfFn<Self>) = (stringify!($geqrf), sys::$geqrf);
        }
    };
}
sealed!(
    f32,
    cusolverDnSpotrf_bufferSize,
    cusolverDnSpotrf,
    cusolverDnSpotrs,
    cusolverDnSgetrf_bufferSize,
    cusolverDnSgetrf,
    cusolverDnSgetrs,
    cusolverDnSgeqrf_bufferSize,
    cusolverDnSgeqrf
);
sealed!(
    f64,
    cusolverDnDpotrf_bufferSize,
    cusolverDnDpotrf,
    cusolverDnDpotrs,
    cusolverDnDgetrf_bufferSize,
    cusolverDnDgetrf,
    cusolverDnDgetrs,
    cusolverDnDgeqrf_bufferSize,
    cusolverDnDgeqrf
);

/// `Ok` for success, else the typed error of `status` in `call`.
fn check(status: St, call: &'static str) -> Result<()> {
    if status == cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
        return Ok(());
    }
    Err(crate::libs::status_error(
        LIBRARY,
        call,
        status as i32,
        format!("{status:?}"),
    ))
}

/// A cuSOLVER handle.
#[derive(Debug)]
struct Handle(H);

// SAFETY: a cuSOLVER handle may be used from any thread, by one thread at
// a time (the pool hands it to one user at a time).
unsafe impl Send for Handle {}

/// A runtime's cuSOLVER handles, per stream slot ([`SlotPool`]: a handle's
/// internal workspace and its cuBLAS handle stay in its stream's order).
/// Destroyed with the runtime, after its streams finished.
#[derive(Debug, Default)]
pub(crate) struct Handles {
    idle: SlotPool<Handle>,
}

impl Handles {
    /// Destroys every handle: the runtime's streams are idle and its
    /// context current.
    pub(crate) fn clear(&self) {
        for h in self.idle.drain() {
            // SAFETY: an idle handle of this pool, made by
            // `cusolverDnCreate`, destroyed once (it left the pool).
            let _ = unsafe { sys::cusolverDnDestroy(h.0) };
        }
    }
}

/// Runs `f` with a handle bound to the task's stream (the context made
/// current first), and checks its status as `call`'s. For the workspace
/// queries (which queue nothing) and inside a foreign operation's device
/// closure (the same stream).
pub(super) fn with_handle<R>(
    t: &TaskContext,
    call: &'static str,
    f: impl FnOnce(H) -> (St, R),
) -> Result<R> {
    let rt = t.runtime();
    rt.driver().bind_context()?;
    let (sid, raw) = t.bound()?;
    let slot = sid.index();
    let pool = &rt.solver_handles().idle;
    let h = match pool.take(slot) {
        Some(h) => h,
        None => {
            let mut h: H = std::ptr::null_mut();
            // SAFETY: the library is probed (`ready`); `h` is a valid
            // out-pointer; the runtime's context is current.
            check(unsafe { sys::cusolverDnCreate(&mut h) }, "cusolverDnCreate")?;
            Handle(h)
        }
    };
    // SAFETY: a live idle handle; `raw` is the task's live stream of this
    // context; the handle's earlier stream (if another) was this slot's,
    // retired idle, so none of its work is pending.
    let r = unsafe { sys::cusolverDnSetStream(h.0, raw.0 as usize as sys::cudaStream_t) };
    if let Err(e) = check(r, "cusolverDnSetStream") {
        // SAFETY: idle (taken above), used by nothing else.
        let _ = unsafe { sys::cusolverDnDestroy(h.0) };
        return Err(e);
    }
    let (status, out) = f(h.0);
    pool.give(slot, h);
    check(status, call).map(|()| out)
}

/// cuSOLVER's fill mode.
pub(super) fn fill(u: Uplo) -> Fill {
    match u {
        Uplo::Lower => cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        Uplo::Upper => cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
    }
}

/// cuSOLVER's operation.
pub(super) fn op(o: Op) -> cublasOperation_t {
    match o {
        Op::N => cublasOperation_t::CUBLAS_OP_N,
        Op::T => cublasOperation_t::CUBLAS_OP_T,
    }
}

/// A workspace size query's result as elements: `lwork` from the
/// library, or 0 on the host backend (no call).
pub(super) fn lwork(
    t: &TaskContext,
    call: &'static str,
    q: impl FnOnce(H, *mut c_int) -> St,
) -> Result<usize> {
    if t.runtime().backend() == crate::BackendKind::Host {
        return Ok(0);
    }
    let n = with_handle(t, call, |h| {
        let mut n: c_int = 0;
        let s = q(h, &mut n);
        (s, n)
    })?;
    Ok(n.max(0) as usize)
}
