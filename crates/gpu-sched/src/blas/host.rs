//! The host backend's twins of the BLAS operations, over the declared
//! buffers as slices (shapes checked by the caller).

use super::sealed::Sealed;
use super::{Checked, Gemm, Gemv, Op};

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
