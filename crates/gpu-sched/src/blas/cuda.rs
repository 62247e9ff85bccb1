//! cuBLAS on the CUDA backend: the one-time probe of the library, the
//! handles (a pool per stream of a runtime), and the calls.

use super::sealed::Sealed;
use super::{Checked, Diag, Gemm, Gemv, Op, Side, Syrk, Trsm, Uplo, SYMBOLS};
use crate::error::Result;
use crate::libs::SlotPool;
use crate::Runtime;
use cudarc::cublas::sys::{
    self, cublasDiagType_t, cublasFillMode_t, cublasHandle_t, cublasOperation_t,
    cublasPointerMode_t, cublasSideMode_t, cublasStatus_t,
};
use std::ffi::{c_int, CStr};

const LIBRARY: &str = "cuBLAS";

crate::libs::library_probe!(
    /// cuBLAS loaded and every function the wrappers call present; probed
    /// once. Never panics (nothing calls cudarc's loader before this
    /// succeeded).
    pub(super) fn library = cudarc::cublas::sys, LIBRARY, "cublas", SYMBOLS
);

/// `Ok` for success, else the typed error of `status` in `call`.
fn check(status: cublasStatus_t, call: &'static str) -> Result<()> {
    if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: the library is loaded and has the symbol (the probe ran
    // before any call that returns a status); it returns a static
    // NUL-terminated string, or null.
    let name = unsafe { sys::cublasGetStatusName(status) };
    let name = if name.is_null() {
        format!("{status:?}")
    } else {
        // SAFETY: non-null: a static NUL-terminated string of cuBLAS's.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    Err(crate::libs::status_error(
        LIBRARY,
        call,
        status as i32,
        name,
    ))
}

/// A cuBLAS handle, bound to one stream.
#[derive(Debug)]
struct Handle(cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread, by one thread at a
// time (the pool hands it to one user at a time).
unsafe impl Send for Handle {}

/// A runtime's cuBLAS handles, per stream slot ([`crate::libs::SlotPool`]:
/// a handle's default workspace stays in its stream's order). Destroyed
/// with the runtime, after its streams finished.
#[derive(Debug, Default)]
pub(crate) struct Handles {
    idle: SlotPool<Handle>,
}

impl Handles {
    /// Destroys every handle. The runtime's streams are idle (its drop
    /// synchronized them) and its context current.
    pub(crate) fn clear(&self) {
        for h in self.idle.drain() {
            // SAFETY: an idle handle of this pool, created by
            // `cublasCreate_v2`, destroyed once (it left the pool).
            let _ = unsafe { sys::cublasDestroy_v2(h.0) };
        }
    }

    /// A handle bound to `stream`, the stream of slot `slot`: an idle one
    /// of the slot, or a new one. Bound again on every take
    /// (`cublasSetStream`, no measurable cost: B17/raw-setstream), since a
    /// slot's stream may have been retired and another made since, maybe
    /// at the same address.
    fn take(&self, slot: usize, stream: u64) -> Result<Handle> {
        let idle = self.idle.take(slot);
        let h = match idle {
            Some(h) => h,
            None => {
                let mut h: cublasHandle_t = std::ptr::null_mut();
                // SAFETY: the library is probed; `h` is a valid
                // out-pointer; the runtime's context is current on this
                // thread (a foreign operation's device closure binds it).
                check(unsafe { sys::cublasCreate_v2(&mut h) }, "cublasCreate_v2")?;
                Handle(h)
            }
        };
        // SAFETY: `h` is a live handle, idle; `stream` is the caller's live
        // stream of this context; the handle's earlier stream (if another)
        // was the slot's, retired idle, so none of its work is pending.
        let r = unsafe { sys::cublasSetStream_v2(h.0, stream as usize as sys::cudaStream_t) };
        if let Err(e) = check(r, "cublasSetStream_v2") {
            // SAFETY: idle (taken above), used by nothing else.
            let _ = unsafe { sys::cublasDestroy_v2(h.0) };
            return Err(e);
        }
        Ok(h)
    }

    fn give(&self, slot: usize, h: Handle) {
        self.idle.give(slot, h);
    }
}

/// Runs `f` with a handle bound to `stream` (its pool slot and raw
/// handle), in host (`device = false`) or
/// device pointer mode for scalars, and checks its status as `call`'s.
pub(super) fn call(
    rt: &Runtime,
    (slot, stream): (usize, u64),
    device: bool,
    call: &'static str,
    f: impl FnOnce(cublasHandle_t) -> cublasStatus_t,
) -> Result<()> {
    let pool = rt.blas_handles();
    let h = pool.take(slot, stream)?;
    let mode = if device {
        cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE
    } else {
        cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST
    };
    // SAFETY: `h` is a live handle, used by this thread only.
    let r = check(
        unsafe { sys::cublasSetPointerMode_v2(h.0, mode) },
        "cublasSetPointerMode_v2",
    )
    .and_then(|()| check(f(h.0), call));
    pool.give(slot, h);
    r
}

fn op(o: Op) -> cublasOperation_t {
    match o {
        Op::N => cublasOperation_t::CUBLAS_OP_N,
        Op::T => cublasOperation_t::CUBLAS_OP_T,
    }
}

/// The checked values as cuBLAS's ints (they fit: `Gemm::check`).
fn ci(x: usize) -> c_int {
    x as c_int
}

/// A gemm (or its batch) on `stream`.
///
/// # Safety
///
/// `a`, `b`, `c` are device pointers to at least the spans `k` was
/// checked for, `c`'s written by nothing else meanwhile; `stream` is the
/// caller's live stream.
pub(super) unsafe fn gemm<T: Sealed>(
    rt: &Runtime,
    stream: (usize, u64),
    g: &Gemm<T>,
    k: &Checked,
    a: *const T,
    b: *const T,
    c: *mut T,
) -> Result<()> {
    let (oa, ob) = (op(g.op_a), op(g.op_b));
    let [lda, ldb, ldc] = k.ld;
    if g.batch.is_none() {
        return call(rt, stream, false, T::GEMM.0, |h| {
            // SAFETY: the caller's contract; scalars by host pointer.
            unsafe {
                (T::GEMM.1)(
                    h,
                    oa,
                    ob,
                    ci(g.m),
                    ci(g.n),
                    ci(g.k),
                    &g.alpha,
                    a,
                    ci(lda),
                    b,
                    ci(ldb),
                    &g.beta,
                    c,
                    ci(ldc),
                )
            }
        });
    }
    let [sa, sb, sc] = k.strides.map(|s| s as i64);
    call(rt, stream, false, T::GEMM_BATCHED.0, |h| {
        // SAFETY: as above, for `count` operands `stride` apart (checked).
        unsafe {
            (T::GEMM_BATCHED.1)(
                h,
                oa,
                ob,
                ci(g.m),
                ci(g.n),
                ci(g.k),
                &g.alpha,
                a,
                ci(lda),
                sa,
                b,
                ci(ldb),
                sb,
                &g.beta,
                c,
                ci(ldc),
                sc,
                ci(k.count),
            )
        }
    })
}

/// A gemv on `stream`.
///
/// # Safety
///
/// As [`gemm`], for `A`'s checked span and `x`, `y` of the lengths `op(A)`
/// takes and gives.
pub(super) unsafe fn gemv<T: Sealed>(
    rt: &Runtime,
    stream: (usize, u64),
    g: &Gemv<T>,
    lda: usize,
    a: *const T,
    x: *const T,
    y: *mut T,
) -> Result<()> {
    call(rt, stream, false, T::GEMV.0, |h| {
        // SAFETY: the caller's contract; scalars by host pointer.
        unsafe {
            (T::GEMV.1)(
                h,
                op(g.op),
                ci(g.m),
                ci(g.n),
                &g.alpha,
                a,
                ci(lda),
                x,
                1,
                &g.beta,
                y,
                1,
            )
        }
    })
}

fn fill(u: Uplo) -> cublasFillMode_t {
    match u {
        Uplo::Lower => cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        Uplo::Upper => cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
    }
}

/// A trsm on `stream`.
///
/// # Safety
///
/// As [`gemm`], for `A`'s and `B`'s checked spans.
pub(super) unsafe fn trsm<T: Sealed>(
    rt: &Runtime,
    stream: (usize, u64),
    g: &Trsm<T>,
    lda: usize,
    ldb: usize,
    a: *const T,
    b: *mut T,
) -> Result<()> {
    let side = match g.side {
        Side::Left => cublasSideMode_t::CUBLAS_SIDE_LEFT,
        Side::Right => cublasSideMode_t::CUBLAS_SIDE_RIGHT,
    };
    let diag = match g.diag {
        Diag::NonUnit => cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
        Diag::Unit => cublasDiagType_t::CUBLAS_DIAG_UNIT,
    };
    call(rt, stream, false, T::TRSM.0, |h| {
        // SAFETY: the caller's contract; scalars by host pointer.
        unsafe {
            (T::TRSM.1)(
                h,
                side,
                fill(g.uplo),
                op(g.op),
                diag,
                ci(g.m),
                ci(g.n),
                &g.alpha,
                a,
                ci(lda),
                b,
                ci(ldb),
            )
        }
    })
}

/// A syrk on `stream`.
///
/// # Safety
///
/// As [`gemm`], for `A`'s and `C`'s checked spans.
pub(super) unsafe fn syrk<T: Sealed>(
    rt: &Runtime,
    stream: (usize, u64),
    g: &Syrk<T>,
    lda: usize,
    ldc: usize,
    a: *const T,
    c: *mut T,
) -> Result<()> {
    call(rt, stream, false, T::SYRK.0, |h| {
        // SAFETY: the caller's contract; scalars by host pointer.
        unsafe {
            (T::SYRK.1)(
                h,
                fill(g.uplo),
                op(g.op),
                ci(g.n),
                ci(g.k),
                &g.alpha,
                a,
                ci(lda),
                &g.beta,
                c,
                ci(ldc),
            )
        }
    })
}
