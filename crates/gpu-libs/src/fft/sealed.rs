//! The sealed side of [`super::Real`]: each element type's cuFFT types
//! and execution calls.

use cudarc::cufft::sys::{self, cufftHandle, cufftResult, cufftType};
use num_complex::Complex;
use std::ffi::c_int;

/// What a real element type brings to the transforms. `rustfft::FftNum`
/// for the host backend; cuFFT's types and calls for the CUDA backend.
pub trait Sealed: rustfft::FftNum + Default {
    /// The host twin of a complex to complex transform of arrays of
    /// shape `dims` (a batch of them in `data`), in place: compiled in this
    /// crate for each type, not in the caller's.
    fn host_c2c(dims: &[usize], forward: bool, data: &mut [Complex<Self>]);
    /// The host twin of a real to complex transform.
    fn host_r2c(dims: &[usize], x: &[Self], y: &mut [Complex<Self>]);
    /// The host twin of a complex to real transform (`x` is overwritten).
    fn host_c2r(dims: &[usize], x: &mut [Complex<Self>], y: &mut [Self]);

    /// cuFFT's types, by [`super::Kind`] (forward, inverse, r2c, c2r).
    const TYPES: [cufftType; 4];
    /// cuFFT's execution calls' names, by [`super::Kind`].
    const EXEC: [&'static str; 4];

    /// cuFFT's complex to complex execution.
    ///
    /// # Safety
    ///
    /// `plan` is a live plan of this type's complex to complex transform,
    /// `i` and `o` device pointers to its input and output.
    unsafe fn c2c(
        plan: cufftHandle,
        i: *const Complex<Self>,
        o: *mut Complex<Self>,
        dir: c_int,
    ) -> cufftResult;

    /// cuFFT's real to complex execution.
    ///
    /// # Safety
    ///
    /// As [`Sealed::c2c`], for a real to complex plan.
    unsafe fn r2c(plan: cufftHandle, i: *const Self, o: *mut Complex<Self>) -> cufftResult;

    /// cuFFT's complex to real execution (which overwrites `i`).
    ///
    /// # Safety
    ///
    /// As [`Sealed::c2c`], for a complex to real plan; `i` is writable.
    unsafe fn c2r(plan: cufftHandle, i: *mut Complex<Self>, o: *mut Self) -> cufftResult;
}

impl Sealed for f32 {
    fn host_c2c(dims: &[usize], forward: bool, data: &mut [Complex<f32>]) {
        super::host::c2c(dims, forward, data)
    }
    fn host_r2c(dims: &[usize], x: &[f32], y: &mut [Complex<f32>]) {
        super::host::r2c(dims, x, y)
    }
    fn host_c2r(dims: &[usize], x: &mut [Complex<f32>], y: &mut [f32]) {
        super::host::c2r(dims, x, y)
    }
    const TYPES: [cufftType; 4] = [
        cufftType::CUFFT_C2C,
        cufftType::CUFFT_C2C,
        cufftType::CUFFT_R2C,
        cufftType::CUFFT_C2R,
    ];
    const EXEC: [&'static str; 4] = [
        "cufftExecC2C",
        "cufftExecC2C",
        "cufftExecR2C",
        "cufftExecC2R",
    ];

    unsafe fn c2c(
        plan: cufftHandle,
        i: *const Complex<f32>,
        o: *mut Complex<f32>,
        dir: c_int,
    ) -> cufftResult {
        // SAFETY: the caller's contract; `Complex<f32>` is `cufftComplex`'s
        // layout (two `f32`s; cuFFT's own type is only more aligned, and
        // device addresses of these buffers are 8-aligned: allocations are
        // 256-aligned, elements 8 bytes). cuFFT does not write `i` out of
        // place (the `*mut` is its C signature).
        unsafe { sys::cufftExecC2C(plan, i as *mut _, o.cast(), dir) }
    }

    unsafe fn r2c(plan: cufftHandle, i: *const f32, o: *mut Complex<f32>) -> cufftResult {
        // SAFETY: as in `c2c`.
        unsafe { sys::cufftExecR2C(plan, i as *mut f32, o.cast()) }
    }

    unsafe fn c2r(plan: cufftHandle, i: *mut Complex<f32>, o: *mut f32) -> cufftResult {
        // SAFETY: as in `c2c`; `i` is writable (the caller's contract).
        unsafe { sys::cufftExecC2R(plan, i.cast(), o) }
    }
}

impl Sealed for f64 {
    fn host_c2c(dims: &[usize], forward: bool, data: &mut [Complex<f64>]) {
        super::host::c2c(dims, forward, data)
    }
    fn host_r2c(dims: &[usize], x: &[f64], y: &mut [Complex<f64>]) {
        super::host::r2c(dims, x, y)
    }
    fn host_c2r(dims: &[usize], x: &mut [Complex<f64>], y: &mut [f64]) {
        super::host::c2r(dims, x, y)
    }
    const TYPES: [cufftType; 4] = [
        cufftType::CUFFT_Z2Z,
        cufftType::CUFFT_Z2Z,
        cufftType::CUFFT_D2Z,
        cufftType::CUFFT_Z2D,
    ];
    const EXEC: [&'static str; 4] = [
        "cufftExecZ2Z",
        "cufftExecZ2Z",
        "cufftExecD2Z",
        "cufftExecZ2D",
    ];

    unsafe fn c2c(
        plan: cufftHandle,
        i: *const Complex<f64>,
        o: *mut Complex<f64>,
        dir: c_int,
    ) -> cufftResult {
        // SAFETY: as for `f32`: `Complex<f64>` is `cufftDoubleComplex`'s
        // layout, its device addresses 16-aligned (16-byte elements).
        unsafe { sys::cufftExecZ2Z(plan, i as *mut _, o.cast(), dir) }
    }

    unsafe fn r2c(plan: cufftHandle, i: *const f64, o: *mut Complex<f64>) -> cufftResult {
        // SAFETY: as in `c2c`.
        unsafe { sys::cufftExecD2Z(plan, i as *mut f64, o.cast()) }
    }

    unsafe fn c2r(plan: cufftHandle, i: *mut Complex<f64>, o: *mut f64) -> cufftResult {
        // SAFETY: as in `c2c`; `i` is writable (the caller's contract).
        unsafe { sys::cufftExecZ2D(plan, i.cast(), o) }
    }
}
