//! The host backend's twins of the solver operations, through `faer`, over
//! the declared buffers as slices (shapes checked by the caller). Each
//! factorization returns LAPACK's `info` (0, or the failure's 1-based
//! index).

use super::Scalar;
use crate::blas::{Op, Uplo};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::triangular_solve as ts;
use faer::prelude::ReborrowMut;
use faer::{MatMut, MatRef, Par};

/// Cholesky of the `uplo` triangle of `A` (`n x n`, leading dimension
/// `lda`), in place: `L` (lower) or `U = L^T` (upper); the other triangle
/// untouched. The order of the first minor that is not positive definite,
/// or 0.
pub(super) fn potrf<T: Scalar>(uplo: Uplo, n: usize, lda: usize, a: &mut [T]) -> i32 {
    if n == 0 {
        return 0;
    }
    // faer may use the other triangle as scratch; LAPACK leaves it as it
    // is: kept here and put back.
    let other = |i: usize, j: usize| match uplo {
        Uplo::Lower => i < j,
        Uplo::Upper => i > j,
    };
    let idx: Vec<usize> = (0..n)
        .flat_map(|j| {
            (0..n)
                .filter(move |&i| other(i, j))
                .map(move |i| i + j * lda)
        })
        .collect();
    let kept: Vec<T> = idx.iter().map(|&x| a[x]).collect();
    let info = factor_lower(uplo, n, lda, a);
    for (&x, v) in idx.iter().zip(kept) {
        a[x] = v;
    }
    info
}

/// [`potrf`]'s factorization, through faer (which may write the other
/// triangle).
fn factor_lower<T: Scalar>(uplo: Uplo, n: usize, lda: usize, a: &mut [T]) -> i32 {
    use faer::linalg::cholesky::llt::factor;
    let a = MatMut::from_column_major_slice_with_stride_mut(a, n, n, lda);
    // faer factors the lower triangle; the upper one is its transpose.
    let a = match uplo {
        Uplo::Lower => a,
        Uplo::Upper => a.transpose_mut(),
    };
    let req = factor::cholesky_in_place_scratch::<T>(n, Par::Seq, Default::default());
    let mut buf = MemBuffer::new(req);
    let r = factor::cholesky_in_place(
        a,
        Default::default(),
        Par::Seq,
        MemStack::new(&mut buf),
        Default::default(),
    );
    match r {
        Ok(_) => 0,
        Err(factor::LltError::NonPositivePivot { index }) => index as i32 + 1,
    }
}

/// Solves `A X = B` with `A`'s Cholesky factor (the `uplo` triangle of
/// `a`) for `B` (`n x nrhs`) in place.
pub(super) fn potrs<T: Scalar>(
    (uplo, n, nrhs): (Uplo, usize, usize),
    (a, lda): (&[T], usize),
    (b, ldb): (&mut [T], usize),
) {
    if n == 0 || nrhs == 0 {
        return;
    }
    let f = MatRef::from_column_major_slice_with_stride(a, n, n, lda);
    let mut x = MatMut::from_column_major_slice_with_stride_mut(b, n, nrhs, ldb);
    // L L^T X = B: L Y = B, then L^T X = Y (U^T U: U^T Y = B, U X = Y).
    let l = match uplo {
        Uplo::Lower => f,
        Uplo::Upper => f.transpose(),
    };
    ts::solve_lower_triangular_in_place(l, x.rb_mut(), Par::Seq);
    ts::solve_upper_triangular_in_place(l.transpose(), x, Par::Seq);
}

/// LU with partial pivoting of `A` (`m x n`) in place: unit `L` below the
/// diagonal, `U` on and above it, LAPACK's `ipiv` (1-based: row `i` was
/// swapped with row `ipiv[i]` at step `i`). The index of the first exact
/// zero on `U`'s diagonal, or 0.
pub(super) fn getrf<T: Scalar>(
    (m, n, lda): (usize, usize, usize),
    a: &mut [T],
    ipiv: &mut [i32],
) -> i32 {
    use faer::linalg::lu::partial_pivoting::factor;
    let k = m.min(n);
    if k == 0 {
        return 0;
    }
    let mut perm = vec![0usize; m];
    let mut perm_inv = vec![0usize; m];
    {
        let am = MatMut::from_column_major_slice_with_stride_mut(&mut *a, m, n, lda);
        let req = factor::lu_in_place_scratch::<usize, T>(m, n, Par::Seq, Default::default());
        let mut buf = MemBuffer::new(req);
        factor::lu_in_place(
            am,
            &mut perm,
            &mut perm_inv,
            Par::Seq,
            MemStack::new(&mut buf),
            Default::default(),
        );
    }
    // faer's row permutation (row i of P A is row perm[i] of A) as the
    // swaps LAPACK records: at step i, row i and the row now holding
    // perm[i] trade places.
    let mut at: Vec<usize> = (0..m).collect(); // at[r]: where row r is now
    let mut row: Vec<usize> = (0..m).collect(); // row[p]: which row is at p
    for i in 0..k {
        let j = at[perm[i]];
        ipiv[i] = j as i32 + 1;
        let (ri, rj) = (row[i], row[j]);
        row.swap(i, j);
        at[ri] = j;
        at[rj] = i;
    }
    (0..k)
        .find(|&i| a[i + i * lda] == T::ZERO)
        .map_or(0, |i| i as i32 + 1)
}

/// Solves `op(A) X = B` with `A`'s LU factors and `ipiv` (from
/// [`getrf`]) for `B` (`n x nrhs`) in place.
pub(super) fn getrs<T: Scalar>(
    (op, n, nrhs): (Op, usize, usize),
    (a, lda, ipiv): (&[T], usize, &[i32]),
    (b, ldb): (&mut [T], usize),
) {
    if n == 0 || nrhs == 0 {
        return;
    }
    let f = MatRef::from_column_major_slice_with_stride(a, n, n, lda);
    let swap = |b: &mut [T], i: usize| {
        let j = ipiv[i] as usize - 1;
        if j != i {
            for c in 0..nrhs {
                b.swap(i + c * ldb, j + c * ldb);
            }
        }
    };
    match op {
        // P A = L U: A X = B is L U X = P B.
        Op::N => {
            (0..n).for_each(|i| swap(b, i));
            let mut x = MatMut::from_column_major_slice_with_stride_mut(b, n, nrhs, ldb);
            ts::solve_unit_lower_triangular_in_place(f, x.rb_mut(), Par::Seq);
            ts::solve_upper_triangular_in_place(f, x, Par::Seq);
        }
        // A^T X = B: U^T L^T P X = B.
        Op::T => {
            {
                let mut x = MatMut::from_column_major_slice_with_stride_mut(&mut *b, n, nrhs, ldb);
                ts::solve_lower_triangular_in_place(f.transpose(), x.rb_mut(), Par::Seq);
                ts::solve_unit_upper_triangular_in_place(f.transpose(), x, Par::Seq);
            }
            (0..n).rev().for_each(|i| swap(b, i));
        }
    }
}

/// QR of `A` (`m x n`) in place, as LAPACK's geqrf: `R` on and above the
/// diagonal, the Householder vectors below it (their leading ones
/// implied), `tau[i]` with `H_i = I - tau_i v_i v_i^T`.
pub(super) fn geqrf<T: Scalar>(m: usize, n: usize, lda: usize, a: &mut [T], tau: &mut [T]) {
    use faer::linalg::qr::no_pivoting::factor;
    let k = m.min(n);
    if k == 0 {
        return;
    }
    let am = MatMut::from_column_major_slice_with_stride_mut(a, m, n, lda);
    // Block size 1: faer's factor matrix is then 1 x k, entry i being the
    // `t_i` of `H_i = I - v_i v_i^T / t_i`, so LAPACK's tau is `1 / t_i`.
    let mut coeff = vec![T::ZERO; k];
    let c = MatMut::from_column_major_slice_with_stride_mut(&mut coeff, 1, k, 1);
    let req = factor::qr_in_place_scratch::<T>(m, n, 1, Par::Seq, Default::default());
    let mut buf = MemBuffer::new(req);
    factor::qr_in_place(am, c, Par::Seq, MemStack::new(&mut buf), Default::default());
    for (t, c) in tau.iter_mut().zip(coeff) {
        *t = if c == T::ZERO { T::ZERO } else { T::ONE / c };
    }
}
