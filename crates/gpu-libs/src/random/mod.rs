//! Random fills of buffers on a task's stream (DESIGN "Numerical libraries and foreign work"): cuRAND on the CUDA
//! backend, a seeded ChaCha generator on the host backend. A fill is a
//! tracked operation that writes the buffer it names (a foreign
//! operation, `TaskContext::foreign`), ordered with every other use of it
//! as a kernel launch is.
//!
//! An [`Rng`] is a seed and an offset, held by the user (`Copy`): each
//! fill draws the values at its offset of the seed's sequence and moves
//! the offset past them, so what a fill writes depends on the seed, the
//! offset, the length and the kind of fill only, never on which task or
//! stream runs it, where the output lies (an allocation, or a view at any
//! element), nor on what else runs meanwhile. Two `Rng`s of one
//! seed and offset fill alike; fills of one `Rng` in turn draw disjoint
//! parts of its sequence.
//!
//! - [`Rng::uniform`]: uniform in `(0, 1]` (0 excluded, 1 included, as
//!   cuRAND's).
//! - [`Rng::normal`]: normal of a mean and standard deviation
//!   (Box-Muller, as cuRAND's).
//!
//! Fills are not capture-safe: in a graphed scope or a capture they are
//! `Error::Capturing` before anything is queued (on an H100, cuRAND's
//! generation captured on a side stream failed with
//! `CURAND_STATUS_LAUNCH_FAILURE`; fill before the graphed scope).
//!
//! The two backends' sequences differ: the same seed gives the same values
//! on the same backend (and, on the CUDA backend, the same cuRAND
//! version), not across backends. The host backend's sequence is exactly
//! consecutive: two fills in a row equal one fill of their total length.
//! The CUDA backend's is not promised to be (cuRAND's Philox generator
//! lays a call's values out its own way): there, each value of a fill
//! reserves eight 32-bit words of Philox's sequence (a fill of `n` values
//! at offset `o` draws from cuRAND's offsets `8 o .. 8 (o + n)`, more than
//! any of its outputs consumes), so fills of one `Rng` never overlap.
//!
//! cuRAND is loaded on first use and probed ([`Error::LibraryUnavailable`]
//! where it is missing). Its generators (`CURAND_RNG_PSEUDO_PHILOX4_32_10`)
//! are pooled per stream slot of the runtime, bound to the task's stream
//! and given the seed and offset at each call.
//!
//! **A fill waits on the host for its stream** on the CUDA backend: the
//! call returns only once the work queued on the task's stream before it
//! has run, unlike the other libraries' calls. cuRAND does this itself: a
//! generation after a new seed or offset (every fill's, since each names
//! its own) waits, and so does freeing a generator; a generation that
//! goes on from the last without either does not (H100 runs of
//! `library_calls_do_not_wait`, `benches/results/`). Fill before the work
//! it would sit behind, or on a task of its own.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_libs::random::Rng;
//! let rt = gpu_sched::Runtime::new(Default::default())?;
//! let t = rt.begin_task()?;
//! let mut rng = Rng::new(42);
//! let mut x = t.zeros::<f32>(1000)?;
//! rng.uniform(&t, &mut x)?;
//! assert_eq!(rng.offset(), 1000);
//! assert!(t.to_vec(&x)?.iter().all(|&v| v > 0.0 && v <= 1.0));
//! let mut y = t.zeros::<f64>(1001)?; // odd lengths are fine
//! rng.normal(&t, 5.0, 2.0, &mut y)?;
//! // The same seed and offset draw the same values.
//! let mut again = t.zeros::<f32>(1000)?;
//! Rng::new(42).uniform(&t, &mut again)?;
//! assert_eq!(t.to_vec(&again)?, t.to_vec(&x)?);
//! # Ok(()) }
//! ```

mod cuda;
mod host;
pub(crate) mod sealed;

use gpu_sched::{BackendKind, TaskContext};
use gpu_sched::{DeviceRepr, DeviceSliceMut};
use gpu_sched::{Error, Result};

/// The element types of the fills: `f32` and `f64`. Sealed.
pub trait Float: DeviceRepr + sealed::Sealed {}
impl Float for f32 {}
impl Float for f64 {}

/// The cuRAND functions the fills call, checked by the probe.
pub(crate) const SYMBOLS: &[&str] = &[
    "curandCreateGenerator",
    "curandDestroyGenerator",
    "curandSetStream",
    "curandSetPseudoRandomGeneratorSeed",
    "curandSetGeneratorOffset",
    "curandGenerateUniform",
    "curandGenerateUniformDouble",
    "curandGenerateNormal",
    "curandGenerateNormalDouble",
];

/// The 32-bit words of cuRAND's sequence each value of a fill reserves
/// (see the [module](self)).
pub(crate) const SLOT_WORDS: u64 = 8;

/// A seeded generator's position: a seed and an offset into its sequence,
/// in values. `Copy`: a copy continues from the same place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rng {
    seed: u64,
    offset: u64,
}

impl Rng {
    /// The start of `seed`'s sequence.
    pub const fn new(seed: u64) -> Self {
        Rng { seed, offset: 0 }
    }

    /// The same seed at `offset` values into its sequence.
    pub const fn with_offset(self, offset: u64) -> Self {
        Rng {
            seed: self.seed,
            offset,
        }
    }

    /// The seed.
    pub const fn seed(&self) -> u64 {
        self.seed
    }

    /// The offset of the next fill, in values: the values drawn so far.
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// Fills `out` with values uniform in `(0, 1]`, drawn at this offset,
    /// and moves the offset past them.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] before anything is queued when the offset would
    /// overflow; [`Error::LibraryUnavailable`] without cuRAND; cuRAND's
    /// failures ([`Error::Library`]); the foreign operation's errors. The
    /// offset moves only on success.
    pub fn uniform<T: Float>(
        &mut self,
        t: &TaskContext,
        out: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let n = out.len();
        let end = self.end("uniform", n)?;
        if n == 0 {
            return Ok(());
        }
        ready(t)?;
        let (seed, offset) = (self.seed, self.offset);
        let op = t
            .foreign(T::UNIFORM, (), (out,))
            .host(move |(), (y,): (&mut [T],)| {
                host::uniform(seed, offset, y);
                Ok(())
            });
        // SAFETY: cuRAND writes `n` values at `y`, `out`'s length, on the
        // stream the generator is bound to, the operation's.
        unsafe {
            op.run(|s, (), (y,)| {
                cuda::generate(t, s, seed, offset * SLOT_WORDS, |g| {
                    (T::UNIFORM, T::uniform(g, y.as_mut_ptr(), n))
                })
            })?;
        }
        self.offset = end;
        Ok(())
    }

    /// Fills `out` with values normal of mean `mean` and standard
    /// deviation `std`, drawn at this offset, and moves the offset past
    /// them. Any length, anywhere: the values depend on the seed, the
    /// offset and the length only, never on where `out` lies (a view
    /// starting at an odd element gets the values an allocation gets).
    ///
    /// On the CUDA backend, cuRAND's normal generation asks for an even
    /// count (value pairs of the Box-Muller transform) at an address
    /// aligned to a pair. A fill of `n` values at offset `o` is: for an
    /// even `n`, the `n` values cuRAND generates at its offset `8 o`; for
    /// an odd `n`, the `n - 1` it generates at `8 (o + 1)`, then the
    /// second of the pair it generates at `8 o`. Where `out` does not start
    /// at a pair's alignment, they are generated into a scratch buffer
    /// (allocated on the task's stream, aligned) and copied in, so `out`'s
    /// address changes nothing; the pair of an odd `n` always goes through
    /// scratch.
    ///
    /// # Errors
    ///
    /// As [`Rng::uniform`]; the scratch allocation's and the copies'.
    pub fn normal<T: Float>(
        &mut self,
        t: &TaskContext,
        mean: T,
        std: T,
        out: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let n = out.len();
        let end = self.end("normal", n)?;
        if n == 0 {
            return Ok(());
        }
        ready(t)?;
        let (seed, offset) = (self.seed, self.offset);
        let size = std::mem::size_of::<T>() as u64;
        // The pairs, and the one value left over for an odd length.
        let body = n & !1;
        let odd = n % 2 == 1;
        let cuda = t.runtime().backend() == BackendKind::Cuda;
        // Where cuRAND may write in `out` itself (a pair's alignment), only
        // the pair of an odd length goes through scratch; elsewhere all
        // of it does (the body, then the pair, at even elements).
        let aligned = out.device_ptr() % (2 * size) == 0;
        let pair = if odd { 2 } else { 0 };
        let scratch_len = match (cuda, aligned) {
            (false, _) => 0,
            (true, true) => pair,
            (true, false) => body + pair,
        };
        let mut scratch = t.alloc::<T>(scratch_len)?;
        let op = t.foreign(T::NORMAL, (), (out, &mut scratch)).host(
            move |(), (y, _): (&mut [T], &mut [T])| {
                host::normal(seed, offset, mean, std, y);
                Ok(())
            },
        );
        let words = offset * SLOT_WORDS;
        // SAFETY: cuRAND writes `body` (even) values at `b` and 2 at `p`,
        // each aligned to a pair: `b` is `out` (aligned, `n >= body`
        // elements) or the scratch's start, `p` the scratch's start or its
        // element `body` (even), within the scratch's `body + 2` or 2
        // elements; on the stream the generator is bound to, the
        // operation's. The copies move within the two declared buffers on
        // that stream: `body` values to `out`'s start, one to its last.
        unsafe {
            op.run(|s, (), (y, sc)| {
                let (b, p) = if aligned {
                    (y.raw(), sc.raw())
                } else {
                    (sc.raw(), sc.raw() + body as u64 * size)
                };
                if body > 0 {
                    // After the pair's words when there is one.
                    let at = words + if odd { SLOT_WORDS } else { 0 };
                    cuda::generate(t, s, seed, at, |g| {
                        let b = b as usize as *mut T;
                        (T::NORMAL, T::normal(g, b, body, mean, std))
                    })?;
                    if !aligned {
                        cuda::copy(s, y.raw(), b, body * size as usize)?;
                    }
                }
                if odd {
                    cuda::generate(t, s, seed, words, |g| {
                        let p = p as usize as *mut T;
                        (T::NORMAL, T::normal(g, p, 2, mean, std))
                    })?;
                    let last = y.raw() + body as u64 * size;
                    cuda::copy(s, last, p + size, size as usize)?;
                }
                Ok(())
            })?;
        }
        self.offset = end;
        Ok(())
    }

    /// The offset after `n` more values, if it and cuRAND's offset of it
    /// fit.
    fn end(&self, op: &'static str, n: usize) -> Result<u64> {
        (n as u64)
            .checked_add(self.offset)
            .filter(|end| end.checked_mul(SLOT_WORDS).is_some())
            .ok_or_else(|| Error::Shape {
                op,
                problem: format!(
                    "{n} values at offset {} overflow the generator's offset",
                    self.offset
                ),
            })
    }
}

/// cuRAND loaded and probed on the CUDA backend (before anything is
/// queued); nothing on the host backend ([`crate::shared::ready`]).
fn ready(t: &TaskContext) -> Result<()> {
    crate::shared::ready::<cuda::Curand>(t)
}

/// How many cuRAND generators `rt` has made, and how many are idle in its
/// pool (both 0 on the host backend). For tests of the pool.
#[doc(hidden)]
pub fn generator_counts(rt: &gpu_sched::Runtime) -> (usize, usize) {
    cuda::counts(rt)
}
