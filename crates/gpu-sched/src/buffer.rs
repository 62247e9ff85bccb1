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
///
/// The runtime trusts a slice's address, length and stamps, so the trait is
/// sealed (§8): only this crate's types implement it.
///
/// Nor can safe code reach a slice's stamps, to reset them:
///
/// ```compile_fail
/// let mut b = gpu_sched::Buffer::<f32>::zeros(4).unwrap();
/// *gpu_sched::DeviceSlice::stamps_mut(&mut b) = Default::default(); // error: no such method
/// ```
///
/// ```compile_fail
/// struct Fake;
/// impl gpu_sched::DeviceSlice<f32> for Fake { // error: `Tracked` is private
///     fn device_ptr(&self) -> u64 { 0x1000 }
///     fn len(&self) -> usize { 1 << 40 }
/// }
/// ```
pub trait DeviceSlice<T: DeviceRepr>: sealed::Tracked {
    /// The device address of the first element.
    fn device_ptr(&self) -> u64;
    /// The number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes.
    fn bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }
}

pub(crate) mod sealed {
    use gpu_epoch::BufferStamps;

    /// What the runtime keeps of a tracked slice; out of reach of other
    /// crates, so no safe code outside can forge or reset stamps.
    pub trait Tracked {
        /// The stamps.
        fn stamps(&self) -> &BufferStamps;
        /// The stamps, exclusively.
        fn stamps_mut(&mut self) -> &mut BufferStamps;
        /// The id of the runtime that owns the memory.
        fn runtime_id(&self) -> u64;
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
        }
        impl<T: DeviceRepr> sealed::Tracked for $ty {
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

    /// Splits the buffer into chunks of `chunk` elements (the last may be
    /// shorter): a [`Split`] that hands out disjoint views, each starting
    /// with the buffer's uses and stamped on its own from then on (X3).
    ///
    /// Give the split back to [`TaskContext::rejoin`](crate::TaskContext::rejoin)
    /// once the views' work is done: the buffer is then restamped on the
    /// joining stream, after waiting for each view's work as needed. A split
    /// dropped (or leaked) without a rejoin leaves the buffer's uses
    /// unknown: its next use waits for everything every stream queued, so
    /// it is never unordered with the views' work, only slower.
    ///
    /// # Errors
    ///
    /// [`crate::Error::ZeroChunk`] if `chunk` is 0.
    pub fn split_chunks(&mut self, chunk: usize) -> Result<Split<'_, T>> {
        if chunk == 0 {
            return Err(crate::Error::ZeroChunk);
        }
        let uses = self.stamps.get_mut().clone();
        let stamps = (0..self.len.div_ceil(chunk))
            .map(|_| BufferStamps::from_uses(uses.clone()))
            .collect();
        // From here until a rejoin restamps it, the buffer's uses are those
        // of views that may be anywhere (§8): a leaked split cannot leave
        // stale stamps behind.
        self.rt.inner.ledger.forget_uses(self.stamps.get_mut());
        Ok(Split {
            buf: self,
            chunk,
            stamps,
        })
    }
}

impl_device_slice!(Buffer<T>, |b| b.rt.id());

impl<T: DeviceRepr> Drop for Buffer<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: `ptr` came from `TaskContext::alloc` of `rt` with
        // `device_bytes` of these bytes (the only constructor) and is freed
        // once, here; every tracked operation on the buffer stamped
        // `stamps` (a split forgot them: unknown uses wait for every
        // stream); nothing can use the buffer after its drop.
        unsafe { self.rt.free_ordered(self.ptr, bytes, self.stamps.get_mut()) };
    }
}

/// A buffer split into chunks ([`Buffer::split_chunks`]): hands out the
/// chunks' views ([`Split::views`]) and keeps their stamps, so that
/// [`TaskContext::rejoin`](crate::TaskContext::rejoin) sees every view's
/// uses, even those of views that were leaked.
pub struct Split<'a, T: DeviceRepr> {
    buf: &'a mut Buffer<T>,
    chunk: usize,
    stamps: Vec<BufferStamps>,
}

impl<T: DeviceRepr> std::fmt::Debug for Split<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Split")
            .field("len", &self.buf.len)
            .field("chunk", &self.chunk)
            .field("views", &self.stamps.len())
            .finish()
    }
}

impl<'a, T: DeviceRepr> Split<'a, T> {
    /// The number of views.
    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    /// Whether there are no views (an empty buffer).
    pub fn is_empty(&self) -> bool {
        self.stamps.is_empty()
    }

    /// The views, in order: disjoint, each with its own stamps. They borrow
    /// the split, so it cannot be rejoined while one is alive:
    ///
    /// ```compile_fail
    /// # fn f(t: &gpu_sched::TaskContext, b: &mut gpu_sched::Buffer<f32>) -> gpu_sched::Result<()> {
    /// let mut split = b.split_chunks(4)?;
    /// let views = split.views();
    /// t.rejoin(split)?; // error: `split` is borrowed by `views`
    /// drop(views);
    /// # Ok(()) }
    /// ```
    pub fn views(&mut self) -> Vec<ViewMut<'_, T>> {
        let size = std::mem::size_of::<T>() as u64;
        let (ptr, len, chunk, rt_id) = (self.buf.ptr, self.buf.len, self.chunk, self.buf.rt.id());
        self.stamps
            .iter_mut()
            .enumerate()
            .map(|(index, stamps)| {
                let start = index * chunk;
                ViewMut {
                    ptr: ptr + start as u64 * size,
                    len: chunk.min(len - start),
                    offset: start,
                    index,
                    rt_id,
                    stamps,
                    _t: PhantomData,
                }
            })
            .collect()
    }

    /// The runtime of the split buffer.
    pub(crate) fn runtime_id(&self) -> u64 {
        self.buf.rt.id()
    }

    /// The parent's stamps and the views' stamps, for a rejoin.
    pub(crate) fn parts(&mut self) -> (&mut BufferStamps, &mut [BufferStamps]) {
        (&mut self.buf.stamps, &mut self.stamps)
    }
}

/// A disjoint, mutable view of part of a [`Buffer`], with its own stamps
/// (X3), kept by its [`Split`]. Views of one buffer never wait for each
/// other.
pub struct ViewMut<'s, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    offset: usize,
    index: usize,
    rt_id: u64,
    stamps: &'s mut BufferStamps,
    _t: PhantomData<&'s mut [T]>,
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

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The view's uses.
    pub fn uses(&self) -> Uses {
        self.stamps.snapshot()
    }
}

impl_device_slice!(ViewMut<'_, T>, |v| v.rt_id);
