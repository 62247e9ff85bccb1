//! The host backend's twin of the products: plain loops over the declared
//! buffers as slices (the structure checked by `Csr::from_host`, the
//! shapes by the caller).

use super::ops::Plan;
use crate::blas::sealed::Sealed;
use crate::blas::{Op, Scalar};

/// `C = alpha op(A) B + beta C`, column by column; `beta = 0` writes `C`
/// without reading it (as cuSPARSE does).
pub(super) fn product<T: Scalar>(
    plan: &Plan<T>,
    row_ptr: &[i32],
    col_idx: &[i32],
    values: &[T],
    b: &[T],
    c: &mut [T],
) {
    let (rows, cols) = plan.dims();
    let (k, ldb, ldc) = plan.columns();
    let (alpha, beta) = (plan.alpha, plan.beta);
    let entries = |i: usize| row_ptr[i] as usize..row_ptr[i + 1] as usize;
    for j in 0..k {
        let x = &b[j * ldb..j * ldb + cols];
        let y = &mut c[j * ldc..j * ldc + rows];
        match plan.op {
            Op::N => {
                for (i, y) in y.iter_mut().enumerate() {
                    let s = entries(i).fold(<T as Sealed>::ZERO, |s, p| {
                        s + values[p] * x[col_idx[p] as usize]
                    });
                    *y = if beta == T::ZERO {
                        alpha * s
                    } else {
                        alpha * s + beta * *y
                    };
                }
            }
            Op::T => {
                for y in y.iter_mut() {
                    *y = if beta == T::ZERO { T::ZERO } else { beta * *y };
                }
                for (i, &xi) in x.iter().enumerate() {
                    let ax = alpha * xi;
                    for p in entries(i) {
                        let yc = &mut y[col_idx[p] as usize];
                        *yc = *yc + values[p] * ax;
                    }
                }
            }
        }
    }
}
