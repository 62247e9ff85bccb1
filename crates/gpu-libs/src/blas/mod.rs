//! Dense linear algebra on a task's stream (DESIGN "Numerical libraries and foreign work"): cuBLAS on the CUDA
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
//! use gpu_libs::blas::{self, Gemm};
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
mod gemm;
mod host;
pub(crate) mod sealed;
mod triangular;
mod vector;

use gemm::Checked;
pub use gemm::{Gemm, Gemv};
pub use triangular::{Syrk, Trsm};
pub use vector::{axpy, axpy_dev, dot, nrm2, scal, scal_dev};

use gpu_sched::DeviceRepr;
use gpu_sched::TaskContext;
use gpu_sched::{Error, Result};

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

/// The cuBLAS functions the wrappers call, checked by the probe.
pub(crate) const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetPointerMode_v2",
    "cublasSetWorkspace_v2",
    "cublasGetStatusName",
    "cublasSgemm_v2",
    "cublasDgemm_v2",
    "cublasSgemmStridedBatched",
    "cublasDgemmStridedBatched",
    "cublasSgemmBatched",
    "cublasDgemmBatched",
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
pub(crate) fn int(op: &'static str, what: &str, x: usize) -> Result<std::ffi::c_int> {
    std::ffi::c_int::try_from(x).map_err(|_| Error::Shape {
        op,
        problem: format!("{what} = {x} does not fit cuBLAS's 32-bit int"),
    })
}

/// The elements a column-major `rows x cols` operand with leading
/// dimension `ld` spans, after checking `ld >= max(1, rows)`.
pub(crate) fn span(
    op: &'static str,
    name: &str,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<usize> {
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
pub(crate) fn fits(
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

/// cuBLAS loaded and probed on the CUDA backend (before anything is
/// queued); nothing on the host backend ([`crate::shared::ready`]).
fn ready(t: &TaskContext) -> Result<()> {
    crate::shared::ready::<cuda::Cublas>(t)
}
