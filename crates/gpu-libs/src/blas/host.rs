//! The host backend's twins of the BLAS operations, over the declared
//! buffers as slices (shapes checked by the caller). They keep reference
//! BLAS's conventions where the arithmetic alone would differ: the quick
//! returns (an empty result, or `alpha = 0` with `beta = 1`, touches
//! nothing), `alpha = 0` reads neither `A` nor `B` nor `x` (so their NaNs
//! and infinities do not reach the result), `beta = 0` writes the output
//! without reading it, and `nrm2` scales (no overflow or underflow of the
//! squares).

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

/// `C = beta C` on the `rows x cols` matrix at `c` with leading dimension
/// `ld`, reference BLAS's way: `beta = 0` writes zeros without reading
/// `C`, `beta = 1` leaves it as it is.
fn scale<T: Sealed>(rows: usize, cols: usize, ld: usize, beta: T, c: &mut [T]) {
    if beta == T::ONE || rows == 0 {
        return;
    }
    for j in 0..cols {
        for x in &mut c[j * ld..j * ld + rows] {
            *x = if beta == T::ZERO { T::ZERO } else { beta * *x };
        }
    }
}

/// `C = alpha op(A) op(B) + beta C` for each of the batch, as reference
/// BLAS's gemm: nothing for `m = 0` or `n = 0`; `C = beta C` without
/// reading `A` or `B` for `alpha = 0` or `k = 0`; `beta = 0` writes `C`
/// without reading it (`matrixmultiply`'s convention too).
pub(super) fn gemm<T: Sealed>(g: &Gemm<T>, k: &Checked, a: &[T], b: &[T], c: &mut [T]) {
    let [lda, ldb, ldc] = k.ld;
    let (rsa, csa) = strides(g.op_a, lda);
    let (rsb, csb) = strides(g.op_b, ldb);
    if g.m == 0 || g.n == 0 {
        return;
    }
    if g.alpha == T::ZERO || g.k == 0 {
        for i in 0..k.count {
            scale(g.m, g.n, ldc, g.beta, &mut c[i * k.strides[2]..]);
        }
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

/// `y = alpha op(A) x + beta y` (a gemm with one column), as reference
/// BLAS's gemv: nothing at all for `m = 0` or `n = 0` (`y` is left as it
/// is, even for `beta = 0`: gemv's quick return, unlike gemm's `k = 0`);
/// `y = beta y` without reading `A` or `x` for `alpha = 0`; `beta = 0`
/// writes `y` without reading it.
pub(super) fn gemv<T: Sealed>(g: &Gemv<T>, lda: usize, a: &[T], x: &[T], y: &mut [T]) {
    let (rows, cols) = match g.op {
        Op::N => (g.m, g.n),
        Op::T => (g.n, g.m),
    };
    if rows == 0 || cols == 0 {
        return;
    }
    if g.alpha == T::ZERO {
        scale(rows, 1, rows, g.beta, y);
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
        // Reference BLAS: `alpha = 0` sets `B` to zero without reading `A`
        // (or `B`: its NaNs do not survive).
        if s.alpha == Self::ZERO {
            for j in 0..s.n {
                b[j * ldb..j * ldb + s.m].fill(Self::ZERO);
            }
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
/// As reference BLAS's syrk: nothing for `n = 0`; `C = beta C` (the
/// triangle) without reading `A` for `alpha = 0` or `k = 0`; `beta = 0`
/// writes the triangle without reading it.
pub(super) fn syrk<T: Sealed>(g: &Syrk<T>, lda: usize, ldc: usize, a: &[T], c: &mut [T]) {
    let n = g.n;
    if n == 0 {
        return;
    }
    if g.alpha == T::ZERO || g.k == 0 {
        if g.beta != T::ONE {
            for j in 0..n {
                let rows = match g.uplo {
                    Uplo::Lower => j..n,
                    Uplo::Upper => 0..j + 1,
                };
                for x in &mut c[j * ldc + rows.start..j * ldc + rows.end] {
                    *x = if g.beta == T::ZERO {
                        T::ZERO
                    } else {
                        g.beta * *x
                    };
                }
            }
        }
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

/// `y = alpha x + y`, as reference BLAS's axpy: nothing at all for `alpha
/// = 0` (`x` is not read, so its NaNs and infinities do not reach `y`).
pub(super) fn axpy<T: Sealed>(alpha: T, x: &[T], y: &mut [T]) {
    if alpha == T::ZERO {
        return;
    }
    y.iter_mut().zip(x).for_each(|(y, &x)| *y = alpha * x + *y);
}

/// The body of `Sealed::host_nrm2` for one element type (`Self`): `||x||_2`
/// by Blue's algorithm with Anderson's constants, as LAPACK 3.10's
/// `dnrm2.f90`: the squares of large values (above `tbig`) are summed
/// scaled down by `sbig`, those of small ones (below `tsml`) scaled up by
/// `ssml`, the rest as they are, so no square overflows or underflows
/// unless the norm itself does. An infinity gives infinity, a NaN (and no
/// infinity) NaN; an empty `x` gives 0.
macro_rules! nrm2 {
    ($x:expr) => {{
        let x: &[Self] = $x;
        // LAPACK's exponents: Fortran's MINEXPONENT, MAXEXPONENT and
        // DIGITS are Rust's MIN_EXP, MAX_EXP and MANTISSA_DIGITS.
        let (min, max, digits) = (Self::MIN_EXP, Self::MAX_EXP, Self::MANTISSA_DIGITS as i32);
        let ceil_half = |e: i32| -((-e).div_euclid(2));
        let two: Self = 2.0;
        let tsml = two.powi(ceil_half(min - 1));
        let tbig = two.powi((max - digits + 1).div_euclid(2));
        let ssml = two.powi(-(min - digits).div_euclid(2));
        let sbig = two.powi(-ceil_half(max + digits - 1));
        let (mut asml, mut amed, mut abig): (Self, Self, Self) = (0.0, 0.0, 0.0);
        let mut notbig = true;
        for &v in x {
            let ax = v.abs();
            if ax > tbig {
                abig += (ax * sbig) * (ax * sbig);
                notbig = false;
            } else if ax < tsml {
                if notbig {
                    asml += (ax * ssml) * (ax * ssml);
                }
            } else {
                // NaN lands here (no comparison holds) and stays.
                amed += ax * ax;
            }
        }
        let (scl, sumsq) = if abig > 0.0 {
            if amed > 0.0 || amed.is_nan() {
                abig += (amed * sbig) * sbig;
            }
            (1.0 / sbig, abig)
        } else if asml > 0.0 {
            if amed > 0.0 || amed.is_nan() {
                let amed = amed.sqrt();
                let asml = asml.sqrt() / ssml;
                let (ymin, ymax) = if asml > amed {
                    (amed, asml)
                } else {
                    (asml, amed)
                };
                (1.0, ymax * ymax * (1.0 + (ymin / ymax) * (ymin / ymax)))
            } else {
                (1.0 / ssml, asml)
            }
        } else {
            (1.0, amed)
        };
        scl * sumsq.sqrt()
    }};
}
pub(super) use nrm2;
