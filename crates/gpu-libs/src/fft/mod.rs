//! Fast Fourier transforms on a task's stream (DESIGN "Numerical libraries and foreign work"): cuFFT on the CUDA
//! backend, `rustfft` on the host backend. A transform is a tracked
//! operation over the buffers it names (a foreign operation,
//! `TaskContext::foreign`): the input a read (`&`), the output a write
//! (`&mut`), ordered with every other use of them as a kernel launch is;
//! shapes are checked against the buffers before anything is queued
//! ([`Error::Shape`](gpu_sched::Error::Shape)).
//!
//! A [`Plan`] describes a transform: its dimensions (one to three, in row
//! major order as cuFFT's: the last dimension is contiguous) and a batch
//! of transforms stored one after the other. Its methods pick the kind,
//! and the element type comes from the buffers ([`f32`] or [`f64`], with
//! [`Complex32`] and [`Complex64`]):
//!
//! - [`Plan::forward`], [`Plan::inverse`]: complex to complex, out of
//!   place; [`Plan::forward_in_place`], [`Plan::inverse_in_place`] in one
//!   buffer.
//! - [`Plan::forward_real`]: real to complex, `n0 x .. x n(r-1)` reals to
//!   `n0 x .. x (n(r-1)/2 + 1)` complex numbers (the other half of the
//!   spectrum is their conjugate mirror).
//! - [`Plan::inverse_real`]: complex to real, the other way round.
//!
//! No transform is normalized, as in cuFFT and FFTW: the forward transform
//! is `X[k] = sum_j x[j] e^(-2 pi i j k / n)` (over every dimension), the
//! inverse has `e^(+2 pi i ...)`, so `inverse(forward(x)) = N x` for `N`
//! the product of the dimensions. Both backends compute the same
//! transform, up to rounding.
//!
//! cuFFT is loaded on first use and probed
//! ([`Error::LibraryUnavailable`](gpu_sched::Error::LibraryUnavailable) where
//! it is missing). Its plans are cached per stream slot of the
//! runtime and shape, so a second transform of the same shape on the same
//! stream reuses the first's plan; each plan's workspace is allocated on
//! the task's stream for the call and written by it (a tracked buffer),
//! so it stays in stream order whatever stream the plan runs on next.
//! Making a plan may allocate device memory, which CUDA may order against
//! other streams' work: the first transform of each shape on each stream
//! pays it once.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_libs::fft::{Complex32, Plan};
//! let rt = gpu_sched::Runtime::new(Default::default())?;
//! let t = rt.begin_task()?;
//! let x = t.from_host(&[1.0f32, 2.0, 3.0, 4.0])?;
//! let mut y = t.zeros::<Complex32>(3)?; // 4 / 2 + 1
//! Plan::new(&[4]).forward_real(&t, &x, &mut y)?;
//! let y = t.to_vec(&y)?;
//! assert_eq!(y[0], Complex32::new(10.0, 0.0));
//! assert!((y[1] - Complex32::new(-2.0, 2.0)).norm() < 1e-5);
//! # Ok(()) }
//! ```

mod cuda;
mod host;
mod plan;
pub(crate) mod sealed;

pub use num_complex::{Complex, Complex32, Complex64};

pub use plan::Plan;

use gpu_sched::DeviceRepr;
use gpu_sched::Result;
use gpu_sched::{Runtime, TaskContext};

/// The real element types of the transforms: `f32` and `f64` (with
/// [`Complex32`] and [`Complex64`] for the complex side). Sealed.
pub trait Real: DeviceRepr + sealed::Sealed {}
impl Real for f32 {}
impl Real for f64 {}

/// The cuFFT functions the transforms call, checked by the probe.
pub(crate) const SYMBOLS: &[&str] = &[
    "cufftCreate",
    "cufftDestroy",
    "cufftSetAutoAllocation",
    "cufftMakePlanMany",
    "cufftSetWorkArea",
    "cufftSetStream",
    "cufftExecC2C",
    "cufftExecZ2Z",
    "cufftExecR2C",
    "cufftExecD2Z",
    "cufftExecC2R",
    "cufftExecZ2D",
];

/// The kind of a transform, with its direction for complex to complex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Complex to complex, forward.
    Forward = 0,
    /// Complex to complex, inverse.
    Inverse = 1,
    /// Real to complex (forward).
    R2C = 2,
    /// Complex to real (inverse).
    C2R = 3,
}

/// cuFFT loaded and probed on the CUDA backend (before anything is
/// queued); nothing on the host backend ([`crate::shared::ready`]).
fn ready(t: &TaskContext) -> Result<()> {
    crate::shared::ready::<cuda::Cufft>(t)
}

/// How many cuFFT plans `rt` has made, and how many are idle in its cache
/// (both 0 on the host backend). For tests of the cache.
#[doc(hidden)]
pub fn plan_counts(rt: &Runtime) -> (usize, usize) {
    rt.extension::<cuda::Plans>().counts()
}
