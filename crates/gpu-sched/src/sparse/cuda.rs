//! cuSPARSE on the CUDA backend: the one-time probe of the library, the
//! handles (a pool per stream slot of a runtime), and the products through
//! the generic API's descriptors (host-only objects, made for one call).

use super::ops::{Plan, Ptrs};
use super::SYMBOLS;
use crate::blas::{Op, Scalar};
use crate::error::Result;
use crate::libs::SlotPool;
use crate::Runtime;
use cudarc::cusparse::sys::{
    self, cudaDataType, cusparseConstDnMatDescr_t, cusparseConstDnVecDescr_t,
    cusparseConstSpMatDescr_t, cusparseDnMatDescr_t, cusparseDnVecDescr_t, cusparseHandle_t,
    cusparseIndexBase_t, cusparseIndexType_t, cusparseOperation_t, cusparseOrder_t,
    cusparsePointerMode_t, cusparseSpMMAlg_t, cusparseSpMVAlg_t, cusparseStatus_t,
};
use std::ffi::{c_void, CStr};

const LIBRARY: &str = "cuSPARSE";

crate::libs::library_probe!(
    /// cuSPARSE loaded and every function the wrappers call present;
    /// probed once. Never panics (nothing calls cudarc's loader before
    /// this succeeded).
    pub(super) fn library = cudarc::cusparse::sys, LIBRARY, "cusparse", SYMBOLS
);

/// `Ok` for success, else the typed error of `status` in `call`.
fn check(status: cusparseStatus_t, call: &'static str) -> Result<()> {
    if status == cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: the library is loaded and has the symbol (the probe ran
    // before any call that returns a status); it returns a static
    // NUL-terminated string, or null.
    let name = unsafe { sys::cusparseGetErrorName(status) };
    let name = if name.is_null() {
        format!("{status:?}")
    } else {
        // SAFETY: non-null: a static NUL-terminated string of cuSPARSE's.
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

/// A cuSPARSE handle, bound to one stream, in host pointer mode.
#[derive(Debug)]
struct Handle(cusparseHandle_t);

// SAFETY: a cuSPARSE handle may be used from any thread, by one thread at
// a time (the pool hands it to one user at a time).
unsafe impl Send for Handle {}

/// A runtime's cuSPARSE handles, per stream slot ([`SlotPool`]: what a
/// handle owns stays in its stream's order). Destroyed with the runtime,
/// after its streams finished.
#[derive(Debug, Default)]
pub(crate) struct Handles {
    idle: SlotPool<Handle>,
}

impl Handles {
    /// Destroys every idle handle: the runtime's streams are idle (its
    /// drop synchronized them) and its context current.
    pub(crate) fn clear(&self) {
        for h in self.idle.drain() {
            // SAFETY: an idle handle of this pool, created by
            // `cusparseCreate`, destroyed once (it left the pool).
            let _ = unsafe { sys::cusparseDestroy(h.0) };
        }
    }

    /// The number of idle handles (for tests of boundedness).
    #[allow(dead_code)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.idle_count()
    }

    /// A handle bound to `stream`, the stream of slot `slot`: an idle one
    /// of the slot, or a new one (in host pointer mode). Bound again on
    /// every take, since a slot's stream may have been retired and another
    /// made since, maybe at the same address.
    fn take(&self, slot: usize, stream: u64) -> Result<Handle> {
        let h = match self.idle.take(slot) {
            Some(h) => h,
            None => {
                let mut h: cusparseHandle_t = std::ptr::null_mut();
                // SAFETY: the library is probed; `h` is a valid
                // out-pointer; the runtime's context is current on this
                // thread (bound by the caller or the foreign operation).
                check(unsafe { sys::cusparseCreate(&mut h) }, "cusparseCreate")?;
                let h = Handle(h);
                let mode = cusparsePointerMode_t::CUSPARSE_POINTER_MODE_HOST;
                // SAFETY: a live handle, used by this thread only.
                let r = unsafe { sys::cusparseSetPointerMode(h.0, mode) };
                if let Err(e) = check(r, "cusparseSetPointerMode") {
                    // SAFETY: just created, used by nothing else.
                    let _ = unsafe { sys::cusparseDestroy(h.0) };
                    return Err(e);
                }
                h
            }
        };
        // SAFETY: `h` is a live handle, idle; `stream` is the caller's live
        // stream of this context; the handle's earlier stream (if another)
        // was the slot's, retired idle, so none of its work is pending.
        let r = unsafe { sys::cusparseSetStream(h.0, stream as usize as sys::cudaStream_t) };
        if let Err(e) = check(r, "cusparseSetStream") {
            // SAFETY: idle (taken above), used by nothing else.
            let _ = unsafe { sys::cusparseDestroy(h.0) };
            return Err(e);
        }
        Ok(h)
    }
}

/// Runs `f` with a handle bound to `stream` (its pool slot and raw
/// handle) and checks the status it returns as the call it names.
fn call(
    rt: &Runtime,
    (slot, stream): (usize, u64),
    f: impl FnOnce(cusparseHandle_t) -> (cusparseStatus_t, &'static str),
) -> Result<()> {
    let pool = rt.sparse_handles();
    let h = pool.take(slot, stream)?;
    let (status, name) = f(h.0);
    pool.idle.give(slot, h);
    check(status, name)
}

/// cuSPARSE's value (and compute) type of `T`.
fn data_type<T: Scalar>() -> cudaDataType {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        cudaDataType::CUDA_R_32F
    } else {
        cudaDataType::CUDA_R_64F
    }
}

fn op(o: Op) -> cusparseOperation_t {
    match o {
        Op::N => cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
        Op::T => cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE,
    }
}

const SPMV_ALG: cusparseSpMVAlg_t = cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT;
const SPMM_ALG: cusparseSpMMAlg_t = cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;

/// The descriptors of one product's operands: `A` (CSR), and `x`, `y`
/// (an SpMV) or `B`, `C` (an SpMM); those made are destroyed at the drop.
struct Operands {
    a: cusparseConstSpMatDescr_t,
    x: cusparseConstDnVecDescr_t,
    y: cusparseDnVecDescr_t,
    b: cusparseConstDnMatDescr_t,
    c: cusparseDnMatDescr_t,
}

impl Drop for Operands {
    fn drop(&mut self) {
        // SAFETY: each non-null descriptor was made by its create call and
        // is destroyed once; the calls that used them have returned (what
        // they queued holds the addresses, not the descriptors).
        unsafe {
            if !self.a.is_null() {
                sys::cusparseDestroySpMat(self.a);
            }
            if !self.x.is_null() {
                sys::cusparseDestroyDnVec(self.x);
            }
            if !self.y.is_null() {
                sys::cusparseDestroyDnVec(self.y.cast_const());
            }
            if !self.b.is_null() {
                sys::cusparseDestroyDnMat(self.b);
            }
            if !self.c.is_null() {
                sys::cusparseDestroyDnMat(self.c.cast_const());
            }
        }
    }
}

impl Operands {
    /// The descriptors of `plan`'s operands at `p`.
    ///
    /// # Safety
    ///
    /// The library is probed; `p` holds the device addresses of operands
    /// `plan` was checked for (cuSPARSE keeps them, reading none here).
    unsafe fn new<T: Scalar>(plan: &Plan<T>, p: &Ptrs) -> Result<Operands> {
        let mut o = Operands {
            a: std::ptr::null(),
            x: std::ptr::null(),
            y: std::ptr::null_mut(),
            b: std::ptr::null(),
            c: std::ptr::null_mut(),
        };
        let dt = data_type::<T>();
        let i32i = cusparseIndexType_t::CUSPARSE_INDEX_32I;
        let addr = |x: u64| x as usize as *const c_void;
        // SAFETY: valid out-pointers; the sizes are the checked ones (they
        // fit: `Csr::from_host` and the plan's checks); the addresses are
        // the caller's.
        unsafe {
            check(
                sys::cusparseCreateConstCsr(
                    &mut o.a,
                    plan.m as i64,
                    plan.n as i64,
                    plan.nnz as i64,
                    addr(p.row_ptr),
                    addr(p.col_idx),
                    addr(p.values),
                    i32i,
                    i32i,
                    cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    dt,
                ),
                "cusparseCreateConstCsr",
            )?;
            let (rows, cols) = plan.dims();
            let out = p.c as usize as *mut c_void;
            match plan.mat {
                None => {
                    check(
                        sys::cusparseCreateConstDnVec(&mut o.x, cols as i64, addr(p.b), dt),
                        "cusparseCreateConstDnVec",
                    )?;
                    check(
                        sys::cusparseCreateDnVec(&mut o.y, rows as i64, out, dt),
                        "cusparseCreateDnVec",
                    )?;
                }
                Some(d) => {
                    let col = cusparseOrder_t::CUSPARSE_ORDER_COL;
                    check(
                        sys::cusparseCreateConstDnMat(
                            &mut o.b,
                            cols as i64,
                            d.k as i64,
                            d.ldb as i64,
                            addr(p.b),
                            dt,
                            col,
                        ),
                        "cusparseCreateConstDnMat",
                    )?;
                    check(
                        sys::cusparseCreateDnMat(
                            &mut o.c,
                            rows as i64,
                            d.k as i64,
                            d.ldc as i64,
                            out,
                            dt,
                            col,
                        ),
                        "cusparseCreateDnMat",
                    )?;
                }
            }
        }
        Ok(o)
    }
}

/// The workspace bytes cuSPARSE asks for `plan` on `p` (a host-only query:
/// nothing is queued).
///
/// # Safety
///
/// As [`Operands::new`]; the runtime's context is current; `stream` is
/// the caller's live stream of slot `stream.0`.
pub(super) unsafe fn buffer_size<T: Scalar>(
    rt: &Runtime,
    stream: (usize, u64),
    plan: &Plan<T>,
    p: &Ptrs,
) -> Result<usize> {
    // SAFETY: the caller's contract.
    let o = unsafe { Operands::new(plan, p) }?;
    let (alpha, beta) = scalars(plan);
    let (dt, oa) = (data_type::<T>(), op(plan.op));
    let mut size = 0usize;
    call(rt, stream, |h| match plan.mat {
        // SAFETY: live descriptors and handle; scalars by host pointer;
        // `size` a valid out-pointer.
        None => (
            unsafe {
                sys::cusparseSpMV_bufferSize(
                    h, oa, alpha, o.a, o.x, beta, o.y, dt, SPMV_ALG, &mut size,
                )
            },
            "cusparseSpMV_bufferSize",
        ),
        // SAFETY: as above.
        Some(_) => (
            unsafe {
                sys::cusparseSpMM_bufferSize(
                    h,
                    oa,
                    cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    alpha,
                    o.a,
                    o.b,
                    beta,
                    o.c,
                    dt,
                    SPMM_ALG,
                    &mut size,
                )
            },
            "cusparseSpMM_bufferSize",
        ),
    })?;
    Ok(size)
}

/// `plan`'s scalars as cuSPARSE's host pointers.
fn scalars<T>(plan: &Plan<T>) -> (*const c_void, *const c_void) {
    (
        (&plan.alpha as *const T).cast(),
        (&plan.beta as *const T).cast(),
    )
}

/// Queues `plan`'s product on `stream`, with the workspace `work`
/// (address, bytes).
///
/// # Safety
///
/// As [`buffer_size`], and: the operands are live and ordered on `stream`
/// for the call (reads, and `C` written by nothing else meanwhile); `work`
/// holds at least the bytes [`buffer_size`] gave for the same plan and
/// operands, used by nothing else until the product ran.
pub(super) unsafe fn product<T: Scalar>(
    rt: &Runtime,
    stream: (usize, u64),
    plan: &Plan<T>,
    p: &Ptrs,
    (work, bytes): (u64, usize),
) -> Result<()> {
    // SAFETY: the caller's contract.
    let o = unsafe { Operands::new(plan, p) }?;
    let (alpha, beta) = scalars(plan);
    let (dt, oa) = (data_type::<T>(), op(plan.op));
    let buf = if bytes == 0 {
        std::ptr::null_mut()
    } else {
        work as usize as *mut c_void
    };
    call(rt, stream, |h| match plan.mat {
        // SAFETY: the caller's contract; live descriptors and handle, the
        // handle bound to `stream`; scalars by host pointer (read before
        // the call returns).
        None => (
            unsafe { sys::cusparseSpMV(h, oa, alpha, o.a, o.x, beta, o.y, dt, SPMV_ALG, buf) },
            "cusparseSpMV",
        ),
        // SAFETY: as above.
        Some(_) => (
            unsafe {
                sys::cusparseSpMM(
                    h,
                    oa,
                    cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    alpha,
                    o.a,
                    o.b,
                    beta,
                    o.c,
                    dt,
                    SPMM_ALG,
                    buf,
                )
            },
            "cusparseSpMM",
        ),
    })
}
