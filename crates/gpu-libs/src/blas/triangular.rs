//! The triangular and symmetric operations: [`Trsm`] and [`Syrk`].

use super::{cuda, fits, host, int, ready, span, stored, Diag, Op, Scalar, Side, Uplo};
use crate::shared::stream_of;
use gpu_sched::Result;
use gpu_sched::TaskContext;
use gpu_sched::{DeviceSlice, DeviceSliceMut};

/// A triangular solve with several right-hand sides, in place:
/// `op(A) X = alpha B` ([`Side::Left`], `A` is `m x m`) or `X op(A) =
/// alpha B` ([`Side::Right`], `A` is `n x n`), `B` (`m x n`) overwritten
/// by `X`. Only `A`'s [`Uplo`] triangle is read. Built with [`Trsm::new`]
/// and its setters. A zero on the diagonal is not checked (as in BLAS).
#[derive(Clone, Copy, Debug)]
pub struct Trsm<T> {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) side: Side,
    pub(super) uplo: Uplo,
    pub(super) op: Op,
    pub(super) diag: Diag,
    pub(super) alpha: T,
    pub(super) ld: [Option<usize>; 2],
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
    pub(super) fn order(&self) -> usize {
        match self.side {
            Side::Left => self.m,
            Side::Right => self.n,
        }
    }

    /// Queues the solve on `t`'s stream: `a` is read, `b` written.
    ///
    /// # Errors
    ///
    /// As [`Gemm::run`](super::Gemm::run).
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
        if self.alpha == T::ZERO && self.m > 0 && self.n > 0 {
            // Reference BLAS: B = 0, A not read (cuBLAS solves with A
            // anyway: NaN for a zero pivot or a NaN in B, seen on an H100).
            // A gemm of inner dimension 0 with beta = 0 writes the zeros.
            return super::Gemm::new(self.m, self.n, 0)
                .beta(T::ZERO)
                .ld(self.m, 1, ldb)
                .run(t, a, a, b);
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
            op.capture_safe().run(|s, (a,), (b,)| {
                cuda::trsm(
                    t.runtime(),
                    stream_of(s),
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
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) uplo: Uplo,
    pub(super) op: Op,
    pub(super) alpha: T,
    pub(super) beta: T,
    pub(super) ld: [Option<usize>; 2],
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
    /// As [`Gemm::run`](super::Gemm::run).
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
        // Reference BLAS: with alpha = 0, A is not read (C = beta C);
        // cuBLAS computes 0 * A A^T (NaN from a NaN in A, seen on an H100),
        // and follows the reference with k = 0.
        let dev = if g.alpha == T::ZERO {
            Syrk { k: 0, ..g }
        } else {
            g
        };
        let op = t
            .foreign(T::SYRK.0, (a,), (c,))
            .host(move |(a,): (&[T],), (c,): (&mut [T],)| {
                host::syrk(&g, lda, ldc, a, c);
                Ok(())
            });
        // SAFETY: `A` and `C` within their checked spans, on the given
        // stream; queued (cuBLAS's syrk is asynchronous).
        unsafe {
            op.capture_safe().run(|s, (a,), (c,)| {
                cuda::syrk(
                    t.runtime(),
                    stream_of(s),
                    &dev,
                    lda,
                    ldc,
                    a.as_ptr(),
                    c.as_mut_ptr(),
                )
            })
        }
    }
}
