//! The sealed side of [`super::Float`]: each element type's cuRAND calls
//! and its host conversions.

use cudarc::curand::sys::{self, curandGenerator_t, curandStatus_t};

/// What an element type brings to the fills.
pub trait Sealed: Copy + Send + 'static {
    /// The uniform generation call's name.
    const UNIFORM: &'static str;
    /// The normal generation call's name.
    const NORMAL: &'static str;

    /// cuRAND's uniform generation of `n` values at `out`.
    ///
    /// # Safety
    ///
    /// `g` is a live generator bound to the caller's stream; `out` is a
    /// device pointer to `n` writable values.
    unsafe fn uniform(g: curandGenerator_t, out: *mut Self, n: usize) -> curandStatus_t;

    /// cuRAND's normal generation of `n` values at `out`.
    ///
    /// # Safety
    ///
    /// As [`Sealed::uniform`], with `n` even and `out` aligned to two
    /// values.
    unsafe fn normal(
        g: curandGenerator_t,
        out: *mut Self,
        n: usize,
        mean: Self,
        std: Self,
    ) -> curandStatus_t;

    /// A value uniform in `(0, 1]` of 64 random bits (the host backend's).
    fn unit(bits: u64) -> Self;
    /// `x` rounded to this type.
    fn from_f64(x: f64) -> Self;
    /// This value as an `f64`.
    fn to_f64(self) -> f64;
}

impl Sealed for f32 {
    const UNIFORM: &'static str = "curandGenerateUniform";
    const NORMAL: &'static str = "curandGenerateNormal";

    unsafe fn uniform(g: curandGenerator_t, out: *mut f32, n: usize) -> curandStatus_t {
        // SAFETY: the caller's contract.
        unsafe { sys::curandGenerateUniform(g, out, n) }
    }

    unsafe fn normal(
        g: curandGenerator_t,
        out: *mut f32,
        n: usize,
        mean: f32,
        std: f32,
    ) -> curandStatus_t {
        // SAFETY: the caller's contract.
        unsafe { sys::curandGenerateNormal(g, out, n, mean, std) }
    }

    fn unit(bits: u64) -> f32 {
        // The low word's top 24 bits, plus one, over 2^24: (0, 1] exactly.
        ((bits as u32 >> 8) + 1) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    fn from_f64(x: f64) -> f32 {
        x as f32
    }

    fn to_f64(self) -> f64 {
        self.into()
    }
}

impl Sealed for f64 {
    const UNIFORM: &'static str = "curandGenerateUniformDouble";
    const NORMAL: &'static str = "curandGenerateNormalDouble";

    unsafe fn uniform(g: curandGenerator_t, out: *mut f64, n: usize) -> curandStatus_t {
        // SAFETY: the caller's contract.
        unsafe { sys::curandGenerateUniformDouble(g, out, n) }
    }

    unsafe fn normal(
        g: curandGenerator_t,
        out: *mut f64,
        n: usize,
        mean: f64,
        std: f64,
    ) -> curandStatus_t {
        // SAFETY: the caller's contract.
        unsafe { sys::curandGenerateNormalDouble(g, out, n, mean, std) }
    }

    fn unit(bits: u64) -> f64 {
        // The top 53 bits, plus one, over 2^53: (0, 1] exactly.
        ((bits >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn from_f64(x: f64) -> f64 {
        x
    }

    fn to_f64(self) -> f64 {
        self
    }
}
