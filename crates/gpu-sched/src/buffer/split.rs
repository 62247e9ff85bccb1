//! A buffer or mutable view split into disjoint views (X3): the views'
//! stamps, kept by the split, go back to the parent at its rejoin
//! (`TaskContext::rejoin`) or its drop.

use super::{BufferStamps, DeviceRepr, Runtime, ViewMut, WHOLE};
use std::marker::PhantomData;

/// How a [`Split`] cuts its parent.
#[derive(Clone, Copy, Debug)]
pub(super) enum Layout {
    /// Chunks of this many elements (at least 1), the last maybe shorter.
    Chunks(usize),
    /// Two views, `..mid` and `mid..` (`mid <= len`).
    At(usize),
}

impl Layout {
    /// The number of views of a parent of `len` elements.
    fn count(self, len: usize) -> usize {
        match self {
            Layout::Chunks(c) => len.div_ceil(c),
            Layout::At(_) => 2,
        }
    }

    /// View `i`'s range, `(start, end)`, in a parent of `len` elements
    /// (`i < self.count(len)`).
    fn range(self, i: usize, len: usize) -> (usize, usize) {
        match self {
            Layout::Chunks(c) => {
                let start = i * c;
                (start, start + c.min(len - start))
            }
            Layout::At(mid) if i == 0 => (0, mid),
            Layout::At(mid) => (mid, len),
        }
    }
}

/// A buffer (or a mutable view) split into disjoint views
/// ([`Buffer::split_chunks`](super::Buffer::split_chunks),
/// [`Buffer::split_at_mut`](super::Buffer::split_at_mut),
/// [`ViewMut::split_at_mut`]): hands out the views ([`Split::views`]) and
/// keeps their stamps, so that
/// [`TaskContext::rejoin`](crate::TaskContext::rejoin) sees every view's
/// uses, even those of views that were leaked. Dropped without a rejoin,
/// it gives the parent its views' uses, each of its own part (X3): the
/// parent's next use waits for the views' work it overlaps, as after
/// a rejoin (without the rejoin's restamp on one stream). A split that is
/// leaked (`mem::forget`) leaves the parent's uses unknown: its next use
/// waits for every stream.
pub struct Split<'a, T: DeviceRepr> {
    rt: &'a Runtime,
    /// The split parent's stamps (forgotten until the rejoin or the drop).
    parent: &'a mut BufferStamps,
    /// The parent's range in its stamps ([`WHOLE`] where they are its
    /// own), and its uses when it was split.
    before: ((usize, usize), gpu_epoch::Uses),
    /// Set by a rejoin, which restamped the parent: the drop leaves it.
    rejoined: bool,
    ptr: u64,
    len: usize,
    /// The parent's first element's index in its buffer.
    offset: usize,
    layout: Layout,
    stamps: Vec<BufferStamps>,
    _t: PhantomData<&'a mut [T]>,
}

impl<T: DeviceRepr> std::fmt::Debug for Split<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Split")
            .field("len", &self.len)
            .field("offset", &self.offset)
            .field("layout", &self.layout)
            .field("views", &self.stamps.len())
            .finish()
    }
}

impl<'a, T: DeviceRepr> Split<'a, T> {
    /// Splits the parent `(ptr, len, offset)` whose stamps are `parent`:
    /// each view starts with the parent's uses, and the parent's are
    /// forgotten until a rejoin restamps them.
    pub(super) fn new(
        rt: &'a Runtime,
        (parent, range): (&'a mut BufferStamps, (usize, usize)),
        (ptr, len, offset): (u64, usize, usize),
        layout: Layout,
    ) -> Self {
        let uses = parent.get_mut().clone();
        let stamps = (0..layout.count(len))
            .map(|_| BufferStamps::from_uses(uses.clone()))
            .collect();
        // From here until a rejoin restamps it, the parent's uses are those
        // of views that may be anywhere (DESIGN "Soundness"): a leaked split cannot leave
        // stale stamps behind.
        rt.ledger_rw().forget_uses(parent.get_mut());
        Split {
            rt,
            parent,
            before: (range, uses),
            rejoined: false,
            ptr,
            len,
            offset,
            layout,
            stamps,
            _t: PhantomData,
        }
    }

    /// The number of views.
    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    /// Whether there are no views (an empty buffer split into chunks).
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
        let (ptr, len, offset, layout, rt) =
            (self.ptr, self.len, self.offset, self.layout, self.rt);
        self.stamps
            .iter_mut()
            .enumerate()
            .map(|(index, stamps)| {
                let (start, end) = layout.range(index, len);
                // A view owns its stamps: all of it is all of them.
                let r = WHOLE;
                ViewMut::part(ptr, offset, index, (start, end, r), rt, stamps)
            })
            .collect()
    }

    /// The two views of a split in two ([`Buffer::split_at_mut`](super::Buffer::split_at_mut)); `None`
    /// for a split into another number of views.
    pub fn halves(&mut self) -> Option<(ViewMut<'_, T>, ViewMut<'_, T>)> {
        if self.stamps.len() != 2 {
            return None;
        }
        let mut views = self.views().into_iter();
        Some((views.next()?, views.next()?))
    }

    /// The runtime of the split buffer.
    pub(crate) fn runtime_id(&self) -> u64 {
        self.rt.id()
    }

    /// The parent's stamps and the views' stamps, for a rejoin.
    pub(crate) fn parts(&mut self) -> (&mut BufferStamps, &mut [BufferStamps]) {
        (&mut *self.parent, &mut self.stamps)
    }

    /// A rejoin restamped the parent: the drop leaves its stamps as they
    /// are.
    pub(crate) fn mark_rejoined(&mut self) {
        self.rejoined = true;
    }
}

impl<T: DeviceRepr> Drop for Split<'_, T> {
    /// Without a rejoin: the parent's uses become its views' (see
    /// [`Split`]; `Ledger::merge_views`). Each view's range in the
    /// parent's stamps is its elements' indices in the buffer (the
    /// coordinates every stamp of the buffer uses); where the parent's
    /// range is the whole of its stamps, the first view's reaches down to
    /// 0 and the last one's up to the end, so the views cover it.
    fn drop(&mut self) {
        if self.rejoined {
            return;
        }
        // The split ends here: its copy of the parent's uses is taken.
        let (range, before) = std::mem::take(&mut self.before);
        let (whole, n) = (range == WHOLE, self.stamps.len());
        let (layout, len, offset) = (self.layout, self.len, self.offset);
        let views: Vec<(std::ops::Range<usize>, &gpu_epoch::Uses)> = self
            .stamps
            .iter_mut()
            .enumerate()
            .map(|(i, s)| {
                let (start, end) = layout.range(i, len);
                let lo = if whole && i == 0 { 0 } else { offset + start };
                let hi = if whole && i + 1 == n {
                    usize::MAX
                } else {
                    offset + end
                };
                (lo..hi, &*s.get_mut())
            })
            .collect();
        self.rt
            .ledger_rw()
            .merge_views(self.parent.get_mut(), &before, &views);
    }
}
