//! Parallel iterators over the chunks of device buffers, named and shaped
//! like Rayon's (§10): [`par_chunks`] (read), [`par_chunks_mut`] (write),
//! [`zip`](ParChunks::zip), [`enumerate`](ParChunks::enumerate),
//! [`map`](ParChunks::map), then [`for_each`](ParChunks::for_each),
//! [`reduce`](Map::reduce), [`sum`](Map::sum), [`min`](Map::min) /
//! [`max`](Map::max), [`collect`](Map::collect) or
//! [`collect_into`](Map::collect_into) a device buffer.
//!
//! Each chunk runs as a task of its own (a stream of its own from its first
//! GPU operation), so sibling chunks overlap on the device and never wait
//! for each other: a read chunk is a [`View`] (reads never wait for reads),
//! a written chunk a [`ViewMut`] of a [`Split`] with stamps of its own,
//! rejoined to its buffer once every chunk's task returned. The closures get
//! the chunk's task as a [`Scope`] (it dereferences to its
//! [`TaskContext`]); what a `map` returns is a host value, and the values
//! are combined on the host in chunk order, so `sum`, `reduce`, `min` and
//! `max` give the same result on every run.
//!
//! Rayon's own traits (`ParallelIterator`, `IndexedParallelIterator`) are
//! not implemented: a chunk borrows a split that is rejoined when the call
//! returns, and Rayon's items cannot borrow from the call that drives them;
//! Rayon's closures get no task to submit GPU work on (§10 says more).
//!
//! ```
//! use gpu_kernels as k;
//! # fn main() -> gpu::Result<()> {
//! let x = gpu::Buffer::from_host(&[1.0f32; 1000])?;
//! let mut y = gpu::Buffer::<f32>::zeros(1000)?;
//! // y = 2 x, chunk by chunk
//! gpu::par_chunks(&x, 300)
//!     .zip(gpu::par_chunks_mut(&mut y, 300))
//!     .for_each(|t, (x, mut y)| k::scale_into(t, &x, &mut y, 2.0))?;
//! // the chunks' lengths, then their sums on the device, in chunk order
//! let lens: Vec<usize> = gpu::par_chunks(&y, 300).map(|_t, c| Ok(c.len())).collect()?;
//! assert_eq!(lens, [300, 300, 300, 100]);
//! let sums: Vec<f32> = gpu::par_chunks(&y, 300)
//!     .map(|t, c| {
//!         let mut s = t.zeros::<f32>(1)?;
//!         k::sum_atomic_into(t, &c, &mut s)?;
//!         Ok(t.to_vec(&s)?[0])
//!     })
//!     .collect()?;
//! assert_eq!(sums, [600.0, 600.0, 600.0, 200.0]);
//! # Ok(()) }
//! ```
//!
//! A written chunk cannot escape its task, neither kept by a closure nor
//! returned by a `map`:
//!
//! ```compile_fail
//! let x = gpu::Buffer::<f32>::zeros(8).unwrap();
//! let mut y = gpu::Buffer::<f32>::zeros(8).unwrap();
//! let kept = std::sync::Mutex::new(Vec::new());
//! gpu::par_chunks(&x, 4).zip(gpu::par_chunks_mut(&mut y, 4)).for_each(|_t, (_x, y)| {
//!     kept.lock().unwrap().push(y); // error: borrowed data escapes
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! ```compile_fail
//! let mut y = gpu::Buffer::<f32>::zeros(8).unwrap();
//! let views: Vec<gpu::ViewMut<'_, f32>> =
//!     gpu::par_chunks_mut(&mut y, 4).map(|_t, c| Ok(c)).collect().unwrap(); // error
//! ```

use crate::scope::{run_scope, Join, Scope};
use gpu_sched::{
    Buffer, DeviceRepr, DeviceSliceMut, Error, Result, Runtime, Split, TaskContext, View, ViewMut,
};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

pub(crate) mod sealed {
    use gpu_sched::{Result, Runtime, TaskContext};

    /// Only this crate's iterators are [`super::ChunkIterator`]s.
    pub trait Sealed {}

    /// What one run of an iterator lends its chunk tasks: the items, with
    /// a lifetime `'s` that ends before the parts are finished (a written
    /// chunk borrows its split, which the run rejoins afterwards).
    pub trait Lend<'s> {
        /// One chunk's item.
        type Item: Send;
        /// The items, in chunk order (once per run).
        fn lend(&'s mut self) -> Vec<Self::Item>;
    }

    /// The prepared chunks of one run: splits made, views ready.
    pub trait Parts: for<'s> Lend<'s> {
        /// The runtime a task of the run's own starts on.
        fn runtime(&self) -> &Runtime;
        /// Whether [`Parts::finish`] restamps a buffer on the joining task
        /// (which then waits for the chunks' fences on the device).
        fn rejoins(&self) -> bool;
        /// Gives the splits back to their buffers, on `t` (after every
        /// chunk's task returned). Every split is rejoined; the first error
        /// is returned.
        fn finish(self, t: &TaskContext) -> Result<()>;
    }

    /// The task an iterator runs in, if one was given ([`super::InTask`]).
    pub trait TaskOf {
        /// The task, if any.
        fn get(&self) -> Option<&TaskContext>;
    }

    impl TaskOf for () {
        fn get(&self) -> Option<&TaskContext> {
            None
        }
    }

    impl TaskOf for &TaskContext {
        fn get(&self) -> Option<&TaskContext> {
            Some(self)
        }
    }

    /// A zip's: the first side's task, else the second's.
    impl<A: TaskOf, B: TaskOf> TaskOf for (A, B) {
        fn get(&self) -> Option<&TaskContext> {
            self.0.get().or_else(|| self.1.get())
        }
    }
}

use sealed::{Lend, Parts, TaskOf};

/// A parallel iterator over chunks of device buffers: [`ParChunks`],
/// [`ParChunksMut`], and the adaptors over them ([`Zip`], [`Enumerate`],
/// [`InTask`]). Sealed; its methods are the types' own (no import needed).
pub trait ChunkIterator: sealed::Sealed + Sized {
    /// The prepared chunks of a run.
    #[doc(hidden)]
    type Parts: sealed::Parts;
    /// The task the run's scope belongs to, if one was given.
    #[doc(hidden)]
    type Task: sealed::TaskOf;
    /// The number of chunks, checking the chunk sizes (zero:
    /// [`Error::ZeroChunk`]) and a zip's sides (unequal:
    /// [`Error::LengthMismatch`]) without splitting anything.
    #[doc(hidden)]
    fn chunks(&self) -> Result<usize>;
    /// Splits the buffers (after [`ChunkIterator::chunks`]' checks).
    #[doc(hidden)]
    fn prepare(self) -> Result<(Self::Parts, Self::Task)>;
}

/// The item a [`ChunkIterator`] `I` hands each chunk's closure, for a run
/// whose chunks live for `'s`: a [`View`] ([`par_chunks`]), a [`ViewMut`]
/// ([`par_chunks_mut`]), a pair ([`Zip`]) or an index and an item
/// ([`Enumerate`]).
pub type Item<'s, I> = <<I as ChunkIterator>::Parts as sealed::Lend<'s>>::Item;

/// Runs `f` on every chunk of `src`, each as a task of a scope on `src`'s
/// task (or a task of its own), rejoins the splits, and hands the values,
/// in chunk order, to `then` on that task.
///
/// Errors: the first chunk's (in chunk order) error, returned after every
/// chunk's task returned and its GPU work finished; else the scope's error
/// (a runtime error), else the rejoin's. A chunk's panic is re-raised after
/// every chunk's task returned and the splits were rejoined.
fn drive<I, R, F, X>(
    src: I,
    f: F,
    then: impl FnOnce(&TaskContext, Vec<R>) -> Result<X>,
) -> Result<X>
where
    I: ChunkIterator,
    R: Send,
    F: for<'s> Fn(&Scope<'_, '_>, Item<'s, I>) -> Result<R> + Send + Sync,
{
    let (mut parts, task) = src.prepare()?;
    let own;
    let ctx = match task.get() {
        Some(t) => t,
        None => {
            own = parts.runtime().begin_task()?;
            &own
        }
    };
    // A task of the run's own that restamps nothing needs not wait for the
    // chunks (later users of their buffers are ordered by the stamps); a
    // given task goes on after the call, so it is ordered after them.
    let join = if task.get().is_some() || parts.rejoins() {
        Join::Always
    } else {
        Join::IfSubmitted
    };
    let items = parts.lend();
    let mut slots: Vec<Option<Result<R>>> = items.iter().map(|_| None).collect();
    let f = &f;
    let ran = catch_unwind(AssertUnwindSafe(|| {
        run_scope(
            ctx,
            |s| {
                for (item, slot) in items.into_iter().zip(slots.iter_mut()) {
                    s.spawn(move |t| {
                        let r = f(t, item);
                        // The scope sees the failure too: it then waits on
                        // the host for every chunk's GPU work.
                        let failed = r.as_ref().err().cloned();
                        *slot = Some(r);
                        failed.map_or(Ok(()), Err)
                    });
                }
                Ok(())
            },
            join,
        )
    }));
    let rejoined = parts.finish(ctx);
    let ran = match ran {
        Ok(r) => r,
        Err(p) => resume_unwind(p),
    };
    let chunks = slots.len();
    let mut values = Vec::with_capacity(chunks);
    let mut first = None;
    for slot in slots {
        match slot {
            Some(Ok(v)) => values.push(v),
            Some(Err(e)) => {
                first.get_or_insert(e);
            }
            None => {}
        }
    }
    if let Some(e) = first {
        return Err(e);
    }
    ran?;
    rejoined?;
    if values.len() != chunks {
        // A chunk's task never ran its closure (the scope then failed).
        return Err(Error::TaskPanicked);
    }
    then(ctx, values)
}

/// The chunks of `buf`, `chunk` elements each (the last may be shorter), as
/// read-only [`View`]s: `par_chunks(&buf, n)` is Rayon's
/// `buf.par_chunks(n)`.
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let x = gpu::Buffer::from_host(&[2.0f32; 1000])?;
/// // A task a chunk, each a device reduction; the sums added in chunk order.
/// let total: f32 = gpu::par_chunks(&x, 256)
///     .map(|t, chunk| gpu_kernels::reduce::sum(t, &chunk))
///     .sum()?;
/// assert_eq!(total, 2000.0);
/// # Ok(()) }
/// ```
///
/// A chunk size of 0 is [`Error::ZeroChunk`] when the iterator runs.
pub fn par_chunks<T: DeviceRepr>(buf: &Buffer<T>, chunk: usize) -> ParChunks<'_, T> {
    ParChunks { buf, chunk }
}

/// The chunks of `buf`, `chunk` elements each (the last may be shorter), as
/// [`ViewMut`]s with stamps of their own (X3): `par_chunks_mut(&mut buf,
/// n)` is Rayon's `buf.par_chunks_mut(n)`. Once the chunks' tasks returned,
/// the buffer is restamped on the joining task's stream.
///
/// A chunk size of 0 is [`Error::ZeroChunk`] when the iterator runs.
pub fn par_chunks_mut<T: DeviceRepr>(buf: &mut Buffer<T>, chunk: usize) -> ParChunksMut<'_, T> {
    ParChunksMut { buf, chunk }
}

fn count(len: usize, chunk: usize) -> Result<usize> {
    if chunk == 0 {
        return Err(Error::ZeroChunk);
    }
    Ok(len.div_ceil(chunk))
}

/// Read-only chunks of a buffer ([`par_chunks`]), one task per chunk.
#[derive(Debug)]
pub struct ParChunks<'a, T: DeviceRepr> {
    buf: &'a Buffer<T>,
    chunk: usize,
}

/// [`ParChunks`]' prepared views.
#[doc(hidden)]
#[derive(Debug)]
pub struct ReadParts<'a, T: DeviceRepr> {
    rt: &'a Runtime,
    views: Vec<View<'a, T>>,
}

impl<'s, 'a, T: DeviceRepr> Lend<'s> for ReadParts<'a, T> {
    type Item = View<'a, T>;
    fn lend(&'s mut self) -> Vec<View<'a, T>> {
        std::mem::take(&mut self.views)
    }
}

impl<T: DeviceRepr> Parts for ReadParts<'_, T> {
    fn runtime(&self) -> &Runtime {
        self.rt
    }
    fn rejoins(&self) -> bool {
        false
    }
    fn finish(self, _t: &TaskContext) -> Result<()> {
        Ok(())
    }
}

impl<'a, T: DeviceRepr> ChunkIterator for ParChunks<'a, T> {
    type Parts = ReadParts<'a, T>;
    type Task = ();
    fn chunks(&self) -> Result<usize> {
        count(self.buf.len(), self.chunk)
    }
    fn prepare(self) -> Result<(ReadParts<'a, T>, ())> {
        let (n, len) = (self.chunks()?, self.buf.len());
        let views = (0..n)
            .map(|i| {
                let start = i * self.chunk;
                self.buf.slice(start..start + self.chunk.min(len - start))
            })
            .collect::<Result<_>>()?;
        let rt = self.buf.runtime();
        Ok((ReadParts { rt, views }, ()))
    }
}

/// Disjoint mutable chunks of a buffer ([`par_chunks_mut`]), one task per
/// chunk.
#[derive(Debug)]
pub struct ParChunksMut<'a, T: DeviceRepr> {
    buf: &'a mut Buffer<T>,
    chunk: usize,
}

/// [`ParChunksMut`]'s split.
#[doc(hidden)]
#[derive(Debug)]
pub struct MutParts<'a, T: DeviceRepr> {
    rt: Runtime,
    split: Split<'a, T>,
}

impl<'s, T: DeviceRepr> Lend<'s> for MutParts<'_, T> {
    type Item = ViewMut<'s, T>;
    fn lend(&'s mut self) -> Vec<ViewMut<'s, T>> {
        self.split.views()
    }
}

impl<T: DeviceRepr> Parts for MutParts<'_, T> {
    fn runtime(&self) -> &Runtime {
        &self.rt
    }
    fn rejoins(&self) -> bool {
        true
    }
    fn finish(self, t: &TaskContext) -> Result<()> {
        t.rejoin(self.split)
    }
}

impl<'a, T: DeviceRepr> ChunkIterator for ParChunksMut<'a, T> {
    type Parts = MutParts<'a, T>;
    type Task = ();
    fn chunks(&self) -> Result<usize> {
        count(self.buf.len(), self.chunk)
    }
    fn prepare(self) -> Result<(MutParts<'a, T>, ())> {
        self.chunks()?;
        let rt = self.buf.runtime().clone();
        let buf = self.buf;
        let split = buf.split_chunks(self.chunk)?;
        Ok((MutParts { rt, split }, ()))
    }
}

/// Chunk `i` of one iterator with chunk `i` of another
/// ([`ParChunks::zip`]): items are pairs.
#[derive(Debug)]
pub struct Zip<A, B> {
    a: A,
    b: B,
}

/// [`Zip`]'s two sides' parts.
#[doc(hidden)]
#[derive(Debug)]
pub struct ZipParts<A, B>(A, B);

impl<'s, A: Parts, B: Parts> Lend<'s> for ZipParts<A, B> {
    type Item = (<A as Lend<'s>>::Item, <B as Lend<'s>>::Item);
    fn lend(&'s mut self) -> Vec<Self::Item> {
        self.0.lend().into_iter().zip(self.1.lend()).collect()
    }
}

impl<A: Parts, B: Parts> Parts for ZipParts<A, B> {
    fn runtime(&self) -> &Runtime {
        self.0.runtime()
    }
    fn rejoins(&self) -> bool {
        self.0.rejoins() || self.1.rejoins()
    }
    fn finish(self, t: &TaskContext) -> Result<()> {
        let a = self.0.finish(t);
        let b = self.1.finish(t);
        a.and(b)
    }
}

impl<A: ChunkIterator, B: ChunkIterator> ChunkIterator for Zip<A, B> {
    type Parts = ZipParts<A::Parts, B::Parts>;
    type Task = (A::Task, B::Task);
    fn chunks(&self) -> Result<usize> {
        let (a, b) = (self.a.chunks()?, self.b.chunks()?);
        if a != b {
            return Err(Error::LengthMismatch {
                what: "zip's second side (its number of chunks)",
                expected: a,
                got: b,
            });
        }
        Ok(a)
    }
    fn prepare(self) -> Result<(Self::Parts, Self::Task)> {
        // Both sides' checks before either splits: a failed zip leaves
        // every buffer's stamps as they were.
        self.chunks()?;
        let (pa, ta) = self.a.prepare()?;
        let (pb, tb) = self.b.prepare()?;
        Ok((ZipParts(pa, pb), (ta, tb)))
    }
}

/// Each item with its chunk's index ([`ParChunks::enumerate`]).
#[derive(Debug)]
pub struct Enumerate<I> {
    inner: I,
}

/// [`Enumerate`]'s inner parts.
#[doc(hidden)]
#[derive(Debug)]
pub struct EnumerateParts<P>(P);

impl<'s, P: Parts> Lend<'s> for EnumerateParts<P> {
    type Item = (usize, <P as Lend<'s>>::Item);
    fn lend(&'s mut self) -> Vec<Self::Item> {
        self.0.lend().into_iter().enumerate().collect()
    }
}

impl<P: Parts> Parts for EnumerateParts<P> {
    fn runtime(&self) -> &Runtime {
        self.0.runtime()
    }
    fn rejoins(&self) -> bool {
        self.0.rejoins()
    }
    fn finish(self, t: &TaskContext) -> Result<()> {
        self.0.finish(t)
    }
}

impl<I: ChunkIterator> ChunkIterator for Enumerate<I> {
    type Parts = EnumerateParts<I::Parts>;
    type Task = I::Task;
    fn chunks(&self) -> Result<usize> {
        self.inner.chunks()
    }
    fn prepare(self) -> Result<(Self::Parts, I::Task)> {
        let (p, t) = self.inner.prepare()?;
        Ok((EnumerateParts(p), t))
    }
}

/// An iterator whose chunks run as the tasks of a scope on a given task
/// ([`ParChunks::in_task`], [`Scope::par_chunks`]): they are ordered after
/// that task's work so far, and it after them, as a nested scope's tasks
/// are. Without it, a run is a task of its own.
#[derive(Debug)]
pub struct InTask<'r, I> {
    inner: I,
    task: &'r TaskContext,
}

impl<'r, I: ChunkIterator> ChunkIterator for InTask<'r, I> {
    type Parts = I::Parts;
    type Task = &'r TaskContext;
    fn chunks(&self) -> Result<usize> {
        self.inner.chunks()
    }
    fn prepare(self) -> Result<(I::Parts, &'r TaskContext)> {
        Ok((self.inner.prepare()?.0, self.task))
    }
}

impl<T: DeviceRepr> sealed::Sealed for ParChunks<'_, T> {}
impl<T: DeviceRepr> sealed::Sealed for ParChunksMut<'_, T> {}
impl<A, B> sealed::Sealed for Zip<A, B> {}
impl<I> sealed::Sealed for Enumerate<I> {}
impl<I> sealed::Sealed for InTask<'_, I> {}

/// The adaptors every chunk iterator has, as its own methods.
macro_rules! adaptors {
    (impl[$($g:tt)*] $ty:ty) => {
        impl<$($g)*> $ty {
            /// Pairs chunk `i` of this iterator with chunk `i` of `other`
            /// (Rayon's `zip_eq`): a read side and a written side, two read
            /// sides, two written ones (of different buffers). Their chunk
            /// sizes may differ; their numbers of chunks must not.
            ///
            /// Running it checks that first, before anything is split:
            /// [`Error::LengthMismatch`] otherwise.
            pub fn zip<Other: ChunkIterator>(self, other: Other) -> Zip<Self, Other> {
                Zip { a: self, b: other }
            }

            /// Each item with its chunk's index, from 0 in buffer order.
            pub fn enumerate(self) -> Enumerate<Self> {
                Enumerate { inner: self }
            }

            /// Maps each chunk to a host value: `f` runs once per chunk, in
            /// the chunk's task (its first argument). The values are
            /// combined on the host, in chunk order, by the [`Map`]'s
            /// terminal method (`collect`, `sum`, `reduce`, `min`, `max`,
            /// `collect_into`, `for_each`).
            pub fn map<R, F>(self, f: F) -> Map<Self, F>
            where
                R: Send,
                F: for<'s> Fn(&Scope<'_, '_>, Item<'s, Self>) -> Result<R> + Send + Sync,
            {
                Map { inner: self, f }
            }

            /// Runs the chunks as the tasks of a scope on `task` (a [`Scope`]
            /// dereferences to one): ordered after its work so far, and it
            /// after them. Without it, a run is a task of its own, ordered
            /// with other work through the buffers' stamps only.
            pub fn in_task(self, task: &TaskContext) -> InTask<'_, Self> {
                InTask { inner: self, task }
            }
        }
    };
}

/// `for_each` over items by value.
macro_rules! for_each {
    (impl[$($g:tt)*] $ty:ty) => {
        impl<$($g)*> $ty {
            /// Runs `f` on each chunk, each in a task of its own (its first
            /// argument). Sibling chunks never wait for each other; when it
            /// returns, written chunks are rejoined to their buffers.
            ///
            /// # Errors
            ///
            /// [`Error::ZeroChunk`] for a chunk size of 0, a zip's
            /// [`Error::LengthMismatch`] (no task runs then); the error of
            /// the first chunk (in chunk order) that failed, returned once
            /// every chunk's task returned and its GPU work finished.
            ///
            /// # Panics
            ///
            /// Re-raises a chunk's panic once every chunk's task returned.
            pub fn for_each<F>(self, f: F) -> Result<()>
            where
                F: for<'s> Fn(&Scope<'_, '_>, Item<'s, Self>) -> Result<()> + Send + Sync,
            {
                drive(self, f, |_, _| Ok(()))
            }
        }
    };
}

adaptors!(impl['a, T: DeviceRepr] ParChunks<'a, T>);
adaptors!(impl['a, T: DeviceRepr] ParChunksMut<'a, T>);
adaptors!(impl[A: ChunkIterator, B: ChunkIterator] Zip<A, B>);
adaptors!(impl[I: ChunkIterator] Enumerate<I>);
adaptors!(impl['r, I: ChunkIterator] InTask<'r, I>);
for_each!(impl['a, T: DeviceRepr] ParChunks<'a, T>);
for_each!(impl[A: ChunkIterator, B: ChunkIterator] Zip<A, B>);
for_each!(impl[I: ChunkIterator] Enumerate<I>);
for_each!(impl['r, I: ChunkIterator] InTask<'r, I>);

impl<T: DeviceRepr> ParChunksMut<'_, T> {
    /// Runs `f` on each chunk, each as a task with its own stream. The
    /// chunks are views with their own stamps: siblings never wait for each
    /// other; afterwards the buffer is restamped on the joining stream.
    /// (Here, alone, the chunk is `&mut ViewMut`; after an adaptor, items
    /// are by value: `|t, (i, mut chunk)|`.)
    ///
    /// A chunk view cannot escape its task:
    ///
    /// ```compile_fail
    /// let mut b = gpu::Buffer::<f32>::zeros(8).unwrap();
    /// let kept = std::sync::Mutex::new(Vec::new());
    /// gpu::par_chunks_mut(&mut b, 4).for_each(|_t, chunk| {
    ///     kept.lock().unwrap().push(chunk); // error: borrowed data escapes
    ///     Ok(())
    /// }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ZeroChunk`] for a zero chunk size; the error of the first
    /// chunk (in chunk order) that failed, once every chunk's task returned.
    ///
    /// # Panics
    ///
    /// Re-raises a chunk's panic once every chunk's task returned.
    pub fn for_each<F>(self, f: F) -> Result<()>
    where
        F: Fn(&Scope<'_, '_>, &mut ViewMut<'_, T>) -> Result<()> + Send + Sync,
    {
        drive(self, move |t, mut v| f(t, &mut v), |_, _| Ok(()))
    }
}

/// Chunks mapped to host values ([`ParChunks::map`]); its methods run it.
pub struct Map<I, F> {
    inner: I,
    f: F,
}

impl<I: std::fmt::Debug, F> std::fmt::Debug for Map<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map").field("inner", &self.inner).finish()
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
/// [`ParChunks::for_each`]'s) and returns the same errors: a chunk size of
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
        drive(self.inner, self.f, then)
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
        drive(self.inner, move |t, item| f(t, item).map(&g), |_, _| Ok(()))
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
        let n = self.inner.chunks()?;
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

impl Scope<'_, '_> {
    /// [`par_chunks`] from inside a task: the chunks' tasks are ordered
    /// after this task's work so far, and this task after them
    /// ([`ParChunks::in_task`]).
    pub fn par_chunks<'a, T: DeviceRepr>(
        &self,
        buf: &'a Buffer<T>,
        chunk: usize,
    ) -> InTask<'_, ParChunks<'a, T>> {
        par_chunks(buf, chunk).in_task(self)
    }

    /// [`par_chunks_mut`] from inside a task: the chunks' tasks are ordered
    /// after this task's work so far, and this task after them. (For its
    /// adaptors, `gpu::par_chunks_mut(buf, n).in_task(s)`.)
    ///
    /// # Errors
    ///
    /// As [`ParChunksMut::for_each`].
    pub fn par_chunks_mut<T, F>(&self, buf: &mut Buffer<T>, chunk: usize, f: F) -> Result<()>
    where
        T: DeviceRepr,
        F: Fn(&Scope<'_, '_>, &mut ViewMut<'_, T>) -> Result<()> + Send + Sync,
    {
        par_chunks_mut(buf, chunk)
            .in_task(self)
            .for_each(move |t, mut v| f(t, &mut v))
    }
}
