//! Dense factorizations and solves on a task's stream (DESIGN "Numerical libraries and foreign work"): cuSOLVER on
//! the CUDA backend, `faer` on the host backend. Each is a tracked
//! operation over the buffers it names (a foreign operation): what it
//! factors or solves in place is a write, the factor a solve reads is a
//! read, its workspace a tracked buffer of the task (allocated on its
//! stream, freed in stream order). Shapes and leading dimensions are
//! checked against the buffers before anything is queued
//! ([`Error::Shape`]).
//!
//! # Results: checked at the next wait
//!
//! A factorization's `info` (LAPACK's: a leading minor that is not
//! positive definite, a zero pivot) is written by the device into a word
//! of host-visible memory and checked at the task's **next host wait**,
//! not by a wait of its own: [`TaskContext::synchronize`] and everything
//! built on it (`to_vec`, `copy_to_host`, `host_sync_ptr`) return
//! [`Error::NotPositiveDefinite`] or [`Error::Singular`] once the work is
//! done (as a kernel fault surfaces at the next wait). A task of `gpu`'s
//! scopes that ends with a result unchecked hands it to the task that joins
//! it (with its final fence), and a top-level scope whose tasks left
//! results unchecked waits for them at its end, so a failure is never
//! lost. A task dropped with results unchecked waits for them at its drop
//! and keeps a failure for the runtime's next synchronize.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_libs::solver::{Potrf, Potrs};
//! let rt = gpu_sched::Runtime::new(Default::default())?;
//! let t = rt.begin_task()?;
//! // A = [[4, 2], [2, 3]] (column-major), b = [2, 1].
//! let mut a = t.from_host(&[4.0f64, 2.0, 2.0, 3.0])?;
//! let mut b = t.from_host(&[2.0f64, 1.0])?;
//! Potrf::new(2).run(&t, &mut a)?; // L in the lower triangle
//! Potrs::new(2, 1).run(&t, &a, &mut b)?;
//! let x = t.to_vec(&b)?; // the wait that checks potrf's info
//! assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12);
//! let mut bad = t.from_host(&[1.0f64, 2.0, 2.0, 1.0])?; // indefinite
//! Potrf::new(2).run(&t, &mut bad)?; // queued: no wait, no error yet
//! let e = t.synchronize().unwrap_err();
//! assert!(matches!(e, gpu_sched::Error::NotPositiveDefinite { minor: 2, .. }));
//! # Ok(()) }
//! ```

mod batched;
mod cuda;
mod host;
mod ops;

pub use crate::blas::{Op, Uplo};
pub use batched::{PotrfBatched, PotrsBatched};
pub use ops::{Geqrf, Getrf, Getrs, Pivots, Potrf, Potrs};

use crate::blas::Scalar as BlasScalar;
use gpu_sched::TaskContext;
use gpu_sched::{Error, Result};

/// The element types of the solver operations: `f32` and `f64`. Sealed.
pub trait Scalar:
    BlasScalar + cuda::Sealed + faer::traits::RealField + std::ops::Div<Output = Self>
{
}
impl Scalar for f32 {}
impl Scalar for f64 {}

/// The library's name in errors.
const LIBRARY: &str = "cuSOLVER";

/// A negative `info`: argument `-value` was invalid (the wrappers check
/// every argument first, so this is the library's complaint).
fn bad_argument(op: &'static str, value: i32) -> Error {
    Error::Library {
        library: LIBRARY,
        call: op,
        code: value,
        name: format!("argument {} is invalid", -value),
    }
}

/// potrf's `info`: a positive one is the order of the leading minor that
/// is not positive definite.
fn judge_potrf(op: &'static str, value: i32) -> Error {
    if value > 0 {
        Error::NotPositiveDefinite {
            op,
            minor: value as usize,
        }
    } else {
        bad_argument(op, value)
    }
}

/// getrf's `info`: a positive one is the (1-based) index of a zero pivot.
fn judge_getrf(op: &'static str, value: i32) -> Error {
    if value > 0 {
        Error::Singular {
            op,
            pivot: value as usize,
        }
    } else {
        bad_argument(op, value)
    }
}

/// cuSOLVER loaded and probed on the CUDA backend (before anything is
/// queued); nothing on the host backend ([`crate::shared::ready`]).
fn ready(t: &TaskContext) -> Result<()> {
    crate::shared::ready::<cuda::Cusolver>(t)
}

/// Registers the check of `op`'s result word once the work that writes it
/// may have been queued (`queued`); otherwise the word goes back unused
/// (nothing writes it), so no check waits for work that never was. The
/// word is `t`'s runtime's (`TaskContext::status_word`), so the check is
/// never refused.
fn check_later(
    t: &TaskContext,
    word: gpu_sched::StatusWord,
    op: &'static str,
    queued: bool,
    judge: gpu_sched::StatusJudge,
) -> Result<()> {
    if queued {
        t.check_status_later(word, op, judge)?;
    }
    Ok(())
}
