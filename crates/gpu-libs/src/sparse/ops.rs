//! The products: [`spmv`] (and [`spmv_op`]) and [`Spmm`] (and [`spmm`]),
//! each checked against its buffers, then one foreign operation over the
//! matrix's three arrays, the dense operands and cuSPARSE's workspace.

use super::{cuda, host, ready, shape, Csr};
use crate::blas::{Gemm, Op, Scalar};
use crate::shared::stream_of;
use gpu_sched::Result;
use gpu_sched::{BackendKind, TaskContext};
use gpu_sched::{DeviceSlice, DeviceSliceMut};

/// The dense operands of an SpMM: `k` columns, leading dimensions.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dense {
    pub(super) k: usize,
    pub(super) ldb: usize,
    pub(super) ldc: usize,
}

/// One checked product as the backends get it: `C = alpha op(A) B + beta
/// C`, an SpMV (`mat: None`, `B` and `C` vectors) or an SpMM.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan<T> {
    pub(super) op: Op,
    pub(super) alpha: T,
    pub(super) beta: T,
    /// `A`'s stored rows, columns and entries.
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) nnz: usize,
    pub(super) mat: Option<Dense>,
}

impl<T> Plan<T> {
    /// The rows and columns of `op(A)`.
    pub(super) fn dims(&self) -> (usize, usize) {
        match self.op {
            Op::N => (self.m, self.n),
            Op::T => (self.n, self.m),
        }
    }

    /// `k`, `ldb`, `ldc`: an SpMV's vectors are one packed column.
    pub(super) fn columns(&self) -> (usize, usize, usize) {
        let (rows, cols) = self.dims();
        match self.mat {
            None => (1, cols.max(1), rows.max(1)),
            Some(d) => (d.k, d.ldb, d.ldc),
        }
    }
}

/// The device addresses of a product's operands.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ptrs {
    pub(super) row_ptr: u64,
    pub(super) col_idx: u64,
    pub(super) values: u64,
    pub(super) b: u64,
    pub(super) c: u64,
}

/// `y = alpha A x + beta y` for `A` of `m x n`, `x` of exactly `n`
/// elements and `y` of exactly `m` (`beta = 0`: `y` is only written).
///
/// # Errors
///
/// [`Error::Shape`](gpu_sched::Error::Shape) for vectors of other lengths
/// (nothing queued); [`Error::LibraryUnavailable`](gpu_sched::Error::LibraryUnavailable)
/// without cuSPARSE; [`Error::Library`](gpu_sched::Error::Library) for a
/// cuSPARSE failure; [`Error::Capturing`](gpu_sched::Error::Capturing) in a
/// stream capture (the workspace is allocated; a graphed scope takes it);
/// the errors of a launch
/// ([`Error::WrongDevice`](gpu_sched::Error::WrongDevice) for another runtime's
/// buffer).
pub fn spmv<T: Scalar>(
    t: &TaskContext,
    alpha: T,
    a: &Csr<T>,
    x: &(impl DeviceSlice<T> + ?Sized),
    beta: T,
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    spmv_op(t, Op::N, alpha, a, x, beta, y)
}

/// `y = alpha op(A) x + beta y`: [`spmv`] with `A` as stored
/// ([`Op::N`]) or transposed ([`Op::T`]: `x` of `m` elements, `y` of `n`).
///
/// # Errors
///
/// As [`spmv`].
pub fn spmv_op<T: Scalar>(
    t: &TaskContext,
    op: Op,
    alpha: T,
    a: &Csr<T>,
    x: &(impl DeviceSlice<T> + ?Sized),
    beta: T,
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    const OP: &str = "spmv";
    let plan = Plan {
        op,
        alpha,
        beta,
        m: a.m,
        n: a.n,
        nnz: a.nnz(),
        mat: None,
    };
    let (rows, cols) = plan.dims();
    if x.len() != cols {
        return Err(shape(
            OP,
            format!("x has {} elements, op(A) takes {cols}", x.len()),
        ));
    }
    if y.len() != rows {
        return Err(shape(
            OP,
            format!("y has {} elements, op(A) gives {rows}", y.len()),
        ));
    }
    product(t, plan, a, x, y)
}

/// `C = alpha op(A) B + beta C`: `op(A)` (`rows x cols`) times `B`
/// (`cols x k`), `B` and `C` (`rows x k`) dense and column-major, as in
/// BLAS (element `(i, j)` at `i + j * ld`). Built with [`Spmm::new`] and
/// its setters; the leading dimensions default to the rows (packed).
/// Only `C`'s `rows x k` part is written.
#[derive(Clone, Copy, Debug)]
pub struct Spmm<T> {
    k: usize,
    op: Op,
    alpha: T,
    beta: T,
    ld: [Option<usize>; 2],
}

impl<T: Scalar> Spmm<T> {
    /// `C = A B` for `B` of `k` columns, packed.
    pub fn new(k: usize) -> Self {
        Spmm {
            k,
            op: Op::N,
            alpha: T::ONE,
            beta: T::ZERO,
            ld: [None; 2],
        }
    }
    /// Uses `A` as stored or transposed.
    pub fn op(mut self, op: Op) -> Self {
        self.op = op;
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
    /// The leading dimensions of `B` and `C`.
    pub fn ld(mut self, ldb: usize, ldc: usize) -> Self {
        self.ld = [Some(ldb), Some(ldc)];
        self
    }

    /// Queues the product on `t`'s stream: `a` and `b` are read, `c` is
    /// written (and read where `beta != 0`).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`](gpu_sched::Error::Shape) when a leading dimension is
    /// below its operand's rows or a buffer is shorter than its operand's
    /// span (nothing queued); otherwise as [`spmv`].
    pub fn run(
        &self,
        t: &TaskContext,
        a: &Csr<T>,
        b: &(impl DeviceSlice<T> + ?Sized),
        c: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "spmm";
        let mut plan = Plan {
            op: self.op,
            alpha: self.alpha,
            beta: self.beta,
            m: a.m,
            n: a.n,
            nnz: a.nnz(),
            mat: None,
        };
        let (rows, cols) = plan.dims();
        let ldb = self.ld[0].unwrap_or(cols.max(1));
        let ldc = self.ld[1].unwrap_or(rows.max(1));
        let sb = span(OP, "B", cols, self.k, ldb)?;
        let sc = span(OP, "C", rows, self.k, ldc)?;
        for (name, need, len) in [("B", sb, b.len()), ("C", sc, c.len())] {
            if len < need {
                return Err(shape(
                    OP,
                    format!("{name} has {len} elements, {need} needed"),
                ));
            }
        }
        plan.mat = Some(Dense {
            k: self.k,
            ldb,
            ldc,
        });
        product(t, plan, a, b, c)
    }
}

/// `C = alpha A B + beta C` for `B` (`n x k`) and `C` (`m x k`) packed:
/// `Spmm::new(k).alpha(alpha).beta(beta).run(t, a, b, c)`.
///
/// # Errors
///
/// As [`Spmm::run`].
pub fn spmm<T: Scalar>(
    t: &TaskContext,
    k: usize,
    alpha: T,
    a: &Csr<T>,
    b: &(impl DeviceSlice<T> + ?Sized),
    beta: T,
    c: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    Spmm::new(k).alpha(alpha).beta(beta).run(t, a, b, c)
}

/// The elements a column-major `rows x cols` operand with leading
/// dimension `ld` spans, after checking `ld >= max(1, rows)`.
fn span(op: &'static str, name: &str, rows: usize, cols: usize, ld: usize) -> Result<usize> {
    if ld < rows.max(1) {
        return Err(shape(
            op,
            format!("{name}: leading dimension {ld} < max(1, rows = {rows})"),
        ));
    }
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    ld.checked_mul(cols - 1)
        .and_then(|x| x.checked_add(rows))
        .ok_or_else(|| {
            shape(
                op,
                format!("{name}: {rows} x {cols} with leading dimension {ld} overflows"),
            )
        })
}

/// Queues a checked product: nothing for an empty `C`; `beta C` by a gemm
/// of inner dimension 0 for a matrix without entries; else the workspace's
/// size asked of cuSPARSE (host-only), the workspace allocated on the
/// task's stream, and one foreign operation.
fn product<T: Scalar>(
    t: &TaskContext,
    plan: Plan<T>,
    a: &Csr<T>,
    b: &(impl DeviceSlice<T> + ?Sized),
    c: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let (rows, _) = plan.dims();
    let (k, ldb, ldc) = plan.columns();
    if rows == 0 || k == 0 {
        return Ok(());
    }
    if plan.nnz == 0 {
        // `values` is empty: the gemm's `A` (`rows x 0`) and `B` (`0 x k`).
        return Gemm::new(rows, k, 0)
            .beta(plan.beta)
            .ld(rows, 1, ldc)
            .run(t, &a.values, &a.values, c);
    }
    ready(t)?;
    let rt = t.runtime();
    let size = match rt.backend() {
        BackendKind::Host => 0,
        BackendKind::Cuda => {
            let s = t.stream_slot()?;
            let p = Ptrs {
                row_ptr: a.row_ptr.device_ptr(),
                col_idx: a.col_idx.device_ptr(),
                values: a.values.device_ptr(),
                b: b.device_ptr(),
                c: c.device_ptr(),
            };
            // SAFETY: the plan was checked against these operands; the
            // query reads no device memory and queues nothing; the
            // runtime's context is current (bound above).
            unsafe { cuda::buffer_size(rt, (s.slot(), s.raw()), &plan, &p) }?
        }
    };
    let mut work = t.alloc::<u8>(size)?;
    let name = if plan.mat.is_none() {
        "cusparseSpMV"
    } else {
        "cusparseSpMM"
    };
    let op = t
        .foreign(name, (&a.row_ptr, &a.col_idx, &a.values, b), (c, &mut work))
        .host(
            move |(rp, ci, v, b): (&[i32], &[i32], &[T], &[T]), (c, _): (&mut [T], &mut [u8])| {
                host::product(&plan, rp, ci, v, b, c);
                Ok(())
            },
        );
    // Every value `cuda::product` passes besides the operands' addresses:
    // the op, `A`'s sizes, the factors' bits, the dense operands' columns
    // and leading dimensions, the value type, the algorithm, and the
    // workspace's size.
    let [value_type, alg] = cuda::options(&plan);
    let key = [
        plan.op as u64,
        plan.m as u64,
        plan.n as u64,
        plan.nnz as u64,
        plan.alpha.bits(),
        plan.beta.bits(),
        k as u64,
        ldb as u64,
        ldc as u64,
        value_type,
        alg,
        size as u64,
    ];
    // SAFETY: in a capture, cuSPARSE's descriptors, made per call
    // (`cuda::Operands`), hold host copies of the declared arrays'
    // addresses and of keyed sizes only, and the scalars are read from the
    // host at the call (host pointer mode, keyed by their bits): the
    // kernels it queues through a capture slot's handle have the declared
    // arrays' addresses and the keyed values as parameters, and use no
    // memory besides the declared arrays and the declared workspace `work`
    // (the handle, in the runtime's pool, lives as long as the runtime).
    let op = unsafe { op.reuse_capture(&key) };
    // SAFETY: the matrix's arrays hold a structure `Csr::from_host`
    // checked (offsets within `nnz`, columns within `n`), and `b` and `c`
    // the spans the plan was checked for; the workspace holds the `size`
    // bytes cuSPARSE asked for these operands; all on the given stream;
    // queued (cuSPARSE's products are asynchronous).
    unsafe {
        op.run(|s, (rp, ci, v, b), (c, w)| {
            let p = Ptrs {
                row_ptr: rp.raw(),
                col_idx: ci.raw(),
                values: v.raw(),
                b: b.raw(),
                c: c.raw(),
            };
            cuda::product(rt, stream_of(s), &plan, &p, (w.raw(), size))
        })
    }
}
