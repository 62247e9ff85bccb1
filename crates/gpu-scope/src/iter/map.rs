//! [`Map`], chunks mapped to host values, and its terminal methods, which
//! combine the values on the host in chunk order.

use super::{drive, ChunkIterator, Item};
use crate::scope::Scope;
use gpu_sched::{DeviceRepr, DeviceSliceMut, Error, Result, TaskContext};

/// Chunks mapped to host values ([`ParChunks::map`](super::ParChunks::map)); its methods run it.
pub struct Map<I, F> {
    /// The iterator whose chunks are mapped.
    pub(super) base: I,
    pub(super) f: F,
}

impl<I: std::fmt::Debug, F> std::fmt::Debug for Map<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map").field("inner", &self.base).finish()
    }
}

/// The value a `min` or `max` keeps: a value not comparable with itself
/// (a float NaN) wins over any other, the first in chunk order; else
/// `better(v, best)` says whether `v` replaces `best`.
fn pick<R: PartialOrd>(values: Vec<R>, better: impl Fn(&R, &R) -> bool) -> Option<R> {
    let nan = |v: &R| v.partial_cmp(v).is_none();
    let mut it = values.into_iter();
    let mut best = it.next()?;
    for v in it {
        if nan(&best) {
            break;
        }
        if nan(&v) || better(&v, &best) {
            best = v;
        }
    }
    Some(best)
}

/// Every terminal method runs one task per chunk (ordered as
/// [`ParChunks::for_each`](super::ParChunks::for_each)'s) and returns the same errors: a chunk size of
/// 0 ([`Error::ZeroChunk`]) or a zip's [`Error::LengthMismatch`] before any
/// task runs; the error of the first chunk (in chunk order) whose closure
/// failed, once every chunk's task returned and its GPU work finished. A
/// chunk's panic is re-raised once every chunk's task returned.
impl<I, F, R> Map<I, F>
where
    I: ChunkIterator,
    R: Send,
    F: for<'s> Fn(&Scope<'_, '_>, Item<'s, I>) -> Result<R> + Send + Sync,
{
    fn run<X>(self, then: impl FnOnce(&TaskContext, Vec<R>) -> Result<X>) -> Result<X> {
        drive(self.base, self.f, then)
    }

    /// The values, in chunk order, into any collection (`Vec<R>` first).
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn collect<C: FromIterator<R>>(self) -> Result<C> {
        self.run(|_, v| Ok(v.into_iter().collect()))
    }

    /// `op` over the values in chunk order, from `identity()`:
    /// `op(op(op(identity(), v0), v1), v2)`; `identity()` for no chunks.
    /// (Rayon's `reduce` combines in an order it picks; this one is fixed,
    /// so a float reduction gives the same bits on every run.)
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn reduce<ID, OP>(self, identity: ID, op: OP) -> Result<R>
    where
        ID: FnOnce() -> R,
        OP: FnMut(R, R) -> R,
    {
        self.run(|_, v| Ok(v.into_iter().fold(identity(), op)))
    }

    /// The values' sum in chunk order (`S::sum`; 0 for no chunks). To add
    /// `f32` values in `f64`, map to `f64`.
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn sum<S: std::iter::Sum<R>>(self) -> Result<S> {
        self.run(|_, v| Ok(v.into_iter().sum()))
    }

    /// The least value, `None` for no chunks. NaN wins: a value not
    /// comparable with itself (a float NaN) is the result if there is one
    /// (the first in chunk order), as in IEEE 754's `minimum`, NumPy and
    /// PyTorch. Of equal values the first is kept (as `Iterator::min`); of
    /// two values neither less than the other, the earlier.
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn min(self) -> Result<Option<R>>
    where
        R: PartialOrd,
    {
        self.run(|_, v| Ok(pick(v, |v, best| v < best)))
    }

    /// The greatest value, `None` for no chunks. NaN wins, as in
    /// [`Map::min`]. Of equal values the last is kept (as `Iterator::max`);
    /// of two values neither greater than nor equal to the other, the
    /// earlier.
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn max(self) -> Result<Option<R>>
    where
        R: PartialOrd,
    {
        self.run(|_, v| Ok(pick(v, |v, best| v >= best)))
    }

    /// Runs `g` on each value, in the chunk's task right after the map.
    ///
    /// # Errors
    ///
    /// As the type's.
    pub fn for_each<G: Fn(R) + Send + Sync>(self, g: G) -> Result<()> {
        let f = self.f;
        drive(self.base, move |t, item| f(t, item).map(&g), |_, _| Ok(()))
    }

    /// The values, in chunk order, copied into `out` on the device (one
    /// element per chunk) from the joining task (the iterator's task, or
    /// the run's own), once every chunk's task returned: a host round trip
    /// of one value per chunk. To keep per-chunk results on the device
    /// instead, zip with `par_chunks_mut(&mut out, 1)` and write each
    /// chunk's element in its task.
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless `out` has one element per chunk
    /// (before any task runs); as the type's; the copy's.
    pub fn collect_into(self, out: &mut (impl DeviceSliceMut<R> + ?Sized)) -> Result<()>
    where
        R: DeviceRepr,
    {
        let n = self.base.chunks()?;
        if out.len() != n {
            return Err(Error::LengthMismatch {
                what: "collect_into's output (one element per chunk)",
                expected: n,
                got: out.len(),
            });
        }
        self.run(|t, v| t.copy_from_host(out, &v))
    }
}
