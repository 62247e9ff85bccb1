//! Sparse matrices on a task's stream (DESIGN "Numerical libraries and foreign work"): a CSR matrix ([`Csr`]) whose
//! structure is validated on the host before upload and immutable after,
//! and its products with dense vectors ([`spmv`]) and matrices ([`Spmm`]):
//! cuSPARSE's generic API on the CUDA backend, plain loops on the host
//! backend. Each product is one tracked foreign operation: the matrix's
//! three arrays and the dense input are its reads, the output and
//! cuSPARSE's workspace its writes, so the ledger orders them as it orders
//! a launch; shapes and leading dimensions are checked against the buffers
//! before anything is queued ([`Error::Shape`]).
//!
//! Safety rests on the structure: `row_ptr` starts at 0, never decreases
//! and ends at `nnz`, and every column index is in `0..n`, checked by
//! [`Csr::from_host`]; safe code can change the values, never the indices,
//! so no product can read out of bounds. Column indices within a row need
//! not be sorted, and may repeat (their values add up).
//!
//! On the CUDA backend cuSPARSE is loaded on first use and probed
//! ([`Error::LibraryUnavailable`] where it is missing, never a panic).
//! Handles are pooled per stream slot and bound to the task's stream at
//! each call (as cuBLAS's, [`crate::blas`]); the workspace a product asks
//! for (`cusparseSpMV_bufferSize`, a host-only query) is a buffer allocated
//! on the task's stream and declared as a write of the product, so it is
//! freed in stream order once the product ran. Scalars come from the host
//! (`CUSPARSE_POINTER_MODE_HOST`). Products allocate, so they cannot be
//! recorded in a stream capture (`gpu::capture`: [`Error::Capturing`]);
//! a graphed scope (`gpu::Graphed`) takes them, its allocations reusing
//! graph-owned memory from run to run.
//!
//! A matrix without entries (`nnz = 0`, including `n = 0`) never reaches
//! cuSPARSE: its product is `beta C`, computed by a gemm of inner dimension
//! 0 ([`crate::blas::Gemm`]), which reads no operand and writes exactly
//! `C`'s `rows x k` part.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_libs::sparse::{self, Csr};
//! let rt = gpu_sched::Runtime::new(Default::default())?;
//! let t = rt.begin_task()?;
//! // [[2, 0, 1],
//! //  [0, 0, 0],
//! //  [0, 3, 0]]
//! let a = Csr::from_host(&t, 3, 3, &[0, 2, 2, 3], &[0, 2, 1], &[2.0f64, 1.0, 3.0])?;
//! let x = t.from_host(&[1.0, 2.0, 3.0])?;
//! let mut y = t.from_host(&[1.0, 1.0, 1.0])?;
//! sparse::spmv(&t, 1.0, &a, &x, 0.5, &mut y)?; // y = A x + y / 2
//! assert_eq!(t.to_vec(&y)?, [5.5, 0.5, 6.5]);
//! // A bad structure is refused before anything is uploaded.
//! assert!(Csr::from_host(&t, 1, 2, &[0, 1], &[2], &[1.0f64]).is_err());
//! # Ok(()) }
//! ```

mod cuda;
mod host;
mod ops;

pub use ops::{spmm, spmv, spmv_op, Spmm};

use crate::blas::Scalar;
use gpu_sched::TaskContext;
use gpu_sched::{Buffer, ViewMut};
use gpu_sched::{Error, Result};

/// The cuSPARSE functions the wrappers call, checked by the probe.
pub(crate) const SYMBOLS: &[&str] = &[
    "cusparseCreate",
    "cusparseDestroy",
    "cusparseSetStream",
    "cusparseSetPointerMode",
    "cusparseGetErrorName",
    "cusparseCreateConstCsr",
    "cusparseCreateConstDnVec",
    "cusparseCreateDnVec",
    "cusparseCreateConstDnMat",
    "cusparseCreateDnMat",
    "cusparseDestroySpMat",
    "cusparseDestroyDnVec",
    "cusparseDestroyDnMat",
    "cusparseSpMV_bufferSize",
    "cusparseSpMV",
    "cusparseSpMM_bufferSize",
    "cusparseSpMM",
];

/// An `m x n` sparse matrix in compressed sparse row form (zero-based,
/// 32-bit indices), in device memory: `row_ptr` (`m + 1` offsets),
/// `col_idx` and `values` (`nnz` each); row `i`'s entries are
/// `row_ptr[i]..row_ptr[i + 1]`. Made by [`Csr::from_host`], which checks
/// the structure; the indices cannot be changed after, the values can
/// ([`Csr::values_mut`], [`Csr::set_values`]).
#[derive(Debug)]
pub struct Csr<T: Scalar> {
    m: usize,
    n: usize,
    row_ptr: Buffer<i32>,
    col_idx: Buffer<i32>,
    values: Buffer<T>,
}

impl<T: Scalar> Csr<T> {
    /// The `m x n` matrix of the host arrays, uploaded on `t`'s stream
    /// after its structure was checked.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] (op `"Csr::from_host"`, nothing uploaded) unless:
    /// `row_ptr` has `m + 1` elements, `col_idx` and `values` as many as
    /// each other (`nnz`); `m`, `n` and `nnz` fit cuSPARSE's 32-bit
    /// indices; `row_ptr[0] == 0`, `row_ptr` never decreases and
    /// `row_ptr[m] == nnz`; every column index is in `0..n`. Otherwise as
    /// [`TaskContext::from_host`].
    pub fn from_host(
        t: &TaskContext,
        m: usize,
        n: usize,
        row_ptr: &[i32],
        col_idx: &[i32],
        values: &[T],
    ) -> Result<Self> {
        validate(m, n, row_ptr, col_idx, values.len())?;
        Ok(Csr {
            m,
            n,
            row_ptr: t.from_host(row_ptr)?,
            col_idx: t.from_host(col_idx)?,
            values: t.from_host(values)?,
        })
    }

    /// The rows.
    pub fn m(&self) -> usize {
        self.m
    }

    /// The columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The row offsets (`m + 1`), read-only.
    pub fn row_ptr(&self) -> &Buffer<i32> {
        &self.row_ptr
    }

    /// The column indices (`nnz`), read-only.
    pub fn col_idx(&self) -> &Buffer<i32> {
        &self.col_idx
    }

    /// The values (`nnz`), in the order of `col_idx`.
    pub fn values(&self) -> &Buffer<T> {
        &self.values
    }

    /// The values as a mutable view, for a kernel or a copy that writes
    /// them in place (a view: its length is the matrix's, whatever is done
    /// with it).
    ///
    /// # Errors
    ///
    /// None in practice (the whole range is in bounds); the
    /// [`Buffer::slice_mut`] error type.
    pub fn values_mut(&mut self) -> Result<ViewMut<'_, T>> {
        self.values.slice_mut(..)
    }

    /// Replaces the values by a copy of `values`, on `t`'s stream (the
    /// structure stays).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] unless `values` has `nnz` elements; otherwise as
    /// [`TaskContext::copy_from_host`].
    pub fn set_values(&mut self, t: &TaskContext, values: &[T]) -> Result<()> {
        if values.len() != self.nnz() {
            return Err(shape(
                "Csr::set_values",
                format!("{} values for {} entries", values.len(), self.nnz()),
            ));
        }
        t.copy_from_host(&mut self.values, values)
    }
}

/// The shape error of `op`.
fn shape(op: &'static str, problem: String) -> Error {
    Error::Shape { op, problem }
}

/// Checks a CSR structure: what [`Csr::from_host`] documents.
fn validate(m: usize, n: usize, row_ptr: &[i32], col_idx: &[i32], nvalues: usize) -> Result<()> {
    const OP: &str = "Csr::from_host";
    let max = i32::MAX as usize;
    if m > max - 1 || n > max {
        return Err(shape(
            OP,
            format!("{m} x {n} does not fit cuSPARSE's 32-bit indices"),
        ));
    }
    if row_ptr.len() != m + 1 {
        return Err(shape(
            OP,
            format!(
                "row_ptr has {} elements, m + 1 = {} expected",
                row_ptr.len(),
                m + 1
            ),
        ));
    }
    let nnz = col_idx.len();
    if nvalues != nnz {
        return Err(shape(
            OP,
            format!("col_idx has {nnz} elements, values {nvalues}"),
        ));
    }
    if nnz > max {
        return Err(shape(
            OP,
            format!("nnz = {nnz} does not fit cuSPARSE's 32-bit indices"),
        ));
    }
    if row_ptr[0] != 0 {
        return Err(shape(OP, format!("row_ptr[0] = {}, not 0", row_ptr[0])));
    }
    if let Some(i) = row_ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(shape(
            OP,
            format!(
                "row_ptr decreases: row_ptr[{}] = {} > row_ptr[{}] = {}",
                i,
                row_ptr[i],
                i + 1,
                row_ptr[i + 1]
            ),
        ));
    }
    if row_ptr[m] as usize != nnz {
        return Err(shape(
            OP,
            format!("row_ptr[m] = {}, nnz = {nnz}", row_ptr[m]),
        ));
    }
    if let Some(p) = col_idx.iter().position(|&c| c < 0 || c as usize >= n) {
        return Err(shape(
            OP,
            format!("col_idx[{p}] = {} is not in 0..n = 0..{n}", col_idx[p]),
        ));
    }
    Ok(())
}

/// cuSPARSE loaded and probed on the CUDA backend (before anything is
/// queued); nothing on the host backend ([`crate::shared::ready`]).
fn ready(t: &TaskContext) -> Result<()> {
    crate::shared::ready::<cuda::Cusparse>(t)
}
