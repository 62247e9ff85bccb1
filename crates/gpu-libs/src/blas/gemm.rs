//! The products: [`Gemm`] (and its strided batches) and [`Gemv`].

use super::{cuda, fits, host, int, ready, span, stored, Op, Scalar};
use crate::shared::stream_of;
use gpu_sched::TaskContext;
use gpu_sched::{DeviceSlice, DeviceSliceMut};
use gpu_sched::{Error, Result};

/// `C = alpha op(A) op(B) + beta C` (`C` is `m x n`, `op(A)` `m x k`,
/// `op(B)` `k x n`), or a batch of them `stride_*` elements apart
/// ([`Gemm::batched`]). Built with [`Gemm::new`] and its setters; the
/// leading dimensions default to the stored rows (packed matrices).
#[derive(Clone, Copy, Debug)]
pub struct Gemm<T> {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) op_a: Op,
    pub(super) op_b: Op,
    pub(super) alpha: T,
    pub(super) beta: T,
    pub(super) ld: [Option<usize>; 3],
    pub(super) batch: Option<(usize, [usize; 3])>,
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

    /// The words of the call `cuda::gemm` makes for `self` checked as `k`,
    /// besides the operands' pointers (`Foreign::reuse_capture`'s key):
    /// batched or not (the op name is the same), the ops, the sizes, the
    /// factors' bits, the leading dimensions, the batch count and strides.
    fn key(&self, k: &Checked) -> [u64; 15] {
        let [lda, ldb, ldc] = k.ld.map(|x| x as u64);
        let [sa, sb, sc] = k.strides.map(|x| x as u64);
        [
            u64::from(self.batch.is_some()),
            self.op_a as u64,
            self.op_b as u64,
            self.m as u64,
            self.n as u64,
            self.k as u64,
            self.alpha.bits(),
            self.beta.bits(),
            lda,
            ldb,
            ldc,
            k.count as u64,
            sa,
            sb,
            sc,
        ]
    }

    /// Queues the product on `t`'s stream: `a` and `b` are read, `c` is
    /// written (and read where `beta != 0`).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when a buffer is too short for its operand (or
    /// operands) or a leading dimension is below the stored rows;
    /// [`Error::LibraryUnavailable`] without cuBLAS; [`Error::Library`]
    /// for a cuBLAS failure; the errors of a launch
    /// ([`Error::WrongDevice`] for another runtime's buffer). Captures
    /// and graphed scopes take cuBLAS's calls (through handles kept for
    /// captures, without a workspace).
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
        let key = g.key(&k);
        let op = match g.batch {
            // SAFETY: in a capture, through a handle of the capture slot
            // (`shared::CAPTURE_SLOT`, no workspace: `cuda::call`), cuBLAS
            // queues kernels whose parameters are the declared `a`, `b`
            // and `c`'s pointers and the keyed values (every value
            // `cuda::gemm` passes besides them, from `g` and `k`; host
            // pointer mode, the factors by their bits; the name tells the
            // element type), which use no memory besides `a`, `b` and `c`
            // (the handle, in the runtime's pool, lives as long as the
            // runtime).
            Some(_) => unsafe { op.reuse_capture(&key) },
            // SAFETY: as the arm above, and: `cuda::gemm_group` makes one
            // `?gemmBatched` of the group's gemms, each of this key and
            // its own `a`, `b`, `c` (buffers 0, 1, 2), through the
            // capture slot's handle, reading only the pointer arrays
            // besides; cuBLAS documents the batched call as the gemms one
            // by one (outputs that do not overlap: the runtime merges only
            // operations whose accesses do not conflict).
            None => unsafe { op.batchable(&key, cuda::gemm_group::<T>) },
        };
        // SAFETY: the call reads `A` and `B` and writes `C` within the spans
        // checked above against the declared buffers (`check`), on the
        // stream it is given (the handle is bound to it), and returns once
        // queued (cuBLAS's gemm is asynchronous).
        unsafe {
            op.run(|s, (a, b), (c,)| {
                cuda::gemm(
                    t.runtime(),
                    stream_of(s),
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
pub(super) struct Checked {
    pub(super) ld: [usize; 3],
    pub(super) count: usize,
    pub(super) strides: [usize; 3],
}

/// `y = alpha op(A) x + beta y`, `A` stored `m x n`. Built with
/// [`Gemv::new`] and its setters.
#[derive(Clone, Copy, Debug)]
pub struct Gemv<T> {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) op: Op,
    pub(super) alpha: T,
    pub(super) beta: T,
    pub(super) lda: Option<usize>,
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
        // Every value `cuda::gemv` passes besides the operands' pointers:
        // the op, the sizes, the factors' bits, `lda`, the increments.
        let key = [
            g.op as u64,
            g.m as u64,
            g.n as u64,
            g.alpha.bits(),
            g.beta.bits(),
            lda as u64,
            cuda::GEMV_INC as u64,
        ];
        // SAFETY: as in `Gemm::run`: through a capture slot's handle,
        // kernels whose parameters are the declared `a`, `x` and `y`'s
        // pointers and the keyed values; no other memory.
        let op = unsafe { op.reuse_capture(&key) };
        // SAFETY: as in `Gemm::run`: `A` within its checked span, `x` and
        // `y` of exactly the lengths used, on the given stream, queued.
        unsafe {
            op.run(|s, (a, x), (y,)| {
                cuda::gemv(
                    t.runtime(),
                    stream_of(s),
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
