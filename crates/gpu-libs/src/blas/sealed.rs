//! The sealed side of [`super::Scalar`]: each element type's cuBLAS
//! calls (by name and function) and host implementations.

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
/// cuBLAS's pointer-array batched `?gemm` (`?gemmBatched`).
pub(crate) type GemmPtrsFn<T> = unsafe fn(
    cublasHandle_t,
    cublasOperation_t,
    cublasOperation_t,
    c_int,
    c_int,
    c_int,
    *const T,
    *const *const T,
    c_int,
    *const *const T,
    c_int,
    *const T,
    *const *mut T,
    c_int,
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
pub(crate) type AxpyFn<T> =
    unsafe fn(cublasHandle_t, c_int, *const T, *const T, c_int, *mut T, c_int) -> cublasStatus_t;
/// cuBLAS's `?scal` (`_v2`).
pub(crate) type ScalFn<T> =
    unsafe fn(cublasHandle_t, c_int, *const T, *mut T, c_int) -> cublasStatus_t;
/// cuBLAS's `?dot` (`_v2`).
pub(crate) type DotFn<T> =
    unsafe fn(cublasHandle_t, c_int, *const T, c_int, *const T, c_int, *mut T) -> cublasStatus_t;
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
    /// The value's bits, as a word of a foreign operation's key
    /// (`Foreign::reuse_capture`): equal bits, the same value passed.
    fn bits(self) -> u64;
    /// The value of [`Sealed::bits`]' word.
    fn from_bits(bits: u64) -> Self;
    /// cuBLAS's gemm.
    const GEMM: (&'static str, GemmFn<Self>);
    /// cuBLAS's strided batched gemm.
    const GEMM_BATCHED: (&'static str, GemmBatchedFn<Self>);
    /// cuBLAS's pointer-array batched gemm.
    const GEMM_PTRS: (&'static str, GemmPtrsFn<Self>);
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
    /// `B = alpha B op(A)^-1`, shapes checked; `alpha = 0` zeroes `B`
    /// without reading `A`, as reference BLAS.
    fn host_trsm(s: &super::Trsm<Self>, lda: usize, ldb: usize, a: &[Self], b: &mut [Self]);
    /// The host backend's nrm2: `||x||_2`, scaled as LAPACK's (Blue's
    /// algorithm), so it overflows or underflows only where the norm does.
    fn host_nrm2(x: &[Self]) -> Self;
}

macro_rules! scalar {
    ($t:ty, $gemm:ident, $batched:ident, $ptrs:ident, $gemv:ident, $axpy:ident, $scal:ident, $dot:ident, $nrm2:ident, $trsm:ident, $syrk:ident, $host:path) => {
        impl Sealed for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn bits(self) -> u64 {
                u64::from(self.to_bits())
            }
            fn from_bits(bits: u64) -> Self {
                // The word of `bits`: the value's bits, zero-extended.
                <$t>::from_bits(bits as _)
            }
            const GEMM: (&'static str, GemmFn<Self>) =
                (stringify!($gemm), cudarc::cublas::sys::$gemm);
            const GEMM_BATCHED: (&'static str, GemmBatchedFn<Self>) =
                (stringify!($batched), cudarc::cublas::sys::$batched);
            const GEMM_PTRS: (&'static str, GemmPtrsFn<Self>) =
                (stringify!($ptrs), cudarc::cublas::sys::$ptrs);
            const GEMV: (&'static str, GemvFn<Self>) =
                (stringify!($gemv), cudarc::cublas::sys::$gemv);
            const AXPY: (&'static str, AxpyFn<Self>) =
                (stringify!($axpy), cudarc::cublas::sys::$axpy);
            const SCAL: (&'static str, ScalFn<Self>) =
                (stringify!($scal), cudarc::cublas::sys::$scal);
            const DOT: (&'static str, DotFn<Self>) = (stringify!($dot), cudarc::cublas::sys::$dot);
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
            fn host_nrm2(x: &[Self]) -> Self {
                super::host::nrm2!(x)
            }
        }
    };
}
scalar!(
    f32,
    cublasSgemm_v2,
    cublasSgemmStridedBatched,
    cublasSgemmBatched,
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
    cublasDgemmBatched,
    cublasDgemv_v2,
    cublasDaxpy_v2,
    cublasDscal_v2,
    cublasDdot_v2,
    cublasDnrm2_v2,
    cublasDtrsm_v2,
    cublasDsyrk_v2,
    matrixmultiply::dgemm
);
