//! The host backend's twins of the transforms (`rustfft`): a
//! multi-dimensional transform is 1D transforms along each axis in turn;
//! real transforms go through complex ones. Unnormalized, as cuFFT.
//!
//! Generic over the element type but instantiated here only, for `f32`
//! and `f64` (the `Sealed` impls call them): a user's crate that calls the
//! transforms compiles none of rustfft (it rebuilt in 29.5 s after each
//! edit when these were instantiated by the caller, issue 40).

use super::sealed::Sealed;
use num_complex::Complex;
use rustfft::{Fft, FftDirection, FftPlanner};
use std::sync::Arc;

/// The 1D transform of `n` points in direction `dir`.
fn plan_1d<T: Sealed>(planner: &mut FftPlanner<T>, n: usize, dir: FftDirection) -> Arc<dyn Fft<T>> {
    planner.plan_fft(n, dir)
}

/// The 1D transforms along `axis` of every array of shape `dims` in
/// `data` (a batch of them, one after the other).
fn along<T: Sealed>(data: &mut [Complex<T>], dims: &[usize], axis: usize, fft: &dyn Fft<T>) {
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
    if inner == 1 {
        // Contiguous lines: every chunk of `n` is one.
        fft.process_with_scratch(data, &mut scratch);
        return;
    }
    let mut line = vec![Complex::default(); n];
    for block in data.chunks_exact_mut(n * inner) {
        for i in 0..inner {
            for (k, x) in line.iter_mut().enumerate() {
                *x = block[k * inner + i];
            }
            fft.process_with_scratch(&mut line, &mut scratch);
            for (k, x) in line.iter().enumerate() {
                block[k * inner + i] = *x;
            }
        }
    }
}

/// The complex to complex transform of `kind` of every array in `data`, in
/// place.
pub(super) fn c2c<T: Sealed>(dims: &[usize], forward: bool, data: &mut [Complex<T>]) {
    let dir = if forward {
        FftDirection::Forward
    } else {
        FftDirection::Inverse
    };
    let mut planner = FftPlanner::new();
    for (axis, &d) in dims.iter().enumerate() {
        let fft = plan_1d(&mut planner, d, dir);
        along(data, dims, axis, &*fft);
    }
}

/// The real to complex transform of each of `x`'s arrays into `y`: the
/// last axis transformed in full and its first `n/2 + 1` points kept, then
/// the other axes over that half.
pub(super) fn r2c<T: Sealed>(dims: &[usize], x: &[T], y: &mut [Complex<T>]) {
    let r = dims.len();
    let n = dims[r - 1];
    let h = n / 2 + 1;
    let mut planner = FftPlanner::new();
    let fft = plan_1d(&mut planner, n, FftDirection::Forward);
    let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
    let mut line = vec![Complex::default(); n];
    debug_assert_eq!(x.len() / n, y.len() / h);
    for (xs, ys) in x.chunks_exact(n).zip(y.chunks_exact_mut(h)) {
        for (l, &v) in line.iter_mut().zip(xs) {
            *l = Complex::new(v, T::default());
        }
        fft.process_with_scratch(&mut line, &mut scratch);
        ys.copy_from_slice(&line[..h]);
    }
    let mut half = dims.to_vec();
    half[r - 1] = h;
    for (axis, &d) in dims.iter().enumerate().take(r - 1) {
        let fft = plan_1d(&mut planner, d, FftDirection::Forward);
        along(y, &half, axis, &*fft);
    }
}

/// The complex to real transform of each of `x`'s half spectra into `y`:
/// the axes but the last inverted over the half (in `x`, as cuFFT may),
/// then each last-axis line completed by its conjugate mirror, inverted,
/// and its real part kept.
pub(super) fn c2r<T: Sealed>(dims: &[usize], x: &mut [Complex<T>], y: &mut [T]) {
    let r = dims.len();
    let n = dims[r - 1];
    let h = n / 2 + 1;
    let mut planner = FftPlanner::new();
    let mut half = dims.to_vec();
    half[r - 1] = h;
    for (axis, &d) in dims.iter().enumerate().take(r - 1) {
        let fft = plan_1d(&mut planner, d, FftDirection::Inverse);
        along(x, &half, axis, &*fft);
    }
    let fft = plan_1d(&mut planner, n, FftDirection::Inverse);
    let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
    let mut line = vec![Complex::default(); n];
    debug_assert_eq!(x.len() / h, y.len() / n);
    for (xs, ys) in x.chunks_exact(h).zip(y.chunks_exact_mut(n)) {
        for (j, l) in line.iter_mut().enumerate() {
            *l = if j < h { xs[j] } else { xs[n - j].conj() };
        }
        fft.process_with_scratch(&mut line, &mut scratch);
        for (v, l) in ys.iter_mut().zip(&line) {
            *v = l.re;
        }
    }
}
