//! cuBLAS on the CUDA backend: the library ([`Cublas`], its handles pooled
//! per stream slot of a runtime by [`HandlePool`]), and the calls.

use super::sealed::Sealed;
use super::{Checked, Diag, Gemm, Gemv, Op, Side, Syrk, Trsm, Uplo, SYMBOLS};
use crate::shared::stream_of;
use crate::shared::{HandlePool, Library, CAPTURE_SLOT};
use cudarc::cublas::result;
use cudarc::cublas::sys::{
    self, cublasDiagType_t, cublasFillMode_t, cublasHandle_t, cublasOperation_t,
    cublasPointerMode_t, cublasSideMode_t, cublasStatus_t,
};
use gpu_sched::{BatchCall, ForeignStream, Result, Runtime};
use std::ffi::{c_int, CStr};

/// cuBLAS.
pub(crate) struct Cublas;

impl Library for Cublas {
    const NAME: &'static str = "cuBLAS";
    const STEM: &'static str = "cublas";
    const SYMBOLS: &'static [&'static str] = SYMBOLS;
    const CREATE: &'static str = "cublasCreate_v2";
    const SET_STREAM: &'static str = "cublasSetStream_v2";
    type Status = cublasStatus_t;
    type Handle = cublasHandle_t;

    crate::shared::loader!(cudarc::cublas::sys);

    fn succeeded(status: cublasStatus_t) -> bool {
        status == cublasStatus_t::CUBLAS_STATUS_SUCCESS
    }

    fn code(status: cublasStatus_t) -> i32 {
        status as i32
    }

    fn name(status: cublasStatus_t) -> String {
        // SAFETY: the library is loaded and has the symbol (the probe ran
        // before any call that returns a status); it returns a static
        // NUL-terminated string, or null.
        let name = unsafe { sys::cublasGetStatusName(status) };
        if name.is_null() {
            format!("{status:?}")
        } else {
            // SAFETY: non-null: a static NUL-terminated string of cuBLAS's.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        }
    }

    fn create() -> std::result::Result<cublasHandle_t, cublasStatus_t> {
        result::create_handle().map_err(|e| e.0)
    }

    unsafe fn destroy(h: cublasHandle_t) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::destroy_handle(h) };
    }

    unsafe fn set_stream(
        h: cublasHandle_t,
        stream: u64,
    ) -> std::result::Result<(), cublasStatus_t> {
        // SAFETY: the caller's contract.
        unsafe { result::set_stream(h, stream as usize as sys::cudaStream_t) }.map_err(|e| e.0)
    }
}

/// Runs `f` with a handle bound to `stream` (its pool slot and raw
/// handle), in host (`device = false`) or device pointer mode for scalars,
/// and checks its status as `call`'s.
pub(super) fn call(
    rt: &Runtime,
    stream: (usize, u64),
    device: bool,
    call: &'static str,
    f: impl FnOnce(cublasHandle_t) -> cublasStatus_t,
) -> Result<()> {
    call_with(rt, stream, device, None, call, f)
}

/// [`call`] with a workspace of the call's own (`(address, bytes)`) where
/// `stream` is the capture slot's (a handle of that slot has none, and
/// cuBLAS's reductions need one): set after the take's reset to none, so
/// the next take of the handle does not see it. Ignored on other slots,
/// whose handles keep cuBLAS's own workspace.
pub(super) fn call_with(
    rt: &Runtime,
    stream: (usize, u64),
    device: bool,
    workspace: Option<(u64, usize)>,
    call: &'static str,
    f: impl FnOnce(cublasHandle_t) -> cublasStatus_t,
) -> Result<()> {
    let mode = if device {
        cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE
    } else {
        cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST
    };
    HandlePool::<Cublas>::of(rt).with_handle(stream, |h| {
        if stream.0 == CAPTURE_SLOT {
            // A handle of captures: no workspace, so that the captured
            // work uses none that another graph or call shares, and no
            // allocation is captured (cuBLAS allocates its default
            // workspace stream-ordered since CUDA 12.2, which a child
            // graph cannot hold). Set at each take: cheap.
            Cublas::check(
                // SAFETY: `h` is a live handle, used by this thread only;
                // a null workspace of 0 bytes is cuBLAS's "none".
                unsafe { sys::cublasSetWorkspace_v2(h, std::ptr::null_mut(), 0) },
                "cublasSetWorkspace_v2",
            )?;
            if let Some((ptr, bytes)) = workspace {
                Cublas::check(
                    // SAFETY: `h` is a live handle, used by this thread
                    // only; the caller's workspace is device memory of
                    // `bytes` that the captured call alone uses (declared
                    // written by its operation), reset to none at the
                    // handle's next take.
                    unsafe { sys::cublasSetWorkspace_v2(h, ptr as usize as *mut _, bytes) },
                    "cublasSetWorkspace_v2",
                )?;
            }
        }
        Cublas::check(
            // SAFETY: `h` is a live handle, used by this thread only.
            unsafe { sys::cublasSetPointerMode_v2(h, mode) },
            "cublasSetPointerMode_v2",
        )?;
        Cublas::check(f(h), call)
    })
}

impl From<Op> for cublasOperation_t {
    fn from(o: Op) -> Self {
        match o {
            Op::N => cublasOperation_t::CUBLAS_OP_N,
            Op::T => cublasOperation_t::CUBLAS_OP_T,
        }
    }
}

impl From<Uplo> for cublasFillMode_t {
    fn from(u: Uplo) -> Self {
        match u {
            Uplo::Lower => cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            Uplo::Upper => cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
        }
    }
}

impl From<Side> for cublasSideMode_t {
    fn from(s: Side) -> Self {
        match s {
            Side::Left => cublasSideMode_t::CUBLAS_SIDE_LEFT,
            Side::Right => cublasSideMode_t::CUBLAS_SIDE_RIGHT,
        }
    }
}

impl From<Diag> for cublasDiagType_t {
    fn from(d: Diag) -> Self {
        match d {
            Diag::NonUnit => cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
            Diag::Unit => cublasDiagType_t::CUBLAS_DIAG_UNIT,
        }
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
    let (oa, ob) = (g.op_a.into(), g.op_b.into());
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

/// The increment of a gemv's `x` and `y` (packed vectors).
pub(super) const GEMV_INC: c_int = 1;

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
                g.op.into(),
                ci(g.m),
                ci(g.n),
                &g.alpha,
                a,
                ci(lda),
                x,
                GEMV_INC,
                &g.beta,
                y,
                GEMV_INC,
            )
        }
    })
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
    let (side, diag) = (g.side.into(), g.diag.into());
    call(rt, stream, false, T::TRSM.0, |h| {
        // SAFETY: the caller's contract; scalars by host pointer.
        unsafe {
            (T::TRSM.1)(
                h,
                side,
                g.uplo.into(),
                g.op.into(),
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
                g.uplo.into(),
                g.op.into(),
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

/// The batched form of plain gemms (`Foreign::batchable`): sibling gemms
/// of one shape, whose key is `Gemm::key`'s, as one `?gemmBatched` over
/// the group's pointer arrays (the declared buffers `A`, `B`, `C`).
pub(super) fn gemm_group<T: Sealed>(s: &ForeignStream<'_>, g: &BatchCall<'_>) -> Result<()> {
    let key = g.key();
    let op = |w: u64| if w == Op::T as u64 { Op::T } else { Op::N };
    let (oa, ob) = (op(key[1]).into(), op(key[2]).into());
    let [m, n, k] = [key[3], key[4], key[5]].map(|x| x as c_int);
    let (alpha, beta) = (T::from_bits(key[6]), T::from_bits(key[7]));
    let [lda, ldb, ldc] = [key[8], key[9], key[10]].map(|x| x as c_int);
    // The runtime merges at most as many operations as it records (each
    // at most a few hundred bytes): a count that is not an int is not one
    // cuBLAS takes.
    let count = c_int::try_from(g.len()).map_err(|_| gpu_sched::Error::Shape {
        op: "gemm",
        problem: format!("a batch of {} products", g.len()),
    })?;
    let [pa, pb, pc] = [0, 1, 2].map(|b| g.pointer_array(b) as usize);
    call(s.runtime(), stream_of(s), false, T::GEMM_PTRS.0, |h| {
        // SAFETY: each member is a gemm of this key (checked by
        // `Gemm::check` when recorded: the shape and leading dimensions
        // fit cuBLAS's ints and each member's buffers), whose pointers the
        // arrays hold on the device for as long as the graph lives; the
        // scalars by host pointer.
        unsafe {
            (T::GEMM_PTRS.1)(
                h,
                oa,
                ob,
                m,
                n,
                k,
                &alpha,
                pa as *const *const T,
                lda,
                pb as *const *const T,
                ldb,
                &beta,
                pc as *const *mut T,
                ldc,
                count,
            )
        }
    })
}
