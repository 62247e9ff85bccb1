//! Device buffers and their views, each with its own stamps (X2, X3), and
//! the stream-ordered free (X4).

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use gpu_epoch::{BufferStamps, Uses};
use std::marker::PhantomData;
use std::ops::{Bound, Range, RangeBounds};

mod repr;
mod split;

pub use repr::DeviceRepr;
use split::Layout;
pub use split::Split;

/// Device memory the runtime tracks and may read: a [`Buffer`], a mutable
/// view ([`ViewMut`]) or a read-only one ([`View`]).
///
/// `&impl DeviceSlice` is a read; a write needs [`DeviceSliceMut`] through
/// `&mut` (X2).
///
/// The runtime trusts a slice's address, length and stamps, so the trait is
/// sealed (DESIGN "Soundness"): only this crate's types implement it.
///
/// Nor can safe code reach a slice's stamps, to reset them:
///
/// ```compile_fail
/// let mut b = gpu_sched::Buffer::<f32>::zeros(4).unwrap();
/// *gpu_sched::DeviceSlice::stamps_mut(&mut b) = Default::default(); // error: no such method
/// ```
///
/// ```compile_fail
/// let mut b = gpu_sched::Buffer::<f32>::zeros(4).unwrap();
/// *gpu_sched::DeviceSliceMut::stamps_mut(&mut b) = Default::default(); // error: no such method
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

/// Device memory the runtime tracks and may write: a [`Buffer`] or a
/// [`ViewMut`], never a read-only [`View`]. `&mut impl DeviceSliceMut` is a
/// write (X2). Sealed, as [`DeviceSlice`] is.
///
/// ```compile_fail
/// struct Fake;
/// impl gpu_sched::DeviceSliceMut<f32> for Fake {} // error: `TrackedMut` is private
/// ```
pub trait DeviceSliceMut<T: DeviceRepr>: DeviceSlice<T> + sealed::TrackedMut {}

pub(crate) mod sealed {
    use gpu_epoch::BufferStamps;

    /// What the runtime keeps of a tracked slice; out of reach of other
    /// crates, so no safe code outside can forge or reset stamps.
    pub trait Tracked {
        /// The stamps (a read locks them).
        fn stamps(&self) -> &BufferStamps;
        /// The id of the runtime that owns the memory.
        fn runtime_id(&self) -> u64;
        /// The elements it covers in its stamps' owner (X3):
        /// [`gpu_epoch::WHOLE`] for the owner itself (a buffer, a split's
        /// view), the range in the buffer for a slice of it.
        fn range(&self) -> std::ops::Range<usize>;
    }

    /// A tracked slice that may be written: its stamps, exclusively. A
    /// read-only [`View`](super::View) shares its parent's stamps, so it has
    /// no such access.
    pub trait TrackedMut: Tracked {
        /// The stamps, exclusively.
        fn stamps_mut(&mut self) -> &mut BufferStamps;
    }
}

/// `DeviceSlice` for a type with `ptr`, `len`, `range` and `stamps` fields;
/// `$rt` gives the owning runtime's id. `mut` adds `DeviceSliceMut` (the
/// `stamps` field is then owned or `&mut`).
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
            fn runtime_id(&self) -> u64 {
                let $s = self;
                $rt
            }
            #[inline]
            fn range(&self) -> Range<usize> {
                let (start, end) = self.range;
                start..end
            }
        }
    };
    (mut $ty:ty, |$s:ident| $rt:expr) => {
        impl_device_slice!($ty, |$s| $rt);
        impl<T: DeviceRepr> DeviceSliceMut<T> for $ty {}
        impl<T: DeviceRepr> sealed::TrackedMut for $ty {
            #[inline]
            fn stamps_mut(&mut self) -> &mut BufferStamps {
                &mut self.stamps
            }
        }
    };
}

/// `range` of a slice of `len` elements as `(start, end)`, or
/// [`Error::OutOfRange`] for `what` (no panic, whatever the bounds).
fn checked_range(
    range: impl RangeBounds<usize>,
    len: usize,
    what: &'static str,
) -> Result<(usize, usize)> {
    // Bounds that overflow saturate: the range is then out of bounds anyway
    // (no slice has `usize::MAX` elements), and the error says so.
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    let overflow = matches!(range.start_bound(), Bound::Excluded(&usize::MAX))
        || matches!(range.end_bound(), Bound::Included(&usize::MAX));
    if overflow || start > end || end > len {
        return Err(Error::OutOfRange {
            what,
            start,
            end,
            len,
        });
    }
    Ok((start, end))
}

/// The range in its stamps' owner of `start..end` of a slice that covers
/// `parent` there, has `len` elements and starts at element `offset` of
/// its buffer: the parent's own if it is all of it (so a slice of all of a
/// buffer is the buffer, to the ledger), else `offset + start..offset +
/// end` (ranges are the buffer's element indices, in every stamps).
fn sub_range(
    parent: (usize, usize),
    len: usize,
    offset: usize,
    start: usize,
    end: usize,
) -> (usize, usize) {
    if start == 0 && end == len {
        parent
    } else {
        (offset + start, offset + end)
    }
}

/// [`gpu_epoch::WHOLE`] as `(start, end)`.
pub(crate) const WHOLE: (usize, usize) = (gpu_epoch::WHOLE.start, gpu_epoch::WHOLE.end);

/// A typed allocation in device memory (host memory on the host backend).
///
/// Dropping it never blocks: the memory is freed in stream order once every
/// operation that uses it has finished (X4).
///
/// ```
/// # fn main() -> gpu_sched::Result<()> {
/// let mut b = gpu_sched::Buffer::from_host(&[1.0f32, 2.0, 3.0, 4.0])?;
/// let rt = gpu_sched::Runtime::global()?;
/// let t = rt.begin_task()?;
/// gpu_kernels::add_scalar(&t, &mut b.slice_mut(2..)?, 10.0)?; // a range, stamped on its own
/// assert_eq!(t.to_vec(&b)?, [1.0, 2.0, 13.0, 14.0]);
/// # Ok(()) }
/// ```
pub struct Buffer<T: DeviceRepr> {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    pub(crate) rt: Runtime,
    pub(crate) stamps: BufferStamps,
    /// Always [`WHOLE`]: the buffer owns its stamps.
    pub(crate) range: (usize, usize),
    /// Where the memory goes back at the drop, for an allocation of a
    /// graphed scope (`runtime::GraphMemory`); `None`: freed.
    pub(crate) home: Option<Box<crate::runtime::Home>>,
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

    /// A read-only view of `range` (any range of `usize`: `a..b`, `a..`,
    /// `..=b`, `..`). It shares the buffer's stamps and stamps its range
    /// there (X3): a later write overlapping the range waits for a read
    /// through it, a write of a disjoint range does not, and reads never
    /// wait for each other.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] unless `start <= end <= self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<View<'_, T>> {
        let (start, end) = checked_range(range, self.len, "Buffer::slice")?;
        let r = sub_range(self.range, self.len, 0, start, end);
        Ok(View::part(
            self.ptr,
            0,
            start,
            end,
            r,
            &self.rt,
            &self.stamps,
        ))
    }

    /// A mutable view of `range`: it borrows the buffer's stamps
    /// exclusively (one such view at a time) and stamps its range there
    /// (X3): a task writing it waits only for earlier uses of overlapping
    /// ranges, so tasks writing disjoint ranges one after the other never
    /// wait for each other. For parts that tasks hold at once, split the
    /// buffer ([`Buffer::split_at_mut`], [`Buffer::split_chunks`]).
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] unless `start <= end <= self.len()`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let (start, end) = checked_range(range, self.len, "Buffer::slice_mut")?;
        let r = sub_range(self.range, self.len, 0, start, end);
        Ok(ViewMut::part(
            self.ptr,
            0,
            0,
            (start, end, r),
            &self.rt,
            &mut self.stamps,
        ))
    }

    /// Splits the buffer into chunks of `chunk` elements (the last may be
    /// shorter): a [`Split`] that hands out disjoint views, each starting
    /// with the buffer's uses and stamped on its own from then on (X3).
    ///
    /// Give the split back to [`TaskContext::rejoin`](crate::TaskContext::rejoin)
    /// once the views' work is done: the buffer is then restamped on the
    /// joining stream, after waiting for each view's work as needed. A split
    /// dropped without a rejoin gives the buffer its views' uses, each of
    /// its own part: its next use waits for the views' work it overlaps. A
    /// split leaked (`mem::forget`) leaves the buffer's uses unknown: its
    /// next use waits for everything every stream queued, so it is never
    /// unordered with the views' work, only slower.
    ///
    /// # Errors
    ///
    /// [`crate::Error::ZeroChunk`] if `chunk` is 0.
    pub fn split_chunks(&mut self, chunk: usize) -> Result<Split<'_, T>> {
        if chunk == 0 {
            return Err(Error::ZeroChunk);
        }
        Ok(Split::new(
            &self.rt,
            (&mut self.stamps, self.range),
            (self.ptr, self.len, 0),
            Layout::Chunks(chunk),
        ))
    }

    /// Splits the buffer at `mid` into two views, `..mid` and `mid..`, with
    /// stamps of their own (X3): tasks using one never wait for tasks using
    /// the other. A [`Split`] of two views ([`Split::halves`]), given back
    /// to [`TaskContext::rejoin`](crate::TaskContext::rejoin) as
    /// [`Buffer::split_chunks`]'s is.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] (for the range `0..mid`) if `mid > self.len()`.
    pub fn split_at_mut(&mut self, mid: usize) -> Result<Split<'_, T>> {
        checked_range(..mid, self.len, "Buffer::split_at_mut")?;
        Ok(Split::new(
            &self.rt,
            (&mut self.stamps, self.range),
            (self.ptr, self.len, 0),
            Layout::At(mid),
        ))
    }
}

impl_device_slice!(mut Buffer<T>, |b| b.rt.id());

impl<T: DeviceRepr> Drop for Buffer<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        if let Some(memory) = self
            .home
            .take()
            .and_then(|h| Some((h.memory.upgrade()?, h.key)))
        {
            let uses = std::mem::take(self.stamps.get_mut());
            // SAFETY: `ptr` is a block of that memory's runtime (`rt`) of
            // `device_bytes(bytes)` (`TaskContext::alloc` in a graphed
            // scope), given back once, here, with every use its stamps
            // record (as for a free below); nothing uses it after.
            unsafe { memory.0.give(memory.1, self.ptr, bytes, uses) };
            return;
        }
        // SAFETY: `ptr` came from `TaskContext::alloc` of `rt` with
        // `device_bytes` of these bytes (the only constructor) and is freed
        // once, here; every tracked operation on the buffer stamped
        // `stamps` (a read-only `View` or a `slice_mut` view stamps the
        // buffer's own; a split gives them its views' uses back at its
        // rejoin or drop, and a leaked one leaves them unknown, which wait
        // for every stream); nothing can use the buffer after its drop.
        unsafe { self.rt.free_ordered(self.ptr, bytes, self.stamps.get_mut()) };
    }
}

/// A mutable view of part of a [`Buffer`]: one of a [`Split`]'s disjoint
/// views, with stamps of its own (X3) that the split keeps, so views of one
/// split never wait for each other; or a [`Buffer::slice_mut`] (or
/// [`ViewMut::slice_mut`]), which stamps its range in its parent's.
pub struct ViewMut<'s, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    offset: usize,
    /// The elements it covers in its stamps (see `sealed::Tracked::range`),
    /// as `(start, end)`.
    range: (usize, usize),
    index: usize,
    rt: &'s Runtime,
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

impl<'s, T: DeviceRepr> ViewMut<'s, T> {
    /// `start..end` of a parent at `ptr` whose first element is at `offset`
    /// in its buffer, stamping `range` of `stamps`.
    fn part(
        ptr: u64,
        offset: usize,
        index: usize,
        (start, end, range): (usize, usize, (usize, usize)),
        rt: &'s Runtime,
        stamps: &'s mut BufferStamps,
    ) -> Self {
        ViewMut {
            ptr: ptr + (start * std::mem::size_of::<T>()) as u64,
            len: end - start,
            offset: offset + start,
            range,
            index,
            rt,
            stamps,
            _t: PhantomData,
        }
    }

    /// The view's position among its split's views (a `slice_mut` keeps
    /// its parent's; 0 for one of a buffer).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The first element's index in the buffer.
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

    /// A read-only view of `range` of this view (see [`Buffer::slice`]): it
    /// shares this view's stamps.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] unless `start <= end <= self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<View<'_, T>> {
        let (start, end) = checked_range(range, self.len, "ViewMut::slice")?;
        let r = sub_range(self.range, self.len, self.offset, start, end);
        Ok(View::part(
            self.ptr,
            self.offset,
            start,
            end,
            r,
            self.rt,
            self.stamps,
        ))
    }

    /// A mutable view of `range` of this view (see [`Buffer::slice_mut`]):
    /// it borrows this view's stamps exclusively.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] unless `start <= end <= self.len()`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let (start, end) = checked_range(range, self.len, "ViewMut::slice_mut")?;
        let r = sub_range(self.range, self.len, self.offset, start, end);
        Ok(ViewMut::part(
            self.ptr,
            self.offset,
            self.index,
            (start, end, r),
            self.rt,
            self.stamps,
        ))
    }

    /// Splits this view at `mid` into two views with stamps of their own,
    /// as [`Buffer::split_at_mut`] does; rejoining the split restamps this
    /// view.
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] (for the range `0..mid`) if `mid > self.len()`.
    pub fn split_at_mut(&mut self, mid: usize) -> Result<Split<'_, T>> {
        checked_range(..mid, self.len, "ViewMut::split_at_mut")?;
        Ok(Split::new(
            self.rt,
            (self.stamps, self.range),
            (self.ptr, self.len, self.offset),
            Layout::At(mid),
        ))
    }
}

impl_device_slice!(mut ViewMut<'_, T>, |v| v.rt.id());

/// A read-only view of part of a [`Buffer`] ([`Buffer::slice`],
/// [`ViewMut::slice`], [`View::slice`]). It shares its parent's stamps and
/// stamps its range there: a later write to the parent overlapping the
/// range waits for a read through it.
///
/// It is a [`DeviceSlice`] but not a [`DeviceSliceMut`]: nothing can write
/// through it.
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, b: &gpu_sched::Buffer<f32>) -> gpu_sched::Result<()> {
/// let mut v = b.slice(1..3)?;
/// t.memset_zero(&mut v)?; // error: `View` is not `DeviceSliceMut`
/// # Ok(()) }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, a: &gpu_sched::Buffer<f32>, b: &gpu_sched::Buffer<f32>) -> gpu_sched::Result<()> {
/// let mut v = b.slice(..2)?;
/// t.copy(&a.slice(..2)?, &mut v)?; // error: `View` is not `DeviceSliceMut`
/// # Ok(()) }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &gpu_sched::Kernel<(gpu_sched::Out<f32>, u64)>, b: &gpu_sched::Buffer<f32>) -> gpu_sched::Result<()> {
/// let mut v = b.slice(..)?;
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::for_elements(2, 32), (&mut v, 2u64)) }; // error: as above
/// # Ok(()) }
/// ```
pub struct View<'a, T: DeviceRepr> {
    ptr: u64,
    len: usize,
    offset: usize,
    /// The elements it covers in its stamps (see `sealed::Tracked::range`),
    /// as `(start, end)`.
    range: (usize, usize),
    rt: &'a Runtime,
    stamps: &'a BufferStamps,
    _t: PhantomData<&'a [T]>,
}

impl<T: DeviceRepr> Clone for View<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: DeviceRepr> Copy for View<'_, T> {}

impl<T: DeviceRepr> std::fmt::Debug for View<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl<'a, T: DeviceRepr> View<'a, T> {
    /// `start..end` of a parent at `ptr` whose first element is at `offset`
    /// in its buffer, sharing `stamps`.
    fn part(
        ptr: u64,
        offset: usize,
        start: usize,
        end: usize,
        range: (usize, usize),
        rt: &'a Runtime,
        stamps: &'a BufferStamps,
    ) -> Self {
        View {
            ptr: ptr + (start * std::mem::size_of::<T>()) as u64,
            len: end - start,
            offset: offset + start,
            range,
            rt,
            stamps,
            _t: PhantomData,
        }
    }

    /// The first element's index in the buffer.
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

    /// The uses of the stamps the view shares with its parent.
    pub fn uses(&self) -> Uses {
        self.stamps.snapshot()
    }

    /// A read-only view of `range` of this view, sharing the same stamps
    /// (and borrowing what this view borrows, not this view).
    ///
    /// # Errors
    ///
    /// [`Error::OutOfRange`] unless `start <= end <= self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<View<'a, T>> {
        let (start, end) = checked_range(range, self.len, "View::slice")?;
        let r = sub_range(self.range, self.len, self.offset, start, end);
        Ok(View::part(
            self.ptr,
            self.offset,
            start,
            end,
            r,
            self.rt,
            self.stamps,
        ))
    }
}

impl_device_slice!(View<'_, T>, |v| v.rt.id());
