//! The operations: [`Potrf`], [`Potrs`], [`Getrf`], [`Getrs`], [`Geqrf`],
//! each a builder whose `run` checks its shapes, then queues one foreign
//! operation (the library call with its workspace, or the host twin).
//!
//! A call with a zero dimension is LAPACK's quick return: it succeeds with
//! nothing queued, and needs no library. cuSOLVER is never called with
//! one (see `zero_dimensions_leave_nothing_behind` in the tests).

use super::cuda::{lwork, with_handle};
use super::{bad_argument, check_later, host, judge_getrf, judge_potrf, ready, Op, Scalar, Uplo};
use crate::blas::{fits, int, span};
use gpu_sched::Result;
use gpu_sched::TaskContext;
use gpu_sched::{DeviceSlice, DeviceSliceMut};
use std::ffi::c_int;

/// Checks that a column-major `rows x cols` operand with leading dimension
/// `ld` fits in `len` elements and that its sizes fit cuSOLVER's `int`;
/// the elements it spans.
pub(super) fn operand(
    op: &'static str,
    name: &str,
    (rows, cols, ld): (usize, usize, usize),
    len: usize,
) -> Result<usize> {
    let s = span(op, name, rows, cols, ld)?;
    fits(op, name, s, 1, s, len, false)?;
    for v in [rows, cols, ld] {
        int(op, name, v)?;
    }
    Ok(s)
}

/// Checks that a vector operand has at least `need` elements.
fn vector(op: &'static str, name: &str, need: usize, len: usize) -> Result<()> {
    fits(op, name, need, 1, need, len, false)
}

/// A checked size as cuSOLVER's `int` (`operand` proved it fits).
pub(super) fn ci(x: usize) -> c_int {
    x as c_int
}

/// The Cholesky factorization of a symmetric positive definite `n x n`
/// matrix in place: `A = L L^T` with `L` in the lower triangle
/// ([`Uplo::Lower`], the default) or `A = U^T U` with `U` in the upper one;
/// only that triangle is read and written. A matrix that is not positive
/// definite is [`gpu_sched::Error::NotPositiveDefinite`] at the task's next
/// wait (see the module's docs).
#[derive(Clone, Copy, Debug)]
pub struct Potrf {
    n: usize,
    uplo: Uplo,
    lda: Option<usize>,
}

impl Potrf {
    /// The factorization of an `n x n` matrix, lower, packed (`lda = n`).
    pub fn new(n: usize) -> Self {
        Potrf {
            n,
            uplo: Uplo::Lower,
            lda: None,
        }
    }
    /// The triangle that holds the matrix and gets the factor.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// The leading dimension of `A`.
    pub fn ld(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }

    /// Queues the factorization of `a` on `t`'s stream.
    ///
    /// # Errors
    ///
    /// [`gpu_sched::Error::Shape`] (nothing queued);
    /// [`gpu_sched::Error::LibraryUnavailable`]; cuSOLVER's errors; out of
    /// memory for the workspace. The result itself at the next wait.
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "potrf";
        let (n, uplo) = (self.n, self.uplo);
        let lda = self.lda.unwrap_or(n.max(1));
        operand(OP, "A", (n, n, lda), a.len())?;
        if n == 0 {
            return Ok(()); // LAPACK's quick return (the module's docs)
        }
        ready(t)?;
        let dptr = a.device_ptr() as usize as *mut T;
        let lw = lwork(t, T::POTRF_LWORK.0, |h, w| {
            // SAFETY: a size query: cuSOLVER reads only the arguments.
            unsafe { (T::POTRF_LWORK.1)(h, uplo.into(), ci(n), dptr, ci(lda), w) }
        })?;
        let mut ws = t.alloc::<T>(lw)?;
        let word = t.status_word()?;
        let (info, info_host) = (word.device_ptr(), word.host_ptr() as usize);
        let op = t.foreign(T::POTRF.0, (), (a, &mut ws)).host(
            move |(), (a, _): (&mut [T], &mut [T])| {
                let r = host::potrf(uplo, n, lda, a);
                // SAFETY: the word is live (its check holds it until the
                // wait after this operation) and written by this twin only.
                unsafe { (info_host as *mut i32).write_volatile(r) };
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `A` within its checked span and the workspace of the
        // queried size, on the task's stream; `info` is a live word;
        // queued (potrf is asynchronous).
        let r = unsafe {
            op.run(|_, (), (a, ws)| {
                reached.set(true);
                with_handle(t, T::POTRF.0, |h| {
                    let s = (T::POTRF.1)(
                        h,
                        uplo.into(),
                        ci(n),
                        a.as_mut_ptr(),
                        ci(lda),
                        ws.as_mut_ptr(),
                        ci(lw),
                        info as usize as *mut c_int,
                    );
                    (s, ())
                })
            })
        };
        // Registered once the library was called (a failed call may have
        // queued the kernel that writes the word; a word never written
        // stays 0); a refusal before it queued nothing (a capture, another
        // device's buffer): the word goes back unused.
        check_later(t, word, OP, r.is_ok() || reached.get(), judge_potrf)?;
        r
    }
}

/// Solves `A X = B` for `B` (`n x nrhs`, overwritten by `X`) with the
/// Cholesky factor of `A` from [`Potrf`] (the same [`Uplo`]).
#[derive(Clone, Copy, Debug)]
pub struct Potrs {
    n: usize,
    nrhs: usize,
    uplo: Uplo,
    ld: [Option<usize>; 2],
}

impl Potrs {
    /// The solve with `nrhs` right-hand sides of an `n x n` factor, lower,
    /// packed.
    pub fn new(n: usize, nrhs: usize) -> Self {
        Potrs {
            n,
            nrhs,
            uplo: Uplo::Lower,
            ld: [None; 2],
        }
    }
    /// The triangle that holds the factor.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// The leading dimensions of `A` and `B`.
    pub fn ld(mut self, lda: usize, ldb: usize) -> Self {
        self.ld = [Some(lda), Some(ldb)];
        self
    }

    /// Queues the solve on `t`'s stream: `a` (the factor) is read, `b`
    /// written.
    ///
    /// # Errors
    ///
    /// As [`Potrf::run`].
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        b: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "potrs";
        let (n, nrhs, uplo) = (self.n, self.nrhs, self.uplo);
        let lda = self.ld[0].unwrap_or(n.max(1));
        let ldb = self.ld[1].unwrap_or(n.max(1));
        operand(OP, "A", (n, n, lda), a.len())?;
        operand(OP, "B", (n, nrhs, ldb), b.len())?;
        if n == 0 || nrhs == 0 {
            return Ok(()); // LAPACK's quick return (the module's docs)
        }
        ready(t)?;
        let word = t.status_word()?;
        let info = word.device_ptr();
        let op = t
            .foreign(T::POTRS.0, (a,), (b,))
            .host(move |(a,): (&[T],), (b,): (&mut [T],)| {
                host::potrs((uplo, n, nrhs), (a, lda), (b, ldb));
                Ok(())
            });
        let reached = std::cell::Cell::new(false);
        // SAFETY: `A` and `B` within their checked spans, on the task's
        // stream; `info` a live word; queued.
        let r = unsafe {
            op.run(|_, (a,), (b,)| {
                reached.set(true);
                with_handle(t, T::POTRS.0, |h| {
                    let s = (T::POTRS.1)(
                        h,
                        uplo.into(),
                        ci(n),
                        ci(nrhs),
                        a.as_ptr(),
                        ci(lda),
                        b.as_mut_ptr(),
                        ci(ldb),
                        info as usize as *mut c_int,
                    );
                    (s, ())
                })
            })
        };
        // Registered once the library was called (a failed call may have
        // queued the kernel that writes the word; a word never written
        // stays 0); a refusal before it queued nothing (a capture, another
        // device's buffer): the word goes back unused.
        check_later(t, word, OP, r.is_ok() || reached.get(), bad_argument)?;
        r
    }
}

/// LU pivots (LAPACK's `ipiv`, 1-based row swaps) in device memory, written
/// only by [`Getrf`] and read by [`Getrs`]: safe code cannot put a value
/// there that would send getrs outside its right-hand sides (cuSOLVER reads
/// the pivots as given). Made as the identity (`1..=len`); the type keeps
/// the largest row a pivot may name, and [`Getrs`] refuses pivots that may
/// name a row it does not have.
#[derive(Debug)]
pub struct Pivots {
    buf: gpu_sched::Buffer<i32>,
    /// Every entry is at most this (the rows of the largest matrix
    /// factored into it, or its length for the identity).
    bound: usize,
}

impl Pivots {
    /// `len` pivots, the identity, on `t`'s stream.
    ///
    /// # Errors
    ///
    /// [`gpu_sched::Error::Shape`] past cuSOLVER's `int`; out of memory.
    pub fn new(t: &TaskContext, len: usize) -> Result<Pivots> {
        int("pivots", "len", len)?;
        let id: Vec<i32> = (1..=len as i32).collect();
        Ok(Pivots {
            buf: t.from_host(&id)?,
            bound: len,
        })
    }

    /// The number of pivots.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The pivots, to read (copy to the host, pass to a kernel).
    pub fn as_buffer(&self) -> &gpu_sched::Buffer<i32> {
        &self.buf
    }
}

/// The LU factorization with partial pivoting of an `m x n` matrix in
/// place, `P A = L U` (`L` unit lower below the diagonal, `U` on and above
/// it), the pivots into the first `min(m, n)` of `ipiv` ([`Pivots`],
/// LAPACK's: 1-based). An
/// exactly zero pivot is [`gpu_sched::Error::Singular`] at the task's next
/// wait (the factors are still complete, as in LAPACK).
#[derive(Clone, Copy, Debug)]
pub struct Getrf {
    m: usize,
    n: usize,
    lda: Option<usize>,
}

impl Getrf {
    /// The factorization of an `m x n` matrix, packed.
    pub fn new(m: usize, n: usize) -> Self {
        Getrf { m, n, lda: None }
    }
    /// The leading dimension of `A`.
    pub fn ld(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }

    /// Queues the factorization on `t`'s stream: `a` and `ipiv` written.
    ///
    /// # Errors
    ///
    /// As [`Potrf::run`].
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &mut (impl DeviceSliceMut<T> + ?Sized),
        pivots: &mut Pivots,
    ) -> Result<()> {
        const OP: &str = "getrf";
        let (m, n) = (self.m, self.n);
        let lda = self.lda.unwrap_or(m.max(1));
        operand(OP, "A", (m, n, lda), a.len())?;
        vector(OP, "ipiv", m.min(n), pivots.len())?;
        // The pivots written name rows 1..=m: from here the bound covers
        // them (a failure below leaves it wider, never too narrow).
        pivots.bound = pivots.bound.max(m);
        let ipiv = &mut pivots.buf;
        if m == 0 || n == 0 {
            return Ok(()); // LAPACK's quick return (the module's docs)
        }
        ready(t)?;
        let dptr = a.device_ptr() as usize as *mut T;
        let lw = lwork(t, T::GETRF_LWORK.0, |h, w| {
            // SAFETY: a size query: cuSOLVER reads only the arguments.
            unsafe { (T::GETRF_LWORK.1)(h, ci(m), ci(n), dptr, ci(lda), w) }
        })?;
        let mut ws = t.alloc::<T>(lw)?;
        let word = t.status_word()?;
        let (info, info_host) = (word.device_ptr(), word.host_ptr() as usize);
        let op = t.foreign(T::GETRF.0, (), (a, ipiv, &mut ws)).host(
            move |(), (a, ipiv, _): (&mut [T], &mut [i32], &mut [T])| {
                let r = host::getrf((m, n, lda), a, ipiv);
                // SAFETY: as in `Potrf::run`.
                unsafe { (info_host as *mut i32).write_volatile(r) };
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `A`, `ipiv` and the workspace within their checked or
        // queried sizes, on the task's stream; `info` a live word; queued.
        let r = unsafe {
            op.run(|_, (), (a, ipiv, ws)| {
                reached.set(true);
                with_handle(t, T::GETRF.0, |h| {
                    let s = (T::GETRF.1)(
                        h,
                        ci(m),
                        ci(n),
                        a.as_mut_ptr(),
                        ci(lda),
                        ws.as_mut_ptr(),
                        ipiv.as_mut_ptr(),
                        info as usize as *mut c_int,
                    );
                    (s, ())
                })
            })
        };
        // Registered once the library was called (a failed call may have
        // queued the kernel that writes the word; a word never written
        // stays 0); a refusal before it queued nothing (a capture, another
        // device's buffer): the word goes back unused.
        check_later(t, word, OP, r.is_ok() || reached.get(), judge_getrf)?;
        r
    }
}

/// Solves `op(A) X = B` for `B` (`n x nrhs`, overwritten by `X`) with the
/// LU factors and pivots of `A` from [`Getrf`].
#[derive(Clone, Copy, Debug)]
pub struct Getrs {
    n: usize,
    nrhs: usize,
    op: Op,
    ld: [Option<usize>; 2],
}

impl Getrs {
    /// The solve with `nrhs` right-hand sides of `n x n` factors, packed.
    pub fn new(n: usize, nrhs: usize) -> Self {
        Getrs {
            n,
            nrhs,
            op: Op::N,
            ld: [None; 2],
        }
    }
    /// `A` as factored or transposed.
    pub fn op(mut self, op: Op) -> Self {
        self.op = op;
        self
    }
    /// The leading dimensions of `A` and `B`.
    pub fn ld(mut self, lda: usize, ldb: usize) -> Self {
        self.ld = [Some(lda), Some(ldb)];
        self
    }

    /// Queues the solve on `t`'s stream: `a` and `ipiv` read, `b` written.
    /// `ipiv` has exactly `n` pivots, each naming a row in `1..=n` (a
    /// [`Pivots`] of `n`, factored by a [`Getrf`] of at most `n` rows), so
    /// the row swaps stay within `B`.
    ///
    /// # Errors
    ///
    /// As [`Potrf::run`].
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        pivots: &Pivots,
        b: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "getrs";
        let (n, nrhs, o) = (self.n, self.nrhs, self.op);
        let lda = self.ld[0].unwrap_or(n.max(1));
        let ldb = self.ld[1].unwrap_or(n.max(1));
        operand(OP, "A", (n, n, lda), a.len())?;
        operand(OP, "B", (n, nrhs, ldb), b.len())?;
        if pivots.len() != n || pivots.bound > n {
            return Err(gpu_sched::Error::Shape {
                op: OP,
                problem: format!(
                    "the pivots ({} of them, naming rows up to {}) are not those of an n = {n} factorization",
                    pivots.len(),
                    pivots.bound
                ),
            });
        }
        let ipiv = &pivots.buf;
        if n == 0 || nrhs == 0 {
            return Ok(()); // LAPACK's quick return (the module's docs)
        }
        ready(t)?;
        let word = t.status_word()?;
        let info = word.device_ptr();
        let op = t.foreign(T::GETRS.0, (a, ipiv), (b,)).host(
            move |(a, ipiv): (&[T], &[i32]), (b,): (&mut [T],)| {
                if let Some(p) = ipiv[..n].iter().find(|&&p| p < 1 || p as usize > n) {
                    return Err(gpu_sched::Error::Shape {
                        op: OP,
                        problem: format!("ipiv holds {p}, outside 1..={n}"),
                    });
                }
                host::getrs((o, n, nrhs), (a, lda, ipiv), (b, ldb));
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `A`, `ipiv` and `B` within their checked spans, on the
        // task's stream; `info` a live word; queued. The pivots name rows
        // `1..=n` of `B` only: `Pivots` are written by `Getrf` alone, whose
        // rows its bound covers, checked `<= n` above.
        let r = unsafe {
            op.run(|_, (a, ipiv), (b,)| {
                reached.set(true);
                with_handle(t, T::GETRS.0, |h| {
                    let s = (T::GETRS.1)(
                        h,
                        o.into(),
                        ci(n),
                        ci(nrhs),
                        a.as_ptr(),
                        ci(lda),
                        ipiv.as_ptr(),
                        b.as_mut_ptr(),
                        ci(ldb),
                        info as usize as *mut c_int,
                    );
                    (s, ())
                })
            })
        };
        // Registered once the library was called (a failed call may have
        // queued the kernel that writes the word; a word never written
        // stays 0); a refusal before it queued nothing (a capture, another
        // device's buffer): the word goes back unused.
        check_later(t, word, OP, r.is_ok() || reached.get(), bad_argument)?;
        r
    }
}

/// The QR factorization of an `m x n` matrix in place, as LAPACK's
/// geqrf: `R` on and above the diagonal, the Householder vectors below it
/// (their leading ones implied), their factors into `tau` (`min(m, n)`):
/// `Q = H_1 ... H_k`, `H_i = I - tau_i v_i v_i^T`.
#[derive(Clone, Copy, Debug)]
pub struct Geqrf {
    m: usize,
    n: usize,
    lda: Option<usize>,
}

impl Geqrf {
    /// The factorization of an `m x n` matrix, packed.
    pub fn new(m: usize, n: usize) -> Self {
        Geqrf { m, n, lda: None }
    }
    /// The leading dimension of `A`.
    pub fn ld(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }

    /// Queues the factorization on `t`'s stream: `a` and `tau` written.
    ///
    /// # Errors
    ///
    /// As [`Potrf::run`].
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &mut (impl DeviceSliceMut<T> + ?Sized),
        tau: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "geqrf";
        let (m, n) = (self.m, self.n);
        let lda = self.lda.unwrap_or(m.max(1));
        operand(OP, "A", (m, n, lda), a.len())?;
        vector(OP, "tau", m.min(n), tau.len())?;
        if m == 0 || n == 0 {
            return Ok(()); // LAPACK's quick return (the module's docs)
        }
        ready(t)?;
        let dptr = a.device_ptr() as usize as *mut T;
        let lw = lwork(t, T::GEQRF_LWORK.0, |h, w| {
            // SAFETY: a size query: cuSOLVER reads only the arguments.
            unsafe { (T::GEQRF_LWORK.1)(h, ci(m), ci(n), dptr, ci(lda), w) }
        })?;
        let mut ws = t.alloc::<T>(lw)?;
        let word = t.status_word()?;
        let info = word.device_ptr();
        let op = t.foreign(T::GEQRF.0, (), (a, tau, &mut ws)).host(
            move |(), (a, tau, _): (&mut [T], &mut [T], &mut [T])| {
                host::geqrf(m, n, lda, a, tau);
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `A`, `tau` and the workspace within their checked or
        // queried sizes, on the task's stream; `info` a live word; queued.
        let r = unsafe {
            op.run(|_, (), (a, tau, ws)| {
                reached.set(true);
                with_handle(t, T::GEQRF.0, |h| {
                    let s = (T::GEQRF.1)(
                        h,
                        ci(m),
                        ci(n),
                        a.as_mut_ptr(),
                        ci(lda),
                        tau.as_mut_ptr(),
                        ws.as_mut_ptr(),
                        ci(lw),
                        info as usize as *mut c_int,
                    );
                    (s, ())
                })
            })
        };
        // Registered once the library was called (a failed call may have
        // queued the kernel that writes the word; a word never written
        // stays 0); a refusal before it queued nothing (a capture, another
        // device's buffer): the word goes back unused.
        check_later(t, word, OP, r.is_ok() || reached.get(), bad_argument)?;
        r
    }
}
