//! The host backend's twins of the BLAS operations, over the declared
//! buffers as slices (shapes checked by the caller).

use super::sealed::Sealed;
use super::{Checked, Gemm, Gemv, Op, Syrk, Uplo};

/// The (row, column) strides of an operand used as `op` with leading
/// dimension `ld`, in elements.
fn strides(op: Op, ld: usize) -> (isize, isize) {
    match op {
        Op::N => (1, ld as isize),
        Op::T => (ld as isize, 1),
    }
}

/// `C = alpha op(A) op(B) + beta C` for each of the batch.
pub(super) fn gemm<T: Sealed>(g: &Gemm<T>, k: &Checked, a: &[T], b: &[T], c: &mut [T]) {
    let [lda, ldb, ldc] = k.ld;
    let (rsa, csa) = strides(g.op_a, lda);
    let (rsb, csb) = strides(g.op_b, ldb);
    if g.m == 0 || g.n == 0 {
        return;
    }
    for i in 0..k.count {
        let (oa, ob, oc) = (i * k.strides[0], i * k.strides[1], i * k.strides[2]);
        // SAFETY: `Gemm::check` proved that operand `i` of each matrix lies
        // within its slice (offset plus span at most its length) for these
        // strides, and that the outputs do not overlap; `c` is exclusive.
        unsafe {
            (T::HOST_GEMM)(
                g.m,
                g.k,
                g.n,
                g.alpha,
                a.as_ptr().wrapping_add(oa),
                rsa,
                csa,
                b.as_ptr().wrapping_add(ob),
                rsb,
                csb,
                g.beta,
                c.as_mut_ptr().add(oc),
                1,
                ldc as isize,
            )
        }
    }
}

/// `y = alpha op(A) x + beta y` (a gemm with one column).
pub(super) fn gemv<T: Sealed>(g: &Gemv<T>, lda: usize, a: &[T], x: &[T], y: &mut [T]) {
    let (rows, cols) = match g.op {
        Op::N => (g.m, g.n),
        Op::T => (g.n, g.m),
    };
    if rows == 0 {
        return;
    }
    let (rsa, csa) = strides(g.op, lda);
    // SAFETY: `Gemv::run` checked `A`'s span against `a` and the vectors'
    // lengths (`x` has `cols`, `y` `rows` elements); `y` is exclusive.
    unsafe {
        (T::HOST_GEMM)(
            rows,
            cols,
            1,
            g.alpha,
            a.as_ptr(),
            rsa,
            csa,
            x.as_ptr(),
            1,
            1,
            g.beta,
            y.as_mut_ptr(),
            1,
            1,
        )
    }
}

/// The host trsm of one element type (`faer`'s triangular solves are
/// generic over a trait of its own, so each type gets its expansion): the
/// body of `Sealed::host_trsm`, a `return`ing block.
macro_rules! trsm {
    ($s:expr, $lda:expr, $ldb:expr, $a:expr, $b:expr) => {{
        use faer::linalg::triangular_solve as ts;
        use faer::{MatMut, MatRef, Par};
        use $crate::blas::{Diag, Op, Side, Uplo};
        let (s, lda, ldb, a, b) = ($s, $lda, $ldb, $a, $b);
        if s.m == 0 || s.n == 0 {
            return;
        }
        let d = s.order();
        if s.alpha != Self::ONE {
            for j in 0..s.n {
                for x in &mut b[j * ldb..j * ldb + s.m] {
                    *x *= s.alpha;
                }
            }
        }
        // The shapes were checked (`Trsm::run`): faer's own asserts hold.
        let a = MatRef::from_column_major_slice_with_stride(a, d, d, lda);
        let b = MatMut::from_column_major_slice_with_stride_mut(b, s.m, s.n, ldb);
        // Left: op(A) X = B. Right: X op(A) = B, i.e. op(A)^T X^T = B^T.
        let (tri, rhs) = match (s.side, s.op) {
            (Side::Left, Op::N) | (Side::Right, Op::T) => (a, b),
            (Side::Left, Op::T) | (Side::Right, Op::N) => (a.transpose(), b),
        };
        let rhs = if s.side == Side::Right {
            rhs.transpose_mut()
        } else {
            rhs
        };
        // A transposed view of a lower triangle is an upper one.
        let transposed = matches!((s.side, s.op), (Side::Left, Op::T) | (Side::Right, Op::N));
        let lower = (s.uplo == Uplo::Lower) != transposed;
        match (lower, s.diag) {
            (true, Diag::NonUnit) => ts::solve_lower_triangular_in_place(tri, rhs, Par::Seq),
            (true, Diag::Unit) => ts::solve_unit_lower_triangular_in_place(tri, rhs, Par::Seq),
            (false, Diag::NonUnit) => ts::solve_upper_triangular_in_place(tri, rhs, Par::Seq),
            (false, Diag::Unit) => ts::solve_unit_upper_triangular_in_place(tri, rhs, Par::Seq),
        }
    }};
}
pub(super) use trsm;

/// `C = alpha op(A) op(A)^T + beta C` on `C`'s `uplo` triangle: the full
/// product into a scratch matrix (`matrixmultiply`), then the triangle.
pub(super) fn syrk<T: Sealed>(g: &Syrk<T>, lda: usize, ldc: usize, a: &[T], c: &mut [T]) {
    let n = g.n;
    if n == 0 {
        return;
    }
    let mut p = vec![T::ZERO; n * n];
    // op(A) is n x k: as stored (N) or transposed (T); op(A)^T the other.
    let (rs, cs) = strides(g.op, lda);
    // SAFETY: `Syrk::run` checked `A`'s span against `a` for these
    // strides; `p` is `n x n`, packed, exclusive.
    unsafe {
        (T::HOST_GEMM)(
            n,
            g.k,
            n,
            T::ONE,
            a.as_ptr(),
            rs,
            cs,
            a.as_ptr(),
            cs,
            rs,
            T::ZERO,
            p.as_mut_ptr(),
            1,
            n as isize,
        )
    }
    for j in 0..n {
        let rows = match g.uplo {
            Uplo::Lower => j..n,
            Uplo::Upper => 0..j + 1,
        };
        for i in rows {
            let x = &mut c[i + j * ldc];
            *x = if g.beta == T::ZERO {
                g.alpha * p[i + j * n]
            } else {
                g.alpha * p[i + j * n] + g.beta * *x
            };
        }
    }
}
