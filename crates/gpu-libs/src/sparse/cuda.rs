//! cuSPARSE on the CUDA backend: the library ([`Cusparse`], its handles
//! pooled per stream slot of a runtime by [`HandlePool`]), and the products
//! through the generic API's descriptors (host-only objects, made for one
//! call).

use super::ops::{Plan, Ptrs};
use super::SYMBOLS;
use crate::blas::{Op, Scalar};
use crate::shared::{HandlePool, Library};
use cudarc::cusparse::result;
use cudarc::cusparse::sys::{
    self, cudaDataType, cusparseConstDnMatDescr_t, cusparseConstDnVecDescr_t,
    cusparseConstSpMatDescr_t, cusparseDnMatDescr_t, cusparseDnVecDescr_t, cusparseHandle_t,
    cusparseIndexBase_t, cusparseIndexType_t, cusparseOperation_t, cusparseOrder_t,
    cusparsePointerMode_t, cusparseSpMMAlg_t, cusparseSpMVAlg_t, cusparseStatus_t,
};
use gpu_sched::{Result, Runtime};
use std::ffi::{c_void, CStr};

/// cuSPARSE.
pub(crate) struct Cusparse;

impl Library for Cusparse {
    const NAME: &'static str = "cuSPARSE";
    const STEM: &'static str = "cusparse";
    const SYMBOLS: &'static [&'static str] = SYMBOLS;
    const CREATE: &'static str = "cusparseCreate";
    const SET_STREAM: &'static str = "cusparseSetStream";
    type Status = cusparseStatus_t;
    type Handle = cusparseHandle_t;

    crate::shared::loader!(cudarc::cusparse::sys);

    fn succeeded(status: cusparseStatus_t) -> bool {
        status == cusparseStatus_t::CUSPARSE_STATUS_SUCCESS
    }

    fn code(status: cusparseStatus_t) -> i32 {
        status as i32
    }

    fn name(status: cusparseStatus_t) -> String {
        // SAFETY: the library is loaded and has the symbol (the probe ran
        // before any call that returns a status); it returns a static
        // NUL-terminated string, or null.
        let name = unsafe { sys::cusparseGetErrorName(status) };
        if name.is_null() {
            format!("{status:?}")
        } else {
            // SAFETY: non-null: a static NUL-terminated string of cuSPARSE's.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        }
    }

    /// A handle in host pointer mode (every wrapper passes its scalars by
    /// host pointer).
    fn create() -> std::result::Result<cusparseHandle_t, cusparseStatus_t> {
        let h = result::create().map_err(|e| e.0)?;
        let mode = cusparsePointerMode_t::CUSPARSE_POINTER_MODE_HOST;
        // SAFETY: a live handle, used by this thread only.
        let r = unsafe { sys::cusparseSetPointerMode(h, mode) }.result();
        if let Err(e) = r {
            // SAFETY: just created, used by nothing else.
            let _ = unsafe { result::destroy(h) };
            return Err(e.0);
        }
        Ok(h)
    }

    unsafe fn destroy(h: cusparseHandle_t) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::destroy(h) };
    }

    unsafe fn set_stream(
        h: cusparseHandle_t,
        stream: u64,
    ) -> std::result::Result<(), cusparseStatus_t> {
        // SAFETY: the caller's contract (cudarc's `result` has no
        // `set_stream` for cuSPARSE: its `sys` call).
        unsafe { sys::cusparseSetStream(h, stream as usize as sys::cudaStream_t) }
            .result()
            .map_err(|e| e.0)
    }
}

/// Runs `f` with a handle bound to `stream` (its pool slot and raw
/// handle) and checks the status it returns as the call it names.
fn call(
    rt: &Runtime,
    stream: (usize, u64),
    f: impl FnOnce(cusparseHandle_t) -> (cusparseStatus_t, &'static str),
) -> Result<()> {
    HandlePool::<Cusparse>::of(rt).with_handle(stream, |h| {
        let (status, name) = f(h);
        Cusparse::check(status, name)
    })
}

impl From<Op> for cusparseOperation_t {
    fn from(o: Op) -> Self {
        match o {
            Op::N => cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
            Op::T => cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE,
        }
    }
}

/// cuSPARSE's value (and compute) type of `T`.
fn data_type<T: Scalar>() -> cudaDataType {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        cudaDataType::CUDA_R_32F
    } else {
        cudaDataType::CUDA_R_64F
    }
}

const SPMV_ALG: cusparseSpMVAlg_t = cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT;
const SPMM_ALG: cusparseSpMMAlg_t = cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;

/// What [`product`] passes for `plan` besides the plan's values and the
/// operands' addresses, as words of a key (`Foreign::reuse_capture`): the
/// value (and compute) type and the algorithm (the index types and base,
/// and an SpMM's `op(B)`, are the same for every call).
pub(super) fn options<T: Scalar>(plan: &Plan<T>) -> [u64; 2] {
    let alg = match plan.mat {
        None => SPMV_ALG as u64,
        Some(_) => SPMM_ALG as u64,
    };
    [data_type::<T>() as u64, alg]
}

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
            Cusparse::check(
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
                    Cusparse::check(
                        sys::cusparseCreateConstDnVec(&mut o.x, cols as i64, addr(p.b), dt),
                        "cusparseCreateConstDnVec",
                    )?;
                    Cusparse::check(
                        sys::cusparseCreateDnVec(&mut o.y, rows as i64, out, dt),
                        "cusparseCreateDnVec",
                    )?;
                }
                Some(d) => {
                    let col = cusparseOrder_t::CUSPARSE_ORDER_COL;
                    Cusparse::check(
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
                    Cusparse::check(
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
    let (dt, oa): (_, cusparseOperation_t) = (data_type::<T>(), plan.op.into());
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
    let (dt, oa): (_, cusparseOperation_t) = (data_type::<T>(), plan.op.into());
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
