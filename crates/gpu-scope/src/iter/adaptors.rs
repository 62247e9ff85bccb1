//! The adaptors over chunk iterators: [`Zip`], [`Enumerate`] and
//! [`InTask`] (made by the iterators' `zip`, `enumerate` and `in_task`).

use super::sealed::{self, Lend, Parts};
use super::ChunkIterator;
use gpu_sched::{Error, Result, Runtime, TaskContext};

/// Chunk `i` of one iterator with chunk `i` of another
/// ([`ParChunks::zip`](super::ParChunks::zip)): items are pairs.
#[derive(Debug)]
pub struct Zip<A, B> {
    pub(super) a: A,
    pub(super) b: B,
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

/// Each item with its chunk's index ([`ParChunks::enumerate`](super::ParChunks::enumerate)).
#[derive(Debug)]
pub struct Enumerate<I> {
    /// The iterator whose items are numbered.
    pub(super) base: I,
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
        self.base.chunks()
    }
    fn prepare(self) -> Result<(Self::Parts, I::Task)> {
        let (p, t) = self.base.prepare()?;
        Ok((EnumerateParts(p), t))
    }
}

/// An iterator whose chunks run as the tasks of a scope on a given task
/// ([`ParChunks::in_task`](super::ParChunks::in_task), [`Scope::par_chunks`](crate::Scope::par_chunks)): they are ordered after
/// that task's work so far, and it after them, as a nested scope's tasks
/// are. Without it, a run is a task of its own.
#[derive(Debug)]
pub struct InTask<'r, I> {
    /// The iterator whose chunks run there.
    pub(super) base: I,
    pub(super) task: &'r TaskContext,
}

impl<'r, I: ChunkIterator> ChunkIterator for InTask<'r, I> {
    type Parts = I::Parts;
    type Task = &'r TaskContext;
    fn chunks(&self) -> Result<usize> {
        self.base.chunks()
    }
    fn prepare(self) -> Result<(I::Parts, &'r TaskContext)> {
        Ok((self.base.prepare()?.0, self.task))
    }
}

impl<A, B> sealed::Sealed for Zip<A, B> {}
impl<I> sealed::Sealed for Enumerate<I> {}
impl<I> sealed::Sealed for InTask<'_, I> {}
