//! [`Plan`]: a transform's shape, checked against the buffers, and the
//! transforms, each a foreign operation with a host twin.

use super::{cuda, ready, Complex, Kind, Real};
use gpu_sched::TaskContext;
use gpu_sched::{DeviceSlice, DeviceSliceMut};
use gpu_sched::{Error, Result};

/// A transform's description: its dimensions and batch. Built with
/// [`Plan::new`] and [`Plan::batch`]; `Copy`, cheap, and holding no
/// library object (cuFFT's plans are cached by the runtime, see the
/// [module](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub(crate) dims: [usize; 3],
    pub(crate) rank: usize,
    pub(crate) batch: usize,
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
    fn check(&self, op: &'static str, kind: Kind, input: usize, output: usize) -> Result<()> {
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
        Ok(())
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
    /// The real input must start at an even element of its buffer (cuFFT
    /// wants it aligned as its complex type; on the H200 an odd start is
    /// `CUFFT_INVALID_VALUE`): checked on both backends.
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`], with those lengths; [`Error::Shape`] for an
    /// input at an odd element.
    pub fn forward_real<T: Real>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<T> + ?Sized),
        output: &mut (impl DeviceSliceMut<Complex<T>> + ?Sized),
    ) -> Result<()> {
        self.check("fft r2c", Kind::R2C, input.len(), output.len())?;
        aligned::<T>("fft r2c", "the real input", input.device_ptr())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        cuda::with_plan::<T>(t, self, Kind::R2C, |ws, plan| {
            let op = t.foreign(T::EXEC[2], (input,), (output, ws)).host(
                move |(x,): (&[T],), (y, _): (&mut [Complex<T>], &mut [u8])| {
                    T::host_r2c(p.dims(), x, y);
                    Ok(())
                },
            );
            // SAFETY: the buffers hold the checked lengths for the plan
            // (made for this shape and type: the execution call's contract,
            // `Sealed::r2c`); cuFFT queues on the stream `exec` binds and
            // uses the declared workspace, and reads (writes) only the
            // declared reads (writes).
            unsafe {
                op.capture_safe().run(|s, (x,), (y, w)| {
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
    /// The real output must start at an even element of its buffer, as
    /// [`Plan::forward_real`]'s input.
    ///
    /// # Errors
    ///
    /// As [`Plan::forward`], with those lengths; [`Error::Shape`] for an
    /// output at an odd element; the copy's.
    pub fn inverse_real<T: Real + Default>(
        &self,
        t: &TaskContext,
        input: &(impl DeviceSlice<Complex<T>> + ?Sized),
        output: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.check("fft c2r", Kind::C2R, input.len(), output.len())?;
        aligned::<T>("fft c2r", "the real output", output.device_ptr())?;
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
        self.check("fft c2r", Kind::C2R, input.len(), output.len())?;
        aligned::<T>("fft c2r", "the real output", output.device_ptr())?;
        if self.batch == 0 {
            return Ok(());
        }
        ready(t)?;
        let p = *self;
        cuda::with_plan::<T>(t, self, Kind::C2R, |ws, plan| {
            let op = t.foreign(T::EXEC[3], (), (input, output, ws)).host(
                move |(), (x, y, _): (&mut [Complex<T>], &mut [T], &mut [u8])| {
                    T::host_c2r(p.dims(), x, y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`; the input is declared a write
            // (cuFFT overwrites it).
            unsafe {
                op.capture_safe().run(|s, (), (x, y, w)| {
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
                    T::host_c2c(p.dims(), matches!(kind, Kind::Forward | Kind::R2C), y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`.
            unsafe {
                op.capture_safe().run(|s, (x,), (y, w)| {
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
                    T::host_c2c(p.dims(), matches!(kind, Kind::Forward | Kind::R2C), y);
                    Ok(())
                },
            );
            // SAFETY: as in `forward_real`; cuFFT transforms in place when
            // both pointers agree.
            unsafe {
                op.capture_safe().run(|s, (), (y, w)| {
                    cuda::exec(plan, s, w, name, |h| {
                        T::c2c(h, y.as_mut_ptr(), y.as_mut_ptr(), cuda::direction(kind))
                    })
                })
            }
        })
    }
}

/// Refuses a real operand that does not start on a boundary of its
/// complex type (`2 * size_of::<T>()` bytes): cuFFT's real transforms
/// want it (measured on the H200: `CUFFT_INVALID_VALUE`); the host backend
/// refuses it too, so both behave alike.
fn aligned<T>(op: &'static str, name: &str, ptr: u64) -> Result<()> {
    let align = 2 * std::mem::size_of::<T>() as u64;
    if ptr % align != 0 {
        return Err(Error::Shape {
            op,
            problem: format!(
                "{name} starts at an odd element ({align}-byte alignment needed, as cuFFT's complex type); use a view that starts at an even element"
            ),
        });
    }
    Ok(())
}
