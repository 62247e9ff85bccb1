//! Dense linear algebra on a task's stream (§13): cuBLAS on the CUDA
//! backend, `matrixmultiply` and slices on the host backend. Every
//! operation is a tracked operation over the buffers it names (a foreign
//! operation, `TaskContext::foreign`): the inputs are reads (`&`), the
//! outputs writes (`&mut`), handed to the task's stream before and stamped
//! after, like a kernel launch; shapes, leading dimensions and strides are
//! checked against the buffers before anything is queued
//! ([`Error::Shape`]), so safe calls cannot go out of bounds.
//!
//! Matrices are column-major, as in BLAS: element `(i, j)` of a matrix with
//! leading dimension `ld` is at `i + j * ld`. cuBLAS is loaded on first use
//! and probed ([`Error::LibraryUnavailable`] where it is missing, never a
//! panic). Handles are pooled per stream slot of the runtime and bound to
//! the task's stream at each call, so a handle's default workspace is used
//! on one stream at a time and stays in stream order. Creating a handle
//! allocates device memory, which CUDA may order against other streams'
//! work: the first operations on each stream pay it once.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_sched::blas::{self, Gemm};
//! let rt = gpu_sched::Runtime::new(Default::default())?;
//! let t = rt.begin_task()?;
//! // A (2x3) times B (3x2), column-major.
//! let a = t.from_host(&[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0])?;
//! let b = t.from_host(&[1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0])?;
//! let mut c = t.zeros::<f32>(4)?;
//! Gemm::new(2, 2, 3).run(&t, &a, &b, &mut c)?;
//! assert_eq!(t.to_vec(&c)?, [1.0, 4.0, 2.0, 5.0]);
//! blas::scal(&t, 2.0, &mut c)?;
//! let mut n = t.zeros::<f32>(1)?;
//! blas::dot(&t, &c, &c, &mut n)?; // into device memory: no host wait
//! assert_eq!(t.to_vec(&n)?, [4.0 * (1.0 + 16.0 + 4.0 + 25.0)]);
//! # Ok(()) }
//! ```

mod cuda;
mod host;

pub(crate) use cuda::Handles;

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::error::{Error, Result};
use crate::{BackendKind, TaskContext};

/// Whether a matrix operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Op {
    /// As stored.
    #[default]
    N,
    /// Transposed.
    T,
}

/// Which side of the unknown a triangular matrix multiplies ([`Trsm`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Side {
    /// `op(A) X = alpha B`.
    #[default]
    Left,
    /// `X op(A) = alpha B`.
    Right,
}

/// Which triangle of a matrix is used ([`Trsm`], [`Syrk`]); the other is
/// neither read nor written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Uplo {
    /// The lower triangle.
    #[default]
    Lower,
    /// The upper triangle.
    Upper,
}

/// Whether a triangular matrix's diagonal is read or taken as ones
/// ([`Trsm`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Diag {
    /// Read.
    #[default]
    NonUnit,
    /// Ones (not read).
    Unit,
}

/// The element types of the BLAS operations: `f32` and `f64`. Sealed.
pub trait Scalar: DeviceRepr + sealed::Sealed {}
impl Scalar for f32 {}
impl Scalar for f64 {}

pub(crate) mod sealed {
    use cudarc::cublas::sys::{
        cublasDiagType_t, cublasFillMode_t, cublasHandle_t, cublasOperation_t, cublasSideMode_t,
        cublasStatus_t,
    };
    use std::ffi::c_int;

    /// cuBLAS's `?gemm` (`_v2`).
    pub(crate) type GemmFn<T> = unsafe fn(
        cublasHandle_t,
        cublasOperation_t,
        cublasOperation_t,
        c_int,
        c_int,
        c_int,
        *const T,
        *const T,
        c_int,
        *const T,
        c_int,
        *const T,
        *mut T,
        c_int,
    ) -> cublasStatus_t;
    /// cuBLAS's `?gemmStridedBatched`.
    pub(crate) type GemmBatchedFn<T> = unsafe fn(
        cublasHandle_t,
        cublasOperation_t,
        cublasOperation_t,
        c_int,
        c_int,
        c_int,
        *const T,
        *const T,
        c_int,
        i64,
        *const T,
        c_int,
        i64,
        *const T,
        *mut T,
        c_int,
        i64,
        c_int,
    ) -> cublasStatus_t;
    /// cuBLAS's `?gemv` (`_v2`).
    pub(crate) type GemvFn<T> = unsafe fn(
        cublasHandle_t,
        cublasOperation_t,
        c_int,
        c_int,
        *const T,
        *const T,
        c_int,
        *const T,
        c_int,
        *const T,
        *mut T,
        c_int,
    ) -> cublasStatus_t;
    /// cuBLAS's `?axpy` (`_v2`).
    pub(crate) type AxpyFn<T> = unsafe fn(
        cublasHandle_t,
        c_int,
        *const T,
        *const T,
        c_int,
        *mut T,
        c_int,
    ) -> cublasStatus_t;
    /// cuBLAS's `?scal` (`_v2`).
    pub(crate) type ScalFn<T> =
        unsafe fn(cublasHandle_t, c_int, *const T, *mut T, c_int) -> cublasStatus_t;
    /// cuBLAS's `?dot` (`_v2`).
    pub(crate) type DotFn<T> = unsafe fn(
        cublasHandle_t,
        c_int,
        *const T,
        c_int,
        *const T,
        c_int,
        *mut T,
    ) -> cublasStatus_t;
    /// cuBLAS's `?nrm2` (`_v2`).
    pub(crate) type Nrm2Fn<T> =
        unsafe fn(cublasHandle_t, c_int, *const T, c_int, *mut T) -> cublasStatus_t;
    /// cuBLAS's `?trsm` (`_v2`).
    pub(crate) type TrsmFn<T> = unsafe fn(
        cublasHandle_t,
        cublasSideMode_t,
        cublasFillMode_t,
        cublasOperation_t,
        cublasDiagType_t,
        c_int,
        c_int,
        *const T,
        *const T,
        c_int,
        *mut T,
        c_int,
    ) -> cublasStatus_t;
    /// cuBLAS's `?syrk` (`_v2`).
    pub(crate) type SyrkFn<T> = unsafe fn(
        cublasHandle_t,
        cublasFillMode_t,
        cublasOperation_t,
        c_int,
        c_int,
        *const T,
        *const T,
        c_int,
        *const T,
        *mut T,
        c_int,
    ) -> cublasStatus_t;
    /// `matrixmultiply`'s `?gemm` (strides in elements).
    pub(crate) type HostGemmFn<T> = unsafe fn(
        usize,
        usize,
        usize,
        T,
        *const T,
        isize,
        isize,
        *const T,
        isize,
        isize,
        T,
        *mut T,
        isize,
        isize,
    );

    /// The calls of one element type, by name (for errors) and function.
    pub trait Sealed:
        Copy + PartialEq + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + 'static
    {
        /// Zero.
        const ZERO: Self;
        /// One.
        const ONE: Self;
        /// The square root.
        fn sqrt(self) -> Self;
        /// cuBLAS's gemm.
        const GEMM: (&'static str, GemmFn<Self>);
        /// cuBLAS's strided batched gemm.
        const GEMM_BATCHED: (&'static str, GemmBatchedFn<Self>);
        /// cuBLAS's gemv.
        const GEMV: (&'static str, GemvFn<Self>);
        /// cuBLAS's axpy.
        const AXPY: (&'static str, AxpyFn<Self>);
        /// cuBLAS's scal.
        const SCAL: (&'static str, ScalFn<Self>);
        /// cuBLAS's dot.
        const DOT: (&'static str, DotFn<Self>);
        /// cuBLAS's nrm2.
        const NRM2: (&'static str, Nrm2Fn<Self>);
        /// cuBLAS's trsm.
        const TRSM: (&'static str, TrsmFn<Self>);
        /// cuBLAS's syrk.
        const SYRK: (&'static str, SyrkFn<Self>);
        /// The host backend's gemm.
        const HOST_GEMM: HostGemmFn<Self>;
        /// The host backend's trsm (`faer`): `B = alpha op(A)^-1 B` or
        /// `B = alpha B op(A)^-1`, shapes checked.
        fn host_trsm(s: &super::Trsm<Self>, lda: usize, ldb: usize, a: &[Self], b: &mut [Self]);
    }

    macro_rules! scalar {
        ($t:ty, $gemm:ident, $batched:ident, $gemv:ident, $axpy:ident, $scal:ident, $dot:ident, $nrm2:ident, $trsm:ident, $syrk:ident, $host:path) => {
            impl Sealed for $t {
                const ZERO: Self = 0.0;
                const ONE: Self = 1.0;
                fn sqrt(self) -> Self {
                    <$t>::sqrt(self)
                }
                const GEMM: (&'static str, GemmFn<Self>) =
                    (stringify!($gemm), cudarc::cublas::sys::$gemm);
                const GEMM_BATCHED: (&'static str, GemmBatchedFn<Self>) =
                    (stringify!($batched), cudarc::cublas::sys::$batched);
                const GEMV: (&'static str, GemvFn<Self>) =
                    (stringify!($gemv), cudarc::cublas::sys::$gemv);
                const AXPY: (&'static str, AxpyFn<Self>) =
                    (stringify!($axpy), cudarc::cublas::sys::$axpy);
                const SCAL: (&'static str, ScalFn<Self>) =
                    (stringify!($scal), cudarc::cublas::sys::$scal);
                const DOT: (&'static str, DotFn<Self>) =
                    (stringify!($dot), cudarc::cublas::sys::$dot);
                const NRM2: (&'static str, Nrm2Fn<Self>) =
                    (stringify!($nrm2), cudarc::cublas::sys::$nrm2);
                const TRSM: (&'static str, TrsmFn<Self>) =
                    (stringify!($trsm), cudarc::cublas::sys::$trsm);
                const SYRK: (&'static str, SyrkFn<Self>) =
                    (stringify!($syrk), cudarc::cublas::sys::$syrk);
                const HOST_GEMM: HostGemmFn<Self> = $host;
                fn host_trsm(
                    s: &super::Trsm<Self>,
                    lda: usize,
                    ldb: usize,
                    a: &[Self],
                    b: &mut [Self],
                ) {
                    super::host::trsm!(s, lda, ldb, a, b)
                }
            }
        };
    }
    scalar!(
        f32,
        cublasSgemm_v2,
        cublasSgemmStridedBatched,
        cublasSgemv_v2,
        cublasSaxpy_v2,
        cublasSscal_v2,
        cublasSdot_v2,
        cublasSnrm2_v2,
        cublasStrsm_v2,
        cublasSsyrk_v2,
        matrixmultiply::sgemm
    );
    scalar!(
        f64,
        cublasDgemm_v2,
        cublasDgemmStridedBatched,
        cublasDgemv_v2,
        cublasDaxpy_v2,
        cublasDscal_v2,
        cublasDdot_v2,
        cublasDnrm2_v2,
        cublasDtrsm_v2,
        cublasDsyrk_v2,
        matrixmultiply::dgemm
    );
}

/// The cuBLAS functions the wrappers call, checked by the probe.
pub(crate) const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetPointerMode_v2",
    "cublasGetStatusName",
    "cublasSgemm_v2",
    "cublasDgemm_v2",
    "cublasSgemmStridedBatched",
    "cublasDgemmStridedBatched",
    "cublasSgemv_v2",
    "cublasDgemv_v2",
    "cublasSaxpy_v2",
    "cublasDaxpy_v2",
    "cublasSscal_v2",
    "cublasDscal_v2",
    "cublasSdot_v2",
    "cublasDdot_v2",
    "cublasSnrm2_v2",
    "cublasDnrm2_v2",
    "cublasStrsm_v2",
    "cublasDtrsm_v2",
    "cublasSsyrk_v2",
    "cublasDsyrk_v2",
];

/// `x` as cuBLAS's `int`, or the shape error saying which.
fn int(op: &'static str, what: &str, x: usize) -> Result<std::ffi::c_int> {
    std::ffi::c_int::try_from(x).map_err(|_| Error::Shape {
        op,
        problem: format!("{what} = {x} does not fit cuBLAS's 32-bit int"),
    })
}

/// The elements a column-major `rows x cols` operand with leading
/// dimension `ld` spans, after checking `ld >= max(1, rows)`.
fn span(op: &'static str, name: &str, rows: usize, cols: usize, ld: usize) -> Result<usize> {
    if ld < rows.max(1) {
        return Err(Error::Shape {
            op,
            problem: format!("{name}: leading dimension {ld} < max(1, rows = {rows})"),
        });
    }
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    ld.checked_mul(cols - 1)
        .and_then(|x| x.checked_add(rows))
        .ok_or_else(|| Error::Shape {
            op,
            problem: format!("{name}: {rows} x {cols} with leading dimension {ld} overflows"),
        })
}

/// Checks that `count` operands of `one` elements each, `stride` apart,
/// fit in `len` elements; `disjoint` also asks that they do not overlap
/// (an output). Returns nothing: the error says what does not fit.
fn fits(
    op: &'static str,
    name: &str,
    one: usize,
    count: usize,
    stride: usize,
    len: usize,
    disjoint: bool,
) -> Result<()> {
    if count > 1 && disjoint && stride < one {
        return Err(Error::Shape {
            op,
            problem: format!("{name}: stride {stride} < {one}, the batch's outputs overlap"),
        });
    }
    let need = if one == 0 || count == 0 {
        0
    } else {
        stride
            .checked_mul(count - 1)
            .and_then(|x| x.checked_add(one))
            .ok_or_else(|| Error::Shape {
                op,
                problem: format!("{name}: {count} operands {stride} apart overflow"),
            })?
    };
    if len < need {
        return Err(Error::Shape {
            op,
            problem: format!("{name} has {len} elements, {need} needed"),
        });
    }
    Ok(())
}

/// The rows and columns of an operand stored for `op(X)` of `rows x cols`.
fn stored(op: Op, rows: usize, cols: usize) -> (usize, usize) {
    match op {
        Op::N => (rows, cols),
        Op::T => (cols, rows),
    }
}

/// On the CUDA backend, cuBLAS loaded and checked (before anything is
/// queued); nothing on the host backend.
fn ready(t: &TaskContext) -> Result<()> {
    match t.runtime().backend() {
        BackendKind::Cuda => cuda::library(),
        BackendKind::Host => Ok(()),
    }
}

/// `C = alpha op(A) op(B) + beta C` (`C` is `m x n`, `op(A)` `m x k`,
/// `op(B)` `k x n`), or a batch of them `stride_*` elements apart
/// ([`Gemm::batched`]). Built with [`Gemm::new`] and its setters; the
/// leading dimensions default to the stored rows (packed matrices).
#[derive(Clone, Copy, Debug)]
pub struct Gemm<T> {
    m: usize,
    n: usize,
    k: usize,
    op_a: Op,
    op_b: Op,
    alpha: T,
    beta: T,
    ld: [Option<usize>; 3],
    batch: Option<(usize, [usize; 3])>,
}

impl<T: Scalar> Gemm<T> {
    /// `C = A B` of `m x k` by `k x n`, packed, `alpha = 1`, `beta = 0`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            m,
            n,
            k,
            op_a: Op::N,
            op_b: Op::N,
            alpha: T::ONE,
            beta: T::ZERO,
            ld: [None; 3],
            batch: None,
        }
    }
    /// Uses `A` as stored or transposed (then stored `k x m`).
    pub fn op_a(mut self, op: Op) -> Self {
        self.op_a = op;
        self
    }
    /// Uses `B` as stored or transposed (then stored `n x k`).
    pub fn op_b(mut self, op: Op) -> Self {
        self.op_b = op;
        self
    }
    /// The factor of the product.
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }
    /// The factor of `C`'s old value (`0`: `C` is only written).
    pub fn beta(mut self, beta: T) -> Self {
        self.beta = beta;
        self
    }
    /// The leading dimensions of `A`, `B` and `C`.
    pub fn ld(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.ld = [Some(lda), Some(ldb), Some(ldc)];
        self
    }
    /// `count` products, the `i`th on the operands starting at `i *
    /// stride_a`, `i * stride_b`, `i * stride_c` (cuBLAS's strided batched
    /// gemm). The outputs must not overlap (`stride_c` at least `C`'s span).
    pub fn batched(
        mut self,
        count: usize,
        stride_a: usize,
        stride_b: usize,
        stride_c: usize,
    ) -> Self {
        self.batch = Some((count, [stride_a, stride_b, stride_c]));
        self
    }

    /// The checked shape: the stored rows of `A`, `B`, `C`, their leading
    /// dimensions, and the batch.
    fn check(&self, a: usize, b: usize, c: usize) -> Result<Checked> {
        const OP: &str = "gemm";
        let (ra, ca) = stored(self.op_a, self.m, self.k);
        let (rb, cb) = stored(self.op_b, self.k, self.n);
        let lda = self.ld[0].unwrap_or(ra.max(1));
        let ldb = self.ld[1].unwrap_or(rb.max(1));
        let ldc = self.ld[2].unwrap_or(self.m.max(1));
        let sa = span(OP, "A", ra, ca, lda)?;
        let sb = span(OP, "B", rb, cb, ldb)?;
        let sc = span(OP, "C", self.m, self.n, ldc)?;
        let (count, strides) = self.batch.unwrap_or((1, [sa, sb, sc]));
        fits(OP, "A", sa, count, strides[0], a, false)?;
        fits(OP, "B", sb, count, strides[1], b, false)?;
        fits(OP, "C", sc, count, strides[2], c, true)?;
        for (what, x) in [
            ("m", self.m),
            ("n", self.n),
            ("k", self.k),
            ("lda", lda),
            ("ldb", ldb),
            ("ldc", ldc),
            ("batch count", count),
        ] {
            int(OP, what, x)?;
        }
        for (what, s) in [
            ("stride_a", strides[0]),
            ("stride_b", strides[1]),
            ("stride_c", strides[2]),
        ] {
            i64::try_from(s).map_err(|_| Error::Shape {
                op: OP,
                problem: format!("{what} = {s} does not fit i64"),
            })?;
        }
        Ok(Checked {
            ld: [lda, ldb, ldc],
            count,
            strides,
        })
    }

    /// Queues the product on `t`'s stream: `a` and `b` are read, `c` is
    /// written (and read where `beta != 0`).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when a buffer is too short for its operand (or
    /// operands) or a leading dimension is below the stored rows;
    /// [`Error::LibraryUnavailable`] without cuBLAS; [`Error::Capturing`]
    /// in a capture (cuBLAS's default workspace is not set up for graphs
    /// here); [`Error::Library`] for a cuBLAS failure; the errors of a
    /// launch ([`Error::WrongDevice`] for another runtime's buffer).
    pub fn run(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        b: &(impl DeviceSlice<T> + ?Sized),
        c: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let k = self.check(a.len(), b.len(), c.len())?;
        ready(t)?;
        let g = *self;
        let op = t.foreign(T::GEMM.0, (a, b), (c,)).host(
            move |(a, b): (&[T], &[T]), (c,): (&mut [T],)| {
                host::gemm(&g, &k, a, b, c);
                Ok(())
            },
        );
        // SAFETY: the call reads `A` and `B` and writes `C` within the spans
        // checked above against the declared buffers (`check`), on the
        // stream it is given (the handle is bound to it), and returns once
        // queued (cuBLAS's gemm is asynchronous).
        unsafe {
            op.run(|s, (a, b), (c,)| {
                cuda::gemm(
                    t.runtime(),
                    (t.sid().index(), s.raw()),
                    &g,
                    &k,
                    a.as_ptr(),
                    b.as_ptr(),
                    c.as_mut_ptr(),
                )
            })
        }
    }
}

/// A gemm's checked shape.
#[derive(Clone, Copy, Debug)]
struct Checked {
    ld: [usize; 3],
    count: usize,
    strides: [usize; 3],
}

/// `y = alpha op(A) x + beta y`, `A` stored `m x n`. Built with
/// [`Gemv::new`] and its setters.
#[derive(Clone, Copy, Debug)]
pub struct Gemv<T> {
    m: usize,
    n: usize,
    op: Op,
    alpha: T,
    beta: T,
    lda: Option<usize>,
}

impl<T: Scalar> Gemv<T> {
    /// `y = A x` of a packed `m x n` matrix.
    pub fn new(m: usize, n: usize) -> Self {
        Gemv {
            m,
            n,
            op: Op::N,
            alpha: T::ONE,
            beta: T::ZERO,
            lda: None,
        }
    }
    /// Uses `A` as stored or transposed (`x` then has `m` elements, `y` `n`).
    pub fn op(mut self, op: Op) -> Self {
        self.op = op;
        self
    }
    /// The factor of the product.
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }
    /// The factor of `y`'s old value.
    pub fn beta(mut self, beta: T) -> Self {
        self.beta = beta;
        self
    }
    /// `A`'s leading dimension.
    pub fn lda(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }

    /// Queues the product on `t`'s stream. `x` and `y` have exactly the
    /// lengths `op(A)` takes and gives.
    ///
    /// # Errors
    ///
    /// As [`Gemm::run`]; [`Error::Shape`] for a vector of another length.
    pub fn run(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        x: &(impl DeviceSlice<T> + ?Sized),
        y: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "gemv";
        let lda = self.lda.unwrap_or(self.m.max(1));
        let sa = span(OP, "A", self.m, self.n, lda)?;
        fits(OP, "A", sa, 1, sa, a.len(), false)?;
        let (xs, ys) = match self.op {
            Op::N => (self.n, self.m),
            Op::T => (self.m, self.n),
        };
        for (name, got, want) in [("x", x.len(), xs), ("y", y.len(), ys)] {
            if got != want {
                return Err(Error::Shape {
                    op: OP,
                    problem: format!("{name} has {got} elements, op(A) takes {want}"),
                });
            }
        }
        for (what, v) in [("m", self.m), ("n", self.n), ("lda", lda)] {
            int(OP, what, v)?;
        }
        ready(t)?;
        let g = *self;
        let op = t.foreign(T::GEMV.0, (a, x), (y,)).host(
            move |(a, x): (&[T], &[T]), (y,): (&mut [T],)| {
                host::gemv(&g, lda, a, x, y);
                Ok(())
            },
        );
        // SAFETY: as in `Gemm::run`: `A` within its checked span, `x` and
        // `y` of exactly the lengths used, on the given stream, queued.
        unsafe {
            op.run(|s, (a, x), (y,)| {
                cuda::gemv(
                    t.runtime(),
                    (t.sid().index(), s.raw()),
                    &g,
                    lda,
                    a.as_ptr(),
                    x.as_ptr(),
                    y.as_mut_ptr(),
                )
            })
        }
    }
}

/// The common length of two vectors, or the error.
fn same_len(op: &'static str, x: usize, y: usize) -> Result<usize> {
    if x == y {
        Ok(x)
    } else {
        Err(Error::Shape {
            op,
            problem: format!("x has {x} elements, y {y}"),
        })
    }
}

/// The one-element output of a reduction, or the error.
fn scalar_out(op: &'static str, out: usize) -> Result<()> {
    if out == 1 {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            problem: format!("the result buffer has {out} elements, 1 expected"),
        })
    }
}

/// `y = alpha x + y`.
///
/// # Errors
///
/// [`Error::Shape`] for vectors of different lengths; otherwise as
/// [`Gemm::run`].
pub fn axpy<T: Scalar>(
    t: &TaskContext,
    alpha: T,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = same_len("axpy", x.len(), y.len())?;
    let ni = int("axpy", "n", n)?;
    ready(t)?;
    let op = t
        .foreign(T::AXPY.0, (x,), (y,))
        .host(move |(x,): (&[T],), (y,): (&mut [T],)| {
            y.iter_mut().zip(x).for_each(|(y, &x)| *y = alpha * x + *y);
            Ok(())
        });
    // SAFETY: `n` elements of the declared `x` (read) and `y` (written),
    // equal lengths checked; on the given stream; queued.
    unsafe {
        op.run(|s, (x,), (y,)| {
            cuda::call(
                t.runtime(),
                (t.sid().index(), s.raw()),
                false,
                T::AXPY.0,
                |h| (T::AXPY.1)(h, ni, &alpha, x.as_ptr(), 1, y.as_mut_ptr(), 1),
            )
        })
    }
}

/// `x = alpha x`.
///
/// # Errors
///
/// As [`Gemm::run`].
pub fn scal<T: Scalar>(
    t: &TaskContext,
    alpha: T,
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let ni = int("scal", "n", x.len())?;
    ready(t)?;
    let op = t
        .foreign(T::SCAL.0, (), (x,))
        .host(move |(), (x,): (&mut [T],)| {
            x.iter_mut().for_each(|x| *x = alpha * *x);
            Ok(())
        });
    // SAFETY: `x.len()` elements of the declared `x`, written in place, on
    // the given stream; queued.
    unsafe {
        op.run(|s, (), (x,)| {
            cuda::call(
                t.runtime(),
                (t.sid().index(), s.raw()),
                false,
                T::SCAL.0,
                |h| (T::SCAL.1)(h, ni, &alpha, x.as_mut_ptr(), 1),
            )
        })
    }
}

/// `out[0] = x . y`, written in device memory (cuBLAS's device pointer
/// mode): no host wait, so chains like CG stay on the device.
///
/// # Errors
///
/// [`Error::Shape`] for vectors of different lengths or an `out` that is
/// not one element; otherwise as [`Gemm::run`].
pub fn dot<T: Scalar>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = same_len("dot", x.len(), y.len())?;
    scalar_out("dot", out.len())?;
    let ni = int("dot", "n", n)?;
    ready(t)?;
    let op = t.foreign(T::DOT.0, (x, y), (out,)).host(
        move |(x, y): (&[T], &[T]), (out,): (&mut [T],)| {
            out[0] = x.iter().zip(y).fold(T::ZERO, |s, (&x, &y)| s + x * y);
            Ok(())
        },
    );
    // SAFETY: `n` elements of the declared `x` and `y` (read), one of
    // `out` (written, device pointer mode); on the given stream; queued.
    unsafe {
        op.run(|s, (x, y), (out,)| {
            cuda::call(
                t.runtime(),
                (t.sid().index(), s.raw()),
                true,
                T::DOT.0,
                |h| (T::DOT.1)(h, ni, x.as_ptr(), 1, y.as_ptr(), 1, out.as_mut_ptr()),
            )
        })
    }
}

/// `out[0] = ||x||_2`, written in device memory (as [`dot`]).
///
/// # Errors
///
/// [`Error::Shape`] for an `out` that is not one element; otherwise as
/// [`Gemm::run`].
pub fn nrm2<T: Scalar>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    scalar_out("nrm2", out.len())?;
    let ni = int("nrm2", "n", x.len())?;
    ready(t)?;
    let op = t
        .foreign(T::NRM2.0, (x,), (out,))
        .host(move |(x,): (&[T],), (out,): (&mut [T],)| {
            out[0] = x.iter().fold(T::ZERO, |s, &x| s + x * x).sqrt();
            Ok(())
        });
    // SAFETY: `x.len()` elements of the declared `x` (read), one of `out`
    // (written, device pointer mode); on the given stream; queued.
    unsafe {
        op.run(|s, (x,), (out,)| {
            cuda::call(
                t.runtime(),
                (t.sid().index(), s.raw()),
                true,
                T::NRM2.0,
                |h| (T::NRM2.1)(h, ni, x.as_ptr(), 1, out.as_mut_ptr()),
            )
        })
    }
}

/// A triangular solve with several right-hand sides, in place:
/// `op(A) X = alpha B` ([`Side::Left`], `A` is `m x m`) or `X op(A) =
/// alpha B` ([`Side::Right`], `A` is `n x n`), `B` (`m x n`) overwritten
/// by `X`. Only `A`'s [`Uplo`] triangle is read. Built with [`Trsm::new`]
/// and its setters. A zero on the diagonal is not checked (as in BLAS).
#[derive(Clone, Copy, Debug)]
pub struct Trsm<T> {
    m: usize,
    n: usize,
    side: Side,
    uplo: Uplo,
    op: Op,
    diag: Diag,
    alpha: T,
    ld: [Option<usize>; 2],
}

impl<T: Scalar> Trsm<T> {
    /// `A X = B` for `B` of `m x n`, `A` lower, left, packed, `alpha = 1`.
    pub fn new(m: usize, n: usize) -> Self {
        Trsm {
            m,
            n,
            side: Side::Left,
            uplo: Uplo::Lower,
            op: Op::N,
            diag: Diag::NonUnit,
            alpha: T::ONE,
            ld: [None; 2],
        }
    }
    /// The side `A` is on.
    pub fn side(mut self, side: Side) -> Self {
        self.side = side;
        self
    }
    /// The triangle of `A` that holds it.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// `A` as stored or transposed.
    pub fn op(mut self, op: Op) -> Self {
        self.op = op;
        self
    }
    /// `A`'s diagonal read or taken as ones.
    pub fn diag(mut self, diag: Diag) -> Self {
        self.diag = diag;
        self
    }
    /// The factor of `B`.
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }
    /// The leading dimensions of `A` and `B`.
    pub fn ld(mut self, lda: usize, ldb: usize) -> Self {
        self.ld = [Some(lda), Some(ldb)];
        self
    }
    /// `A`'s order: `m` on the left, `n` on the right.
    fn order(&self) -> usize {
        match self.side {
            Side::Left => self.m,
            Side::Right => self.n,
        }
    }

    /// Queues the solve on `t`'s stream: `a` is read, `b` written.
    ///
    /// # Errors
    ///
    /// As [`Gemm::run`].
    pub fn run(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        b: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "trsm";
        let d = self.order();
        let lda = self.ld[0].unwrap_or(d.max(1));
        let ldb = self.ld[1].unwrap_or(self.m.max(1));
        let sa = span(OP, "A", d, d, lda)?;
        let sb = span(OP, "B", self.m, self.n, ldb)?;
        fits(OP, "A", sa, 1, sa, a.len(), false)?;
        fits(OP, "B", sb, 1, sb, b.len(), true)?;
        for (what, v) in [("m", self.m), ("n", self.n), ("lda", lda), ("ldb", ldb)] {
            int(OP, what, v)?;
        }
        ready(t)?;
        let g = *self;
        let op = t
            .foreign(T::TRSM.0, (a,), (b,))
            .host(move |(a,): (&[T],), (b,): (&mut [T],)| {
                T::host_trsm(&g, lda, ldb, a, b);
                Ok(())
            });
        // SAFETY: `A` and `B` within their checked spans, on the given
        // stream; queued (cuBLAS's trsm is asynchronous).
        unsafe {
            op.run(|s, (a,), (b,)| {
                cuda::trsm(
                    t.runtime(),
                    (t.sid().index(), s.raw()),
                    &g,
                    lda,
                    ldb,
                    a.as_ptr(),
                    b.as_mut_ptr(),
                )
            })
        }
    }
}

/// A symmetric rank-k update of one triangle: `C = alpha A A^T + beta C`
/// ([`Op::N`], `A` is `n x k`) or `C = alpha A^T A + beta C` ([`Op::T`], `A`
/// is `k x n`), `C` `n x n`, only its [`Uplo`] triangle read and written.
/// Built with [`Syrk::new`] and its setters.
#[derive(Clone, Copy, Debug)]
pub struct Syrk<T> {
    n: usize,
    k: usize,
    uplo: Uplo,
    op: Op,
    alpha: T,
    beta: T,
    ld: [Option<usize>; 2],
}

impl<T: Scalar> Syrk<T> {
    /// `C = A A^T` (lower) for `A` of `n x k`, packed.
    pub fn new(n: usize, k: usize) -> Self {
        Syrk {
            n,
            k,
            uplo: Uplo::Lower,
            op: Op::N,
            alpha: T::ONE,
            beta: T::ZERO,
            ld: [None; 2],
        }
    }
    /// The triangle of `C` computed.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// `A A^T` ([`Op::N`]) or `A^T A` ([`Op::T`]).
    pub fn op(mut self, op: Op) -> Self {
        self.op = op;
        self
    }
    /// The factor of the product.
    pub fn alpha(mut self, alpha: T) -> Self {
        self.alpha = alpha;
        self
    }
    /// The factor of `C`'s old value.
    pub fn beta(mut self, beta: T) -> Self {
        self.beta = beta;
        self
    }
    /// The leading dimensions of `A` and `C`.
    pub fn ld(mut self, lda: usize, ldc: usize) -> Self {
        self.ld = [Some(lda), Some(ldc)];
        self
    }

    /// Queues the update on `t`'s stream: `a` is read, `c` written.
    ///
    /// # Errors
    ///
    /// As [`Gemm::run`].
    pub fn run(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        c: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "syrk";
        let (ra, ca) = stored(self.op, self.n, self.k);
        let lda = self.ld[0].unwrap_or(ra.max(1));
        let ldc = self.ld[1].unwrap_or(self.n.max(1));
        let sa = span(OP, "A", ra, ca, lda)?;
        let sc = span(OP, "C", self.n, self.n, ldc)?;
        fits(OP, "A", sa, 1, sa, a.len(), false)?;
        fits(OP, "C", sc, 1, sc, c.len(), true)?;
        for (what, v) in [("n", self.n), ("k", self.k), ("lda", lda), ("ldc", ldc)] {
            int(OP, what, v)?;
        }
        ready(t)?;
        let g = *self;
        let op = t
            .foreign(T::SYRK.0, (a,), (c,))
            .host(move |(a,): (&[T],), (c,): (&mut [T],)| {
                host::syrk(&g, lda, ldc, a, c);
                Ok(())
            });
        // SAFETY: `A` and `C` within their checked spans, on the given
        // stream; queued (cuBLAS's syrk is asynchronous).
        unsafe {
            op.run(|s, (a,), (c,)| {
                cuda::syrk(
                    t.runtime(),
                    (t.sid().index(), s.raw()),
                    &g,
                    lda,
                    ldc,
                    a.as_ptr(),
                    c.as_mut_ptr(),
                )
            })
        }
    }
}
