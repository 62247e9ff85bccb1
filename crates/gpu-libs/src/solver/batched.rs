//! Batched Cholesky: [`PotrfBatched`] and [`PotrsBatched`], many small
//! systems of one size in one call each (cuSOLVER's `?potrfBatched` and
//! `?potrsBatched`), for the many small solves that sibling tasks would
//! otherwise make one call each (a call costs microseconds of host time;
//! a small factorization less on the device).
//!
//! The matrices of a batch lie in one buffer, `stride` elements apart
//! (cuBLAS's strided batches); the wrappers build the pointer arrays
//! cuSOLVER takes, on the task's stream, so safe code never hands the
//! library an address of its own. Each problem's result is a word of its
//! own ([`TaskContext::status_words`]): a failure names the first problem
//! that failed and lists the others.

use super::cuda::with_handle;
use super::ops::{ci, operand};
use super::{bad_argument, check_later, host, judge_potrf, ready, Scalar, Uplo};
use crate::blas::fits;
use gpu_sched::{DeviceSlice, DeviceSliceMut, Result, ResultExt, TaskContext};
use std::ffi::c_int;

/// Refuses `op` while `t` records into a graph, before anything is
/// queued: its pointer arrays are uploaded from host memory, which a graph
/// cannot hold.
fn not_recording(t: &TaskContext, op: &'static str) -> Result<()> {
    if t.is_recording() {
        return Err(gpu_sched::Error::Capturing {
            what: "a batched Cholesky (its pointer arrays are uploaded from host memory)",
        })
        .context(op);
    }
    Ok(())
}

/// Checks a batch of `count` column-major `rows x cols` operands with
/// leading dimension `ld`, `stride` apart, in `len` elements (written ones
/// must not overlap) and that the sizes fit cuSOLVER's `int`.
fn batch_operand(
    op: &'static str,
    name: &str,
    (rows, cols, ld): (usize, usize, usize),
    (count, stride): (usize, usize),
    (len, written): (usize, bool),
) -> Result<()> {
    let one = operand(op, name, (rows, cols, ld), usize::MAX)?;
    fits(op, name, one, count, stride, len, written)?;
    crate::blas::int(op, "the batch", count).map(drop)
}

/// The device addresses of `count` operands `stride` elements apart from
/// `base`, `cols` columns each `ld` apart, column by column: for column
/// `j`, problem `i`'s column `j` at index `j * count + i` (a batch of one
/// column per call), as the `T*` cuSOLVER reads.
fn addresses<T>(
    base: u64,
    (count, stride): (usize, usize),
    (cols, ld): (usize, usize),
) -> Vec<u64> {
    let size = std::mem::size_of::<T>() as u64;
    (0..cols)
        .flat_map(|j| (0..count).map(move |i| base + size * (i * stride + j * ld) as u64))
        .collect()
}

/// The Cholesky factorizations of `batch` symmetric positive definite
/// `n x n` matrices in place, `stride` elements apart in one buffer (as
/// [`super::Potrf`] on each), with one difference: the other triangle of
/// each matrix is cuSOLVER's workspace, so its values afterwards are
/// unspecified (the host backend leaves them). A matrix that is not
/// positive definite is [`gpu_sched::Error::NotPositiveDefinite`] at the task's next wait, with
/// the context "problem `i` of a batch of `batch`" (and the others that
/// failed); the other problems are factored.
#[derive(Clone, Copy, Debug)]
pub struct PotrfBatched {
    n: usize,
    batch: usize,
    uplo: Uplo,
    lda: Option<usize>,
    stride: Option<usize>,
}

impl PotrfBatched {
    /// `batch` factorizations of `n x n` matrices, lower, packed
    /// (`lda = n`, `stride = lda * n`).
    pub fn new(n: usize, batch: usize) -> Self {
        PotrfBatched {
            n,
            batch,
            uplo: Uplo::Lower,
            lda: None,
            stride: None,
        }
    }
    /// The triangle that holds each matrix and gets its factor.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// The leading dimension of each matrix.
    pub fn ld(mut self, lda: usize) -> Self {
        self.lda = Some(lda);
        self
    }
    /// The elements from one matrix to the next (at least one matrix's
    /// span: the matrices are written).
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = Some(stride);
        self
    }

    /// Queues the factorizations of the matrices in `a` on `t`'s stream.
    ///
    /// # Errors
    ///
    /// [`gpu_sched::Error::Shape`] (nothing queued);
    /// [`gpu_sched::Error::LibraryUnavailable`]; cuSOLVER's errors; out of
    /// memory for the pointer array. The results at the next wait.
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "potrfBatched";
        let (n, batch, uplo) = (self.n, self.batch, self.uplo);
        let lda = self.lda.unwrap_or(n.max(1));
        let stride = self.stride.unwrap_or(lda.saturating_mul(n));
        batch_operand(OP, "A", (n, n, lda), (batch, stride), (a.len(), true))?;
        if n == 0 || batch == 0 {
            return Ok(()); // LAPACK's quick return
        }
        not_recording(t, OP)?;
        ready(t)?;
        let ptrs = t.from_host(&addresses::<T>(a.device_ptr(), (batch, stride), (1, lda)))?;
        let words = t.status_words(batch)?;
        let (info, info_host) = (words.device_ptr(), words.host_ptr() as usize);
        let op = t.foreign(T::POTRF_BATCHED.0, (&ptrs,), (a,)).host(
            move |(_,): (&[u64],), (a,): (&mut [T],)| {
                for i in 0..batch {
                    let r = host::potrf(uplo, n, lda, &mut a[i * stride..]);
                    // SAFETY: word `i < batch` of the live run (its check
                    // holds it until the wait after this operation),
                    // written by this twin only.
                    unsafe { (info_host as *mut i32).add(i).write_volatile(r) };
                }
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `ptrs` holds `batch` addresses of matrices within `a`'s
        // checked span, on the task's stream before this call (stream
        // order); `info` a live run of `batch` words; queued.
        let r = unsafe {
            op.run(|_, (ptrs,), (_,)| {
                reached.set(true);
                with_handle(t, T::POTRF_BATCHED.0, |h| {
                    let s = (T::POTRF_BATCHED.1)(
                        h,
                        uplo.into(),
                        ci(n),
                        ptrs.as_ptr() as *mut *mut T,
                        ci(lda),
                        info as usize as *mut c_int,
                        ci(batch),
                    );
                    (s, ())
                })
            })
        };
        check_later(t, words, OP, r.is_ok() || reached.get(), judge_potrf)?;
        r
    }
}

/// Solves `A_i X_i = B_i` for each of `batch` systems with the Cholesky
/// factors of [`PotrfBatched`] (the same [`Uplo`]), each `B_i`
/// `n x nrhs`, overwritten by `X_i`. cuSOLVER solves one right-hand side a
/// call; more are one call per column.
#[derive(Clone, Copy, Debug)]
pub struct PotrsBatched {
    n: usize,
    nrhs: usize,
    batch: usize,
    uplo: Uplo,
    ld: [Option<usize>; 2],
    stride: [Option<usize>; 2],
}

impl PotrsBatched {
    /// `batch` solves with `nrhs` right-hand sides of `n x n` factors,
    /// lower, packed.
    pub fn new(n: usize, nrhs: usize, batch: usize) -> Self {
        PotrsBatched {
            n,
            nrhs,
            batch,
            uplo: Uplo::Lower,
            ld: [None; 2],
            stride: [None; 2],
        }
    }
    /// The triangle that holds the factors.
    pub fn uplo(mut self, uplo: Uplo) -> Self {
        self.uplo = uplo;
        self
    }
    /// The leading dimensions of each `A` and each `B`.
    pub fn ld(mut self, lda: usize, ldb: usize) -> Self {
        self.ld = [Some(lda), Some(ldb)];
        self
    }
    /// The elements from one factor to the next (any: 0 solves every
    /// system with one factor) and from one `B` to the next (at least
    /// one's span: they are written).
    pub fn stride(mut self, stride_a: usize, stride_b: usize) -> Self {
        self.stride = [Some(stride_a), Some(stride_b)];
        self
    }

    /// Queues the solves on `t`'s stream: `a` (the factors) is read, `b`
    /// written.
    ///
    /// # Errors
    ///
    /// As [`PotrfBatched::run`].
    pub fn run<T: Scalar>(
        &self,
        t: &TaskContext,
        a: &(impl DeviceSlice<T> + ?Sized),
        b: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        const OP: &str = "potrsBatched";
        let (n, nrhs, batch, uplo) = (self.n, self.nrhs, self.batch, self.uplo);
        let lda = self.ld[0].unwrap_or(n.max(1));
        let ldb = self.ld[1].unwrap_or(n.max(1));
        let sa = self.stride[0].unwrap_or(lda.saturating_mul(n));
        let sb = self.stride[1].unwrap_or(ldb.saturating_mul(nrhs));
        batch_operand(OP, "A", (n, n, lda), (batch, sa), (a.len(), false))?;
        batch_operand(OP, "B", (n, nrhs, ldb), (batch, sb), (b.len(), true))?;
        if n == 0 || nrhs == 0 || batch == 0 {
            return Ok(()); // LAPACK's quick return
        }
        not_recording(t, OP)?;
        ready(t)?;
        let mut all = addresses::<T>(a.device_ptr(), (batch, sa), (1, lda));
        all.extend(addresses::<T>(b.device_ptr(), (batch, sb), (nrhs, ldb)));
        let ptrs = t.from_host(&all)?;
        let word = t.status_word()?;
        let info = word.device_ptr();
        let op = t.foreign(T::POTRS_BATCHED.0, (a, &ptrs), (b,)).host(
            move |(a, _): (&[T], &[u64]), (b,): (&mut [T],)| {
                for i in 0..batch {
                    host::potrs(
                        (uplo, n, nrhs),
                        (&a[i * sa..], lda),
                        (&mut b[i * sb..], ldb),
                    );
                }
                Ok(())
            },
        );
        let reached = std::cell::Cell::new(false);
        // SAFETY: `ptrs` holds `batch` addresses of factors within `a`'s
        // checked span, then `batch` of each column of the `B`s within
        // `b`'s (column `j`'s at `batch * (1 + j)`), queued before this
        // call on the task's stream; one right-hand side a call, as
        // cuSOLVER supports; `info` a live word; queued.
        let r = unsafe {
            op.run(|_, (_, ptrs), (_,)| {
                reached.set(true);
                let base = ptrs.as_ptr() as *mut *mut T;
                for j in 0..nrhs {
                    with_handle(t, T::POTRS_BATCHED.0, |h| {
                        let s = (T::POTRS_BATCHED.1)(
                            h,
                            uplo.into(),
                            ci(n),
                            1,
                            base,
                            ci(lda),
                            base.add(batch * (1 + j)),
                            ci(ldb),
                            info as usize as *mut c_int,
                            ci(batch),
                        );
                        (s, ())
                    })?;
                }
                Ok(())
            })
        };
        check_later(t, word, OP, r.is_ok() || reached.get(), bad_argument)?;
        r
    }
}
