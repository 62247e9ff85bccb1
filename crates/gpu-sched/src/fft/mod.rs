//! Fast Fourier transforms on a task's stream (§14): cuFFT on the CUDA
//! backend, `rustfft` on the host backend. A transform is a tracked
//! operation over the buffers it names (a foreign operation,
//! `TaskContext::foreign`): the input a read (`&`), the output a write
//! (`&mut`), ordered with every other use of them as a kernel launch is;
//! shapes are checked against the buffers before anything is queued
//! ([`Error::Shape`]).
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
//! cuFFT is loaded on first use and probed ([`Error::LibraryUnavailable`]
//! where it is missing). Its plans are cached per stream slot of the
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
//! use gpu_sched::fft::{Complex32, Plan};
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
pub(crate) mod sealed;

pub use num_complex::{Complex, Complex32, Complex64};

pub(crate) use cuda::Plans;

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::error::{Error, Result};
use crate::{BackendKind, Runtime, TaskContext};

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

/// A transform's description: its dimensions and batch. Built with
/// [`Plan::new`] and [`Plan::batch`]; `Copy`, cheap, and holding no
/// library object (cuFFT's plans are cached by the runtime, see the
/// [module](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub(crate) dims: [usize; 3],
    pub(crate) rank: usize,
    pub(crate) batch: usize,
}

/// A plan's checked shape: what cuFFT is asked for and what each side
/// holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checked {
    /// The elements of one transform's input.
    pub(crate) one_in: usize,
    /// The elements of one transform's output.
    pub(crate) one_out: usize,
}

impl Plan {
    /// A transform of `dims` (one to three dimensions, row-major: the last
    /// is contiguous, `dims = [rows, columns]` for a matrix), batch 1. More
    /// or fewer dimensions are refused by the transform
    /// ([`Error::Shape`]).
    pub fn new(dims: &[usize]) -> Self {
        let mut d = [1; 3];
        let rank = dims.len();
        for (d, &n) in d.iter_mut().zip(dims) {
            *d = n;
        }
        Plan {
            dims: d,
            // More than three is kept as a rank the check refuses.
            rank,
            batch: 1,
        }
    }

    /// `count` transforms of these dimensions, stored one after the other
    /// (each input `N` elements after the last, each output likewise). A
    /// batch of 0 does nothing.
    pub fn batch(mut self, count: usize) -> Self {
        self.batch = count;
        self
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank.min(3)]
    }

    /// Checks the plan and the buffers' lengths for `kind`; the error names
    /// what does not fit.
    fn check(&self, op: &'static str, kind: Kind, input: usize, output: usize) -> Result<Checked> {
        let bad = |problem: String| Error::Shape { op, problem };
        if !(1..=3).contains(&self.rank) {
            return Err(bad(format!(
                "{} dimensions given, 1 to 3 supported",
                self.rank
            )));
        }
        let dims = self.dims();
        if let Some(i) = dims.iter().position(|&n| n == 0) {
            return Err(bad(format!("dimension {i} is 0")));
        }
        let overflow = || bad(format!("{dims:?} x batch {} overflows", self.batch));
        let n: usize = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(overflow)?;
        let last = dims[dims.len() - 1];
        let half = n / last * (last / 2 + 1);
        let (one_in, one_out) = match kind {
            Kind::Forward | Kind::Inverse => (n, n),
            Kind::R2C => (n, half),
            Kind::C2R => (half, n),
        };
        let all_in = one_in.checked_mul(self.batch).ok_or_else(overflow)?;
        let all_out = one_out.checked_mul(self.batch).ok_or_else(overflow)?;
        let batch = if self.batch == 1 {
            String::new()
        } else {
            format!(" ({} transforms of {dims:?})", self.batch)
        };
        if input != all_in {
            return Err(bad(format!(
                "the input has {input} elements, {all_in} expected{batch}"
            )));
        }
        if output != all_out {
            return Err(bad(format!(
                "the output has {output} elements, {all_out} expected{batch}"
            )));
        }
        let fits = |what: &str, x: usize| {
            std::ffi::c_int::try_from(x)
                .map(drop)
                .map_err(|_| bad(format!("{what} = {x} does not fit cuFFT's 32-bit int")))
        };
        for (i, &d) in dims.iter().enumerate() {
            fits(&format!("dimension {i}"), d)?;
        }
        fits("batch", self.batch)?;
        fits("the elements of one transform", n)?;
        Ok(Checked { one_in, one_out })
    }

    /// The complex to complex transform of `input` into `output` (out of
    /// place, unnormalized), forward: `e^(-2 pi i ...)`.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] before anything is queued: 0 or more than 3
    /// dimensions, a dimension of 0, a buffer whose length is not the
    /// batch's (`N x batch` elements each), a size beyond cuFFT's `int`;
    /// [`Error::LibraryUnavailable`] without cuFFT; cuFFT's failures
    /// ([`Error::Library`]); the foreign operation's errors.
    pub fn forward<T: Real>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.c2c(t, Kind::Forward, input, output)
    }

    /// As [`Plan::forward`], inverse: `e^(+2 pi i ...)`, unnormalized (the
    /// inverse of the forward transform times `N`).
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`].
    pub fn inverse<T: Real>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.c2c(t, Kind::Inverse, input, output)
    }

    /// As [`Plan::forward`], in place: `data` is transformed.
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`].
    pub fn forward_in_place<T: Real>(
        &self,
        t: &TaskContext,
        data: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.c2c_in_place(t, Kind::Forward, data)
    }

    /// As [`Plan::inverse`], in place: `data` is transformed.
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`].
    pub fn inverse_in_place<T: Real>(
        &self,
        t: &TaskContext,
        data: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.c2c_in_place(t, Kind::Inverse, data)
    }

    /// The real to complex transform (forward, unnormalized) of `input`
    /// (`n0 x .. x n(r-1)` reals per transform) into `output` (`n0 x .. x
    /// (n(r-1)/2 + 1)` complex numbers per transform: the non-redundant
    /// half of the spectrum along the last dimension).
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`], with those lengths.
    pub fn forward_real<T: Real>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<T> + ?Sized),
        output: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        let k = self.check("fft r2c", Kind::R2C, input.len(), output.len())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        cuda::with_plan::<T>(t, self, Kind::R2C, |ws, plan| {
            let op = t.foreign(T::EXEC[2], (input,), (output, ws)).host(
                move |(x,): (&[T],), (y, _): (&mut [Complex<T>], &mut [u8])| {
                    host::r2c(&p, &k, x, y);
                    Ok(())
                },
            );
            // SAFETY: the buffers hold the checked lengths for the plan
            // (made for this shape and type: the execution call's contract,
            // `Sealed::r2c`); cuFFT queues on the stream `exec` binds and
            // uses the declared workspace, and reads (writes) only the
            // declared reads (writes).
            unsafe {
                op.run(|s, (x,), (y, w)| {
                    cuda::exec(plan, s, w, T::EXEC[2], |h| {
                        T::r2c(h, x.as_ptr(), y.as_mut_ptr())
                    })
                })
            }
        })
    }

    /// The complex to real transform (inverse, unnormalized) of `input`
    /// (`n0 x .. x (n(r-1)/2 + 1)` complex numbers per transform, the half
    /// spectrum [`Plan::forward_real`] gives) into `output` (`n0 x .. x
    /// n(r-1)` reals per transform). The input is taken as the half of a
    /// Hermitian spectrum: `inverse_real(forward_real(x)) = N x`. The input
    /// is kept: cuFFT's complex to real transform overwrites its input, so
    /// on the CUDA backend it is copied to a scratch buffer first (on the
    /// task's stream); [`Plan::inverse_real_overwriting`] spares the copy.
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`], with those lengths; the copy's.
    pub fn inverse_real<T: Real + Default>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.check("fft c2r", Kind::C2R, input.len(), output.len())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let mut scratch = t.alloc::<Complex<T>>(input.len())?;
        t.copy(input, &mut scratch)?;
        self.inverse_real_overwriting(t, &mut scratch, output)
    }

    /// As [`Plan::inverse_real`], without the copy: `input`'s contents are
    /// unspecified afterwards (both backends use it as scratch).
    ///
    /// # Errors
    ///
    /// As [`Plan::inverse_real`].
    pub fn inverse_real_overwriting<T: Real>(
        &self,
        t: &TaskContext,
        input: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let k = self.check("fft c2r", Kind::C2R, input.len(), output.len())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        cuda::with_plan::<T>(t, self, Kind::C2R, |ws, plan| {
            let op = t.foreign(T::EXEC[3], (), (input, output, ws)).host(
                move |(), (x, y, _): (&mut [Complex<T>], &mut [T], &mut [u8])| {
                    host::c2r(&p, &k, x, y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`; the input is declared a write
            // (cuFFT overwrites it).
            unsafe {
                op.run(|s, (), (x, y, w)| {
                    cuda::exec(plan, s, w, T::EXEC[3], |h| {
                        T::c2r(h, x.as_mut_ptr(), y.as_mut_ptr())
                    })
                })
            }
        })
    }

    fn c2c<T: Real>(
        &self,
        t: &TaskContext,
        kind: Kind,
        input: &(impl DeviceSlice<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.check("fft c2c", kind, input.len(), output.len())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        let name = T::EXEC[kind as usize];
        cuda::with_plan::<T>(t, self, kind, |ws, plan| {
            let op = t.foreign(name, (input,), (output, ws)).host(
                move |(x,): (&[Complex<T>],), (y, _): (&mut [Complex<T>], &mut [u8])| {
                    y.copy_from_slice(x);
                    host::c2c(&p, kind, y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`.
            unsafe {
                op.run(|s, (x,), (y, w)| {
                    cuda::exec(plan, s, w, name, |h| {
                        T::c2c(h, x.as_ptr(), y.as_mut_ptr(), cuda::direction(kind))
                    })
                })
            }
        })
    }

    fn c2c_in_place<T: Real>(
        &self,
        t: &TaskContext,
        kind: Kind,
        data: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.check("fft c2c", kind, data.len(), data.len())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        let name = T::EXEC[kind as usize];
        cuda::with_plan::<T>(t, self, kind, |ws, plan| {
            let op = t.foreign(name, (), (data, ws)).host(
                move |(), (y, _): (&mut [Complex<T>], &mut [u8])| {
                    host::c2c(&p, kind, y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`; cuFFT transforms in place when
            // both pointers agree.
            unsafe {
                op.run(|s, (), (y, w)| {
                    cuda::exec(plan, s, w, name, |h| {
                        T::c2c(h, y.as_mut_ptr(), y.as_mut_ptr(), cuda::direction(kind))
                    })
                })
            }
        })
    }
}

/// On the CUDA backend, cuFFT loaded and checked (before anything is
/// queued); nothing on the host backend.
fn ready(t: &TaskContext) -> Result<()> {
    match t.runtime().backend() {
        BackendKind::Cuda => cuda::library(),
        BackendKind::Host => Ok(()),
    }
}

/// How many cuFFT plans `rt` has made, and how many are idle in its cache
/// (both 0 on the host backend). For tests of the cache.
#[doc(hidden)]
pub fn plan_counts(rt: &Runtime) -> (usize, usize) {
    rt.fft_plans().counts()
}
