//! Reference reductions in the kernels' order (kernels `reduce_*`,
//! `src/cuda/reduce.cu`).
//!
//! Unlike [`host::sum`](super::sum), which adds from index 0 onwards, these
//! follow the device's partition and order step for step, so that their
//! results are bit-identical to the kernels' (same roundings, no fused
//! multiply-add, the same order of every operation):
//!
//! 1. `n` elements are cut into [`reduce_parts`]`(n)` parts of
//!    [`reduce_chunk`]`(n)` elements (the last ones shorter or empty); each
//!    part is reduced by one block of [`BLOCK`] threads into a partial;
//! 2. in a part starting at `begin`, thread `t` folds elements `begin + t`,
//!    `begin + t + BLOCK`, ... in index order into an accumulator that starts
//!    at the identity (`0`, `+inf` or `-inf`);
//! 3. each warp of 32 accumulators is combined as a tree: at offsets 16, 8,
//!    4, 2, 1, `v[i] = v[i] op v[i + offset]` for `i < offset`; then the
//!    `BLOCK / 32` warp results the same way, from offset `BLOCK / 64`;
//! 4. with more than one part, the partials are reduced the same way as one
//!    part (at most [`REDUCE_PARTS`](crate::REDUCE_PARTS) elements).
//!
//! `min` and `max` skip NaN and order `-0` below `+0` (IEEE 754-2019
//! `minimumNumber` / `maximumNumber`): the result is the least (greatest)
//! non-NaN element, which does not depend on the order at all, and `+inf`
//! (`-inf`) when there is none (no elements, or only NaN).
//!
//! # Examples
//!
//! ```
//! use gpu_kernels::host::reduce;
//!
//! let x = [1.0_f32, -2.0, 3.5, f32::NAN];
//! assert_eq!(reduce::min(&x), -2.0);
//! assert_eq!(reduce::max(&x), 3.5);
//! assert_eq!(reduce::sum(&x[..3]), 2.5);
//! assert_eq!(reduce::dot(&x[..3], &x[..3]), 17.25);
//! assert_eq!(reduce::sum_f64(&[0.1_f32; 10]), 10.0 * f64::from(0.1_f32));
//! assert_eq!(reduce::min::<f64>(&[]), f64::INFINITY);
//! ```

use crate::{reduce_chunk, reduce_parts, BLOCK};
use std::ops::{Add, Mul};

#[cfg(test)]
mod test;

const B: usize = BLOCK as usize;
const WARPS: usize = B / 32;

/// `f32` or `f64`: what the references need of an element or accumulator.
pub trait Real: Copy + PartialOrd + Add<Output = Self> + Mul<Output = Self> + Default {
    /// Positive infinity.
    const INFINITY: Self;
    /// Whether the sign bit is set (`-0.0` included).
    fn is_sign_negative(self) -> bool;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// The negation.
    fn neg(self) -> Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            const INFINITY: Self = <$t>::INFINITY;
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn neg(self) -> Self {
                -self
            }
        }
    };
}
real!(f32);
real!(f64);

/// `b` if it is less than `a` (`-0 < +0`) or `a` is NaN, else `a`
/// (`gk_min` of the kernels).
fn minimum<T: Real>(a: T, b: T) -> T {
    if b < a || a.is_nan() || (b == a && b.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// `b` if it is greater than `a` (`+0 > -0`) or `a` is NaN, else `a`
/// (`gk_max` of the kernels).
fn maximum<T: Real>(a: T, b: T) -> T {
    if b > a || a.is_nan() || (b == a && !b.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// `v[0]` becomes the combination of `v` (a power of two long) in the
/// kernels' shuffle-down tree.
fn tree<A: Copy>(v: &mut [A], combine: &impl Fn(A, A) -> A) {
    let mut offset = v.len() / 2;
    while offset > 0 {
        for i in 0..offset {
            v[i] = combine(v[i], v[i + offset]);
        }
        offset /= 2;
    }
}

/// One launch of a `reduce_*` kernel over `n` elements: part `p` into
/// `partials[p]`, for the first `reduce_parts(n)` slots.
///
/// # Panics
///
/// If `partials` is shorter than `reduce_parts(n)`.
pub(crate) fn pass<A: Copy>(
    n: usize,
    identity: A,
    load: impl Fn(usize) -> A,
    combine: impl Fn(A, A) -> A,
    partials: &mut [A],
) {
    let parts = reduce_parts(n as u64) as usize;
    let chunk = reduce_chunk(n as u64) as usize;
    for (p, partial) in partials[..parts].iter_mut().enumerate() {
        let begin = (p * chunk).min(n);
        let end = (begin + chunk).min(n);
        let mut lanes = [identity; B];
        // Row by row: thread t folds begin + t, begin + t + B, ... in order.
        for row in (begin..end).step_by(B) {
            for (t, lane) in lanes.iter_mut().enumerate().take(end - row) {
                *lane = combine(*lane, load(row + t));
            }
        }
        let mut warps = [identity; WARPS];
        for (w, warp) in lanes.chunks_mut(32).enumerate() {
            tree(warp, &combine);
            warps[w] = warp[0];
        }
        tree(&mut warps, &combine);
        *partial = warps[0];
    }
}

/// Both passes over `n` elements, as the wrappers launch them.
fn two_pass<A: Copy>(
    n: usize,
    identity: A,
    load: impl Fn(usize) -> A,
    combine: impl Fn(A, A) -> A + Copy,
) -> A {
    let parts = reduce_parts(n as u64) as usize;
    let mut partials = vec![identity; parts];
    pass(n, identity, load, combine, &mut partials);
    if parts == 1 {
        return partials[0];
    }
    let mut out = [identity];
    pass(parts, identity, |i| partials[i], combine, &mut out);
    out[0]
}

fn add<T: Real>(a: T, b: T) -> T {
    a + b
}

/// Sum of `x` in the kernels' order (`reduce_sum_f32`, `reduce_sum_f64`);
/// `+0.0` for no elements.
pub fn sum<T: Real>(x: &[T]) -> T {
    two_pass(x.len(), T::default(), |i| x[i], add)
}

/// Sum of `f32` elements, each widened to `f64` and added in `f64`, in the
/// kernels' order (`reduce_sum_f32_f64`, then `reduce_sum_f64`).
pub fn sum_f64(x: &[f32]) -> f64 {
    two_pass(x.len(), 0.0, |i| f64::from(x[i]), add)
}

/// Least non-NaN element of `x` (`-0 < +0`), `+inf` if there is none
/// (`reduce_min_f32`, `reduce_min_f64`).
pub fn min<T: Real>(x: &[T]) -> T {
    two_pass(x.len(), T::INFINITY, |i| x[i], minimum)
}

/// Greatest non-NaN element of `x` (`+0 > -0`), `-inf` if there is none
/// (`reduce_max_f32`, `reduce_max_f64`).
pub fn max<T: Real>(x: &[T]) -> T {
    two_pass(x.len(), T::INFINITY.neg(), |i| x[i], maximum)
}

/// `x[0] * y[0] + x[1] * y[1] + ...`, each product rounded, then added in
/// the kernels' order (`reduce_dot_f32`, `reduce_dot_f64`); `+0.0` for no
/// elements.
///
/// # Panics
///
/// If `x` and `y` differ in length.
pub fn dot<T: Real>(x: &[T], y: &[T]) -> T {
    assert_eq!(x.len(), y.len(), "dot: x and y differ in length");
    two_pass(x.len(), T::default(), |i| x[i] * y[i], add)
}

/// [`dot`] of `f32` vectors in `f64`: each product `f64(x[i]) * f64(y[i])`
/// (exact), added in `f64` (`reduce_dot_f32_f64`, then `reduce_sum_f64`).
///
/// # Panics
///
/// If `x` and `y` differ in length.
pub fn dot_f64(x: &[f32], y: &[f32]) -> f64 {
    assert_eq!(x.len(), y.len(), "dot_f64: x and y differ in length");
    two_pass(x.len(), 0.0, |i| f64::from(x[i]) * f64::from(y[i]), add)
}

/// Pass 1 of a sum: the partials of `x` (`reduce_sum_*` over `x.len()`
/// elements into `partials`).
pub(crate) fn sum_pass<In: Copy, A: Real + From<In>>(x: &[In], partials: &mut [A]) {
    pass(x.len(), A::default(), |i| A::from(x[i]), add, partials);
}

/// Pass 1 of a dot product (`reduce_dot_*`).
pub(crate) fn dot_pass<In: Copy, A: Real + From<In>>(x: &[In], y: &[In], partials: &mut [A]) {
    pass(
        x.len(),
        A::default(),
        |i| A::from(x[i]) * A::from(y[i]),
        add,
        partials,
    );
}

/// Pass 1 of a minimum (`reduce_min_*`).
pub(crate) fn min_pass<T: Real>(x: &[T], partials: &mut [T]) {
    pass(x.len(), T::INFINITY, |i| x[i], minimum, partials);
}

/// Pass 1 of a maximum (`reduce_max_*`).
pub(crate) fn max_pass<T: Real>(x: &[T], partials: &mut [T]) {
    pass(x.len(), T::INFINITY.neg(), |i| x[i], maximum, partials);
}
