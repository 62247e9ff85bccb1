//! Device buffers and their views, each with its own stamps (X2, X3), and
//! the stream-ordered free (X4).

use crate::error::Result;
use crate::runtime::Runtime;
use gpu_epoch::{BufferStamps, Uses};
use std::marker::PhantomData;

/// Element types that can live in device memory.
///
/// # Safety
///
/// Implementors are plain old data: any bit pattern the device writes is a
/// valid value, with no padding, no pointers and no drop glue.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}

// SAFETY: primitive numbers are plain old data.
unsafe impl DeviceRepr for f32 {}
// SAFETY: as above.
unsafe impl DeviceRepr for f64 {}
// SAFETY: as above.
unsafe impl DeviceRepr for u8 {}
// SAFETY: as above.
unsafe impl DeviceRepr for u32 {}
// SAFETY: as above.
unsafe impl DeviceRepr for i32 {}
// SAFETY: as above.
unsafe impl DeviceRepr for u64 {}
// SAFETY: as above.
unsafe impl DeviceRepr for i64 {}

/// Device memory the runtime tracks: a [`Buffer`] or a view of one.
///
/// `&impl DeviceSlice` is a read, `&mut impl DeviceSlice` a write (X2).
pub trait DeviceSlice<T: DeviceRepr> {
    /// The device address of the first element.
    fn device_ptr(&self) -> u64;
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The stamps.
    fn stamps(&self) -> &BufferStamps;
    /// The stamps, exclusively.
    fn stamps_mut(&mut self) -> &mut BufferStamps;
    /// The id of the runtime that owns the memory.
    fn runtime_id(&self) -> u64;
    /// Bytes.
    fn bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }
}

/// `DeviceSlice` for a type with `ptr`, `len` and `stamps` fields; `$rt`
/// gives the owning runtime's id.
macro_rules! impl_device_slice {
    ($ty:ty, |$s:ident| $rt:expr) => {
        impl<T: DeviceRepr> DeviceSlice<T> for $ty {
            #[inline]
            fn device_ptr(&self) -> u64 {
                self.ptr
            }
            #[inline]
            fn len(&self) -> usize {
                self.len
            }
            #[inline]
            fn stamps(&self) -> &BufferStamps {
                &self.stamps
            }
            #[inline]
            fn stamps_mut(&mut self) -> &mut BufferStamps {
                &mut self.stamps
            }
            #[inline]
            fn runtime_id(&self) -> u64 {
                let $s = self;
                $rt
            }
        }
    };
}

/// A typed allocation in device memory (host memory on the host backend).
///
/// Dropping it never blocks: the memory is freed in stream order once every
/// operation that uses it has finished (X4).
pub struct Buffer<T: DeviceRepr> {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    pub(crate) rt: Runtime,
    pub(crate) stamps: BufferStamps,
    pub(crate) _t: PhantomData<T>,
}

impl<T: DeviceRepr> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T: DeviceRepr> Buffer<T> {
    /// A device copy of `src` on the global runtime, made by a one-off task.
    ///
    /// # Errors
    ///
    /// Out of memory; driver errors.
    pub fn from_host(src: &[T]) -> Result<Self> {
        Runtime::global()?.begin_task()?.from_host(src)
    }

    /// `len` zeros on the global runtime, made by a one-off task.
    ///
    /// # Errors
    ///
    /// Out of memory; driver errors.
    pub fn zeros(len: usize) -> Result<Self> {
        Runtime::global()?.begin_task()?.zeros(len)
    }

    /// A host copy, made by a one-off task (waits for the copy).
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn to_vec(&self) -> Result<Vec<T>>
    where
        T: Default,
    {
        self.rt.begin_task()?.to_vec(self)
    }

    /// The runtime the buffer lives in.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of the buffer's uses (for tests and diagnostics).
    pub fn uses(&self) -> Uses {
        self.stamps.snapshot()
    }

    /// Splits the buffer into views of `chunk` elements (the last may be
    /// shorter), each starting with the buffer's uses and stamped on its
    /// own from then on (X3), and a [`Rejoin`] to restamp the buffer once
    /// the views' work is ordered before the joining stream.
    ///
    /// # Errors
    ///
    /// [`crate::Error::ZeroChunk`] if `chunk` is 0.
    pub fn split_chunks(&mut self, chunk: usize) -> Result<(Rejoin<'_>, Vec<ViewMut<'_, T>>)> {
        if chunk == 0 {
            return Err(crate::Error::ZeroChunk);
        }
        let uses = self.stamps.get_mut().clone();
        let size = std::mem::size_of::<T>() as u64;
        let views = (0..self.len)
            .step_by(chunk)
            .enumerate()
            .map(|(index, start)| ViewMut {
                ptr: self.ptr + start as u64 * size,
                len: chunk.min(self.len - start),
                offset: start,
                index,
                rt_id: self.rt.id(),
                stamps: BufferStamps::from_uses(uses.clone()),
                _t: PhantomData,
            })
            .collect();
        Ok((
            Rejoin {
                stamps: &mut self.stamps,
            },
            views,
        ))
    }
}

impl_device_slice!(Buffer<T>, |b| b.rt.id());

impl<T: DeviceRepr> Drop for Buffer<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        self.rt.free_ordered(self.ptr, bytes, self.stamps.get_mut());
    }
}

/// A disjoint, mutable view of part of a [`Buffer`], with its own stamps
/// (X3). Views of one buffer never wait for each other.
pub struct ViewMut<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    offset: usize,
    index: usize,
    rt_id: u64,
    stamps: BufferStamps,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: DeviceRepr> std::fmt::Debug for ViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewMut")
            .field("index", &self.index)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl<T: DeviceRepr> ViewMut<'_, T> {
    /// The view's position among its siblings.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The first element's index in the parent buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The view's uses.
    pub fn uses(&self) -> Uses {
        self.stamps.snapshot()
    }
}

impl_device_slice!(ViewMut<'_, T>, |v| v.rt_id);

/// The parent buffer's stamps while its views are out: give the views back
/// to [`TaskContext::rejoin`](crate::TaskContext::rejoin) after their work.
pub struct Rejoin<'a> {
    pub(crate) stamps: &'a mut BufferStamps,
}

impl std::fmt::Debug for Rejoin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rejoin").finish_non_exhaustive()
    }
}
