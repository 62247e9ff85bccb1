//! cuSOLVER on the CUDA backend: the library ([`Cusolver`], its handles
//! pooled per stream slot of a runtime by [`HandlePool`]), the per-type
//! functions, and the calls.

use super::LIBRARY;
use crate::blas::{Op, Uplo};
use crate::shared::{HandlePool, Library};
use cudarc::cusolver::result;
use cudarc::cusolver::sys::{
    self, cublasFillMode_t, cublasOperation_t, cusolverDnHandle_t, cusolverStatus_t,
};
use gpu_sched::{Result, TaskContext};
use std::ffi::c_int;

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
    "cusolverDnSpotrfBatched",
    "cusolverDnDpotrfBatched",
    "cusolverDnSpotrsBatched",
    "cusolverDnDpotrsBatched",
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
/// `?potrfBatched`.
pub(crate) type PotrfBatchedFn<T> =
    unsafe fn(H, Fill, c_int, *mut *mut T, c_int, *mut c_int, c_int) -> St;
/// `?potrsBatched`.
pub(crate) type PotrsBatchedFn<T> = unsafe fn(
    H,
    Fill,
    c_int,
    c_int,
    *mut *mut T,
    c_int,
    *mut *mut T,
    c_int,
    *mut c_int,
    c_int,
) -> St;
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
    /// `?potrfBatched`.
    const POTRF_BATCHED: (&'static str, PotrfBatchedFn<Self>);
    /// `?potrsBatched`.
    const POTRS_BATCHED: (&'static str, PotrsBatchedFn<Self>);
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
    ($t:ty, $plw:ident, $potrf:ident, $potrs:ident, $pfb:ident, $psb:ident, $glw:ident, $getrf:ident, $getrs:ident, $qlw:ident, $geqrf:ident) => {
        impl Sealed for $t {
            const POTRF_LWORK: (&'static str, PotrfLworkFn<Self>) = (stringify!($plw), sys::$plw);
            const POTRF: (&'static str, PotrfFn<Self>) = (stringify!($potrf), sys::$potrf);
            const POTRS: (&'static str, PotrsFn<Self>) = (stringify!($potrs), sys::$potrs);
            const POTRF_BATCHED: (&'static str, PotrfBatchedFn<Self>) =
                (stringify!($pfb), sys::$pfb);
            const POTRS_BATCHED: (&'static str, PotrsBatchedFn<Self>) =
                (stringify!($psb), sys::$psb);
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
    cusolverDnSpotrfBatched,
    cusolverDnSpotrsBatched,
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
    cusolverDnDpotrfBatched,
    cusolverDnDpotrsBatched,
    cusolverDnDgetrf_bufferSize,
    cusolverDnDgetrf,
    cusolverDnDgetrs,
    cusolverDnDgeqrf_bufferSize,
    cusolverDnDgeqrf
);

/// cuSOLVER (its dense API).
pub(crate) struct Cusolver;

impl Library for Cusolver {
    const NAME: &'static str = LIBRARY;
    const STEM: &'static str = "cusolver";
    const SYMBOLS: &'static [&'static str] = SYMBOLS;
    const CREATE: &'static str = "cusolverDnCreate";
    const SET_STREAM: &'static str = "cusolverDnSetStream";
    type Status = St;
    type Handle = H;

    crate::shared::loader!(cudarc::cusolver::sys);

    fn succeeded(status: St) -> bool {
        status == cusolverStatus_t::CUSOLVER_STATUS_SUCCESS
    }

    fn code(status: St) -> i32 {
        status as i32
    }

    fn create() -> std::result::Result<H, St> {
        result::dn_create().map_err(|e| e.0)
    }

    unsafe fn destroy(h: H) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::dn_destroy(h) };
    }

    unsafe fn set_stream(h: H, stream: u64) -> std::result::Result<(), St> {
        // SAFETY: the caller's contract.
        unsafe { result::dn_set_stream(h, stream as usize as sys::cudaStream_t) }.map_err(|e| e.0)
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
    let s = t.stream_slot()?;
    HandlePool::<Cusolver>::of(t.runtime()).with_handle((s.slot(), s.raw()), |h| {
        let (status, out) = f(h);
        Cusolver::check(status, call).map(|()| out)
    })
}

impl From<Uplo> for Fill {
    fn from(u: Uplo) -> Self {
        match u {
            Uplo::Lower => cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            Uplo::Upper => cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
        }
    }
}

impl From<Op> for cublasOperation_t {
    fn from(o: Op) -> Self {
        match o {
            Op::N => cublasOperation_t::CUBLAS_OP_N,
            Op::T => cublasOperation_t::CUBLAS_OP_T,
        }
    }
}

/// A workspace size query's result as elements: `lwork` from the
/// library, or 0 on the host backend (no call).
pub(super) fn lwork(
    t: &TaskContext,
    call: &'static str,
    q: impl FnOnce(H, *mut c_int) -> St,
) -> Result<usize> {
    if t.runtime().backend() == gpu_sched::BackendKind::Host {
        return Ok(0);
    }
    let n = with_handle(t, call, |h| {
        let mut n: c_int = 0;
        let s = q(h, &mut n);
        (s, n)
    })?;
    Ok(n.max(0) as usize)
}
