//! Parallel iterators over the chunks of device buffers, named and shaped
//! like Rayon's (DESIGN "Users' kernels and chunk iterators"): [`par_chunks`] (read), [`par_chunks_mut`] (write),
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
//! Rayon's closures get no task to submit GPU work on (DESIGN "Users' kernels and chunk iterators" says more).
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

mod adaptors;
mod map;

pub use crate::pipeline::{par_map, par_map_on, par_map_pinned, PipelineOptions};
pub use adaptors::{Enumerate, EnumerateParts, InTask, Zip, ZipParts};
pub use map::Map;

use crate::scope::{end_top_level, run_scope, Join, Scope};
use gpu_sched::{Buffer, DeviceRepr, Error, Result, Runtime, Split, TaskContext, View, ViewMut};
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
    let (parts, task) = src.prepare()?;
    match task.get() {
        Some(t) => drive_on::<I, R, F, X>(t, true, parts, f, then),
        None => {
            // A task of the run's own, ended here: the chunks' library
            // results are checked before the terminal returns.
            let own = parts.runtime().begin_task()?;
            let r = drive_on::<I, R, F, X>(&own, false, parts, f, then);
            end_top_level(&own, r)
        }
    }
}

/// [`drive`] on `ctx`: the given task (`given`) or the run's own.
fn drive_on<I, R, F, X>(
    ctx: &TaskContext,
    given: bool,
    mut parts: I::Parts,
    f: F,
    then: impl FnOnce(&TaskContext, Vec<R>) -> Result<X>,
) -> Result<X>
where
    I: ChunkIterator,
    R: Send,
    F: for<'s> Fn(&Scope<'_, '_>, Item<'s, I>) -> Result<R> + Send + Sync,
{
    // A task of the run's own that restamps nothing needs not wait for the
    // chunks (later users of their buffers are ordered by the stamps); a
    // given task goes on after the call, so it is ordered after them.
    let join = if given || parts.rejoins() {
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

impl<T: DeviceRepr> sealed::Sealed for ParChunks<'_, T> {}
impl<T: DeviceRepr> sealed::Sealed for ParChunksMut<'_, T> {}

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
                Enumerate { base: self }
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
                Map { base: self, f }
            }

            /// Runs the chunks as the tasks of a scope on `task` (a [`Scope`]
            /// dereferences to one): ordered after its work so far, and it
            /// after them. Without it, a run is a task of its own, ordered
            /// with other work through the buffers' stamps only.
            pub fn in_task(self, task: &TaskContext) -> InTask<'_, Self> {
                InTask { base: self, task }
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
