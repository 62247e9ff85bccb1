//! Plain-Rust reference implementations of the kernels, over slices.
//!
//! A host backend runs these in place of the kernels, and GPU tests compare
//! the kernels' results with them. Each function does what the kernel of the
//! same name does to `n = len` elements, in index order, on one thread.
//!
//! The element-wise functions round exactly as the kernels do (no fused
//! multiply-add on either side), so their results are bit-identical. [`sum`]
//! and [`inclusive_scan`] add sequentially from index 0; the kernels add in
//! another order, so floating-point results may differ in the last bits.
//! The deterministic reductions of [`reduce`] follow the kernels' order, so
//! their results are bit-identical.
//!
//! # Examples
//!
//! ```
//! use gpu_kernels::host;
//!
//! let mut y = vec![1.0_f32; 5];
//! host::axpy(2.0, &[1.0, 2.0, 3.0, 4.0, 5.0], &mut y);
//! assert_eq!(y, [3.0, 5.0, 7.0, 9.0, 11.0]);
//!
//! let mut scanned = vec![0.0; 5];
//! host::inclusive_scan(&y, &mut scanned);
//! assert_eq!(scanned, [3.0, 8.0, 15.0, 24.0, 35.0]);
//! assert_eq!(host::sum(&y), 35.0);
//! ```

use std::ops::{Add, Mul};

pub mod reduce;

#[cfg(test)]
mod test;

/// `x[i] = v` for every `i` (kernels `fill_f32`, `fill_f64`).
pub fn fill<T: Copy>(x: &mut [T], v: T) {
    x.fill(v);
}

/// `x[i] = x[i] + v` for every `i` (kernels `add_scalar_f32`,
/// `add_scalar_f64`).
pub fn add_scalar<T: Copy + Add<Output = T>>(x: &mut [T], v: T) {
    for e in x {
        *e = *e + v;
    }
}

/// `x[i] = x[i] * a` for every `i` (kernels `scale_f32`, `scale_f64`).
pub fn scale<T: Copy + Mul<Output = T>>(x: &mut [T], a: T) {
    for e in x {
        *e = *e * a;
    }
}

/// `y[i] = x[i] * a` for every `i` (kernels `scale_into_f32`,
/// `scale_into_f64`): [`scale`] out of place.
///
/// # Panics
///
/// If `x` and `y` differ in length.
pub fn scale_into<T: Copy + Mul<Output = T>>(x: &[T], y: &mut [T], a: T) {
    assert_eq!(x.len(), y.len(), "scale_into: x and y differ in length");
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = xi * a;
    }
}

/// `y[i] = y[i] + a * x[i]` for every `i`, rounding the product and then the
/// sum (kernels `axpy_f32`, `axpy_f64`).
///
/// # Panics
///
/// If `x` and `y` differ in length.
pub fn axpy<T: Copy + Add<Output = T> + Mul<Output = T>>(a: T, x: &[T], y: &mut [T]) {
    assert_eq!(x.len(), y.len(), "axpy: x and y differ in length");
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = *yi + a * xi;
    }
}

/// `dst[i] = src[i]` for every `i` (kernels `copy_f32`, `copy_f64`).
///
/// # Panics
///
/// If `src` and `dst` differ in length.
pub fn copy<T: Copy>(src: &[T], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len(), "copy: src and dst differ in length");
    dst.copy_from_slice(src);
}

/// Sum of `x`, added from index 0 onwards, starting from `T::default()` (zero
/// for numbers, so the sum of nothing is `+0.0`) (kernels `sum_f32`,
/// `sum_f64`, which add into a `*out` the caller zeroed).
pub fn sum<T: Copy + Default + Add<Output = T>>(x: &[T]) -> T {
    x.iter().fold(T::default(), |acc, &e| acc + e)
}

/// Inclusive scan: `dst[i] = src[0] + ... + src[i]`, added from index 0
/// onwards (the three `scan_*` kernels together).
///
/// # Panics
///
/// If `src` and `dst` differ in length.
pub fn inclusive_scan<T: Copy + Add<Output = T>>(src: &[T], dst: &mut [T]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "inclusive_scan: src and dst differ in length"
    );
    let mut acc: Option<T> = None;
    for (d, &s) in dst.iter_mut().zip(src) {
        let next = match acc {
            Some(prev) => prev + s,
            None => s,
        };
        *d = next;
        acc = Some(next);
    }
}

/// [`inclusive_scan`] in place: `x[i] = x[0] + ... + x[i]` (the `scan_*`
/// kernels with `in == out`).
pub fn inclusive_scan_in_place<T: Copy + Add<Output = T>>(x: &mut [T]) {
    for i in 1..x.len() {
        x[i] = x[i - 1] + x[i];
    }
}
