//! A task's handle on its stream, and the tracked operations (R1, R9-R11).

use crate::buffer::{Buffer, DeviceRepr, DeviceSlice, DeviceSliceMut, Split};
use crate::capture::{CaptureHandle, ScopeCapture};
use crate::driver::{MemAccess, Nodes, RawStream};
use crate::error::{Error, Result};
use crate::handoff::{device_bytes, wait_streams};
use crate::pool::Tail;
use crate::runtime::Runtime;
use gpu_epoch::{Access, Binding, Decision, StreamId, Task, Uses};
use std::marker::PhantomData;

/// A running task's handle on its stream: every tracked operation goes
/// through one. It owns its stream (R3) for as long as it lives; dropping it
/// (or [`TaskContext::finish`]) ends the task and gives the stream back to
/// the pool, to be recycled once idle (R13).
///
/// A context is `Send` but not `Sync`: one thread submits a task's work, in
/// program order.
///
/// ```
/// # fn main() -> gpu_sched::Result<()> {
/// let rt = gpu_sched::Runtime::global()?;
/// let t = rt.begin_task()?; // no stream yet: bound at the first operation
/// let mut a = t.zeros::<f32>(256)?;
/// gpu_kernels::fill(&t, &mut a, 3.0)?;
/// assert!(t.to_vec(&a)?.iter().all(|&x| x == 3.0)); // waits for the fill
/// t.finish(); // the stream goes back to the pool
/// # Ok(()) }
/// ```
pub struct TaskContext {
    pub(crate) rt: Runtime,
    /// The ledger's task, made when first needed (its stream's binding):
    /// a task that never submits costs the ledger nothing.
    pub(crate) task: std::cell::OnceCell<Task>,
    /// The task's stream, once it has one: bound at the first operation
    /// that needs it (§9), so a task that never submits GPU work holds none.
    pub(crate) slot: std::cell::Cell<Option<(StreamId, RawStream)>>,
    /// Fences the task is ordered after (its spawn's, its joined tasks'),
    /// waited for on the device when it binds its stream: a task that never
    /// submits never waits.
    pub(crate) after: std::cell::RefCell<smallvec::SmallVec<[crate::fence::Fence; 1]>>,
    /// While capturing: the memory the captured operations touch (R12).
    pub(crate) capture_log: std::cell::RefCell<Option<Vec<MemAccess>>>,
    /// The scope capture this task joined, or began (`crate::capture`).
    pub(crate) capture: std::cell::RefCell<Option<std::sync::Arc<ScopeCapture>>>,
    /// In a scope capture: the graph nodes of the task's last operation and
    /// of the fences it waited for since, which its next operation follows.
    pub(crate) chain: std::cell::RefCell<Nodes>,
    /// Whether the task submitted anything on its stream (or handed the
    /// stream out raw): see [`TaskContext::has_submitted`].
    pub(crate) submitted: std::cell::Cell<bool>,
    /// Whether the stream may have work in flight: it was not idle when the
    /// task got it, or the task submitted since it last synchronized it.
    pub(crate) pending: std::cell::Cell<bool>,
    /// The stream was handed out raw ([`TaskContext::cu_stream`]): work the
    /// runtime does not see may be on it.
    pub(crate) raw_used: std::cell::Cell<bool>,
    pub(crate) _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskContext")
            .field("task", &self.task().id())
            .field("stream", &self.slot.get().map(|(s, _)| s))
            .finish()
    }
}

impl Runtime {
    /// Starts a task on a stream from the pool.
    ///
    /// # Errors
    ///
    /// Driver errors from querying or creating a stream.
    pub fn begin_task(&self) -> Result<TaskContext> {
        self.begin_task_in(&CaptureHandle::default())
    }

    /// [`Runtime::begin_task`] for a task started by a task of a scope
    /// capture (`capture` from its [`TaskContext::capture_handle`]): the new
    /// task joins that capture (its work goes into the graph). `gpu`'s pool
    /// starts spawned and joined tasks this way. Not for direct use.
    ///
    /// # Errors
    ///
    /// As [`Runtime::begin_task`]; [`Error::Unsupported`] for a task of
    /// another device than the capture's; [`Error::CaptureEnded`].
    #[doc(hidden)]
    pub fn begin_task_in(&self, capture: &CaptureHandle) -> Result<TaskContext> {
        self.driver().check_sticky()?;
        let capture = capture.0.clone();
        let task = std::cell::OnceCell::new();
        if let Some(cap) = &capture {
            if cap.rt_id != self.id() {
                return Err(Error::Unsupported(
                    "a task of another device inside a scope capture (a graph runs on one device)",
                ));
            }
            cap.check_open()?;
            // The capture's ledger task: its stream keeps one owner (R3).
            let _ = task.set(cap.task.clone());
        }
        Ok(TaskContext {
            rt: self.clone(),
            task,
            slot: std::cell::Cell::new(None),
            after: Default::default(),
            capture_log: std::cell::RefCell::new(None),
            capture: std::cell::RefCell::new(capture),
            chain: Default::default(),
            submitted: std::cell::Cell::new(false),
            pending: std::cell::Cell::new(false),
            raw_used: std::cell::Cell::new(false),
            _not_sync: PhantomData,
        })
    }
}

/// One-off tasks for [`Buffer`]'s conveniences (they need a task, which
/// this module makes).
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
}

/// One buffer an operation touches.
pub(crate) struct Touch<'a> {
    pub(crate) stamps: Stamps<'a>,
    /// The elements touched in the stamps' owner (X3): [`gpu_epoch::WHOLE`]
    /// for the owner itself, a part for a slice of it.
    pub(crate) range: std::ops::Range<usize>,
    pub(crate) mem: MemAccess,
}

/// The most buffers one operation may touch.
pub(crate) const MAX_TOUCHES: usize = 16;

/// A buffer's stamps as the operation holds them: exclusively for a write,
/// shared (locked briefly) for a read.
pub(crate) enum Stamps<'a> {
    Read(&'a gpu_epoch::BufferStamps),
    Write(&'a mut gpu_epoch::BufferStamps),
}

impl<'a> Touch<'a> {
    pub(crate) fn read<T: DeviceRepr>(b: &'a (impl DeviceSlice<T> + ?Sized)) -> Self {
        Touch {
            mem: MemAccess {
                ptr: b.device_ptr(),
                bytes: b.bytes(),
                access: Access::Read,
            },
            range: b.range(),
            stamps: Stamps::Read(b.stamps()),
        }
    }

    pub(crate) fn write<T: DeviceRepr>(b: &'a mut (impl DeviceSliceMut<T> + ?Sized)) -> Self {
        Touch {
            mem: MemAccess {
                ptr: b.device_ptr(),
                bytes: b.bytes(),
                access: Access::Write,
            },
            range: b.range(),
            stamps: Stamps::Write(b.stamps_mut()),
        }
    }
}

impl TaskContext {
    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The ledger's id of this task's stream, binding one first if the task
    /// has none yet (see [`TaskContext::try_stream_id`]).
    ///
    /// # Panics
    ///
    /// If no stream can be had (a broken context).
    pub fn stream_id(&self) -> StreamId {
        self.try_stream_id()
            .unwrap_or_else(|e| panic!("binding a stream for the task: {e}"))
    }

    /// The ledger's id of this task's stream, binding one first if the task
    /// has none yet: a task takes a stream from the pool at its first
    /// operation that needs one (§9).
    ///
    /// # Errors
    ///
    /// Driver errors from getting a stream, or from waiting for what the
    /// task is ordered after.
    pub fn try_stream_id(&self) -> Result<StreamId> {
        Ok(self.bound()?.0)
    }

    /// Whether the task holds a stream yet.
    pub fn has_stream(&self) -> bool {
        self.slot.get().is_some()
    }

    /// The driver's handle of this task's stream (`CUstream` as an integer
    /// on CUDA; an index on the host backend), for interop with libraries
    /// that take a stream. Work submitted on it directly is not tracked:
    /// take buffers' pointers with [`TaskContext::raw_ptr`]. A capture begun
    /// on it directly must end before the task does (the runtime marks the
    /// end of the task's work on this stream). The handle is the task's
    /// while it lives: once the task ended, the runtime may give the stream
    /// to another task, or destroy it once idle (§9).
    ///
    /// # Panics
    ///
    /// If the task has no stream yet and none can be had (a broken
    /// context); in a scope capture ([`TaskContext::capture_scope`]).
    pub fn cu_stream(&self) -> u64 {
        assert!(
            self.capture.borrow().is_none(),
            "cu_stream: a task of a scope capture shares the capturing stream with the capture's other tasks; untracked work on it would not follow this task's order"
        );
        let (_, raw) = self
            .bound()
            .unwrap_or_else(|e| panic!("binding a stream for the task: {e}"));
        // Whatever is submitted on it now counts as this task's work.
        self.submitted.set(true);
        self.pending.set(true);
        self.raw_used.set(true);
        raw.0
    }

    /// Whether this task has submitted anything on its stream (an
    /// operation, a wait, a record, a synchronize) or handed the stream out
    /// through [`TaskContext::cu_stream`]. A task that has not is ordered
    /// after nothing of its own: a fence on its stream would order another
    /// task after nothing, and `spawn` and `join` skip it.
    #[inline]
    pub fn has_submitted(&self) -> bool {
        self.submitted.get()
    }

    /// The scope capture this task's spawned jobs join (none outside one);
    /// for `gpu`'s pool, which enters it around each job.
    #[doc(hidden)]
    pub fn capture_handle(&self) -> CaptureHandle {
        CaptureHandle(self.capture.borrow().clone())
    }

    /// Whether this task joined (or began) a scope capture.
    pub(crate) fn in_scope_capture(&self) -> bool {
        self.capture.borrow().is_some()
    }

    /// The ledger's task.
    #[inline]
    pub(crate) fn task(&self) -> &Task {
        self.task.get_or_init(|| self.rt.inner.ledger.begin_task())
    }

    /// The ledger's id of this task.
    pub fn task_id(&self) -> gpu_epoch::TaskId {
        self.task().id()
    }

    /// R3 as if this task submitted to `other`'s stream while `other` is
    /// live: the stream becomes shared for good, so none of its closes count
    /// again (records on it cover nothing, synchronizes teach nothing). It
    /// only ever removes facts; for tests of shared streams (T7, T8), since
    /// no other call submits to another task's stream.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::try_stream_id`], for `other`; [`Error::WrongDevice`]
    /// for a task of another runtime.
    pub fn share_stream_of(&self, other: &TaskContext) -> Result<Binding> {
        // A stream id means something only in its own runtime's pool (and
        // a stream submits to one device): another runtime's would index
        // another table.
        self.rt
            .check_same(other.rt.id(), "the task whose stream is shared")?;
        Ok(self.rt.inner.ledger.bind(self.task(), other.bound()?.0))
    }

    /// Ends the task: the stream goes back to the pool (R13). Work already
    /// submitted keeps running.
    pub fn finish(self) {}

    /// R3 before every submission on this task's stream (binding one
    /// first if the task has none); the stream, for the submission.
    #[inline]
    pub(crate) fn bind(&self) -> Result<(StreamId, RawStream)> {
        if let Some(cap) = &*self.capture.borrow() {
            cap.check_open()?;
        }
        let b = self.bound()?;
        self.submitted.set(true);
        self.pending.set(true);
        self.rt.inner.ledger.bind(self.task(), b.0);
        Ok(b)
    }

    /// The task's stream, bound now if it has none.
    #[inline]
    pub(crate) fn bound(&self) -> Result<(StreamId, RawStream)> {
        match self.slot.get() {
            // Fences left by a wait that failed at binding are waited for
            // before anything else goes on the stream.
            Some(b) if self.after.borrow().is_empty() => Ok(b),
            Some(b) => self.wait_after().map(|()| b),
            None => self.bind_stream(),
        }
    }

    /// Waits on the device for the fences the task is ordered after; on a
    /// failure, keeps that fence and the ones after it for the next try.
    #[cold]
    fn wait_after(&self) -> Result<()> {
        let mut after = std::mem::take(&mut *self.after.borrow_mut()).into_iter();
        while let Some(f) = after.next() {
            if let Err(e) = self.wait_fence(f.clone()) {
                let mut left = self.after.borrow_mut();
                left.push(f);
                left.extend(after);
                return Err(e);
            }
        }
        Ok(())
    }

    /// §9: takes a stream from the pool for this task (R3, R13), then waits
    /// on the device for the fences the task is ordered after.
    #[cold]
    fn bind_stream(&self) -> Result<(StreamId, RawStream)> {
        self.bind_stream_as(false)
    }

    /// Binds a stream to this task (of no capture, with none yet) that no
    /// other task holds while it does ([`crate::pool::StreamPool`]'s
    /// `acquire_own`): a communicator's task (§11).
    ///
    /// # Errors
    ///
    /// [`gpu_epoch::LedgerError::TooManyStreams`] where every stream is
    /// held; driver errors.
    pub(crate) fn bind_own_stream(&self) -> Result<()> {
        debug_assert!(self.slot.get().is_none() && self.capture.borrow().is_none());
        self.bind_stream_as(true).map(drop)
    }

    /// [`TaskContext::bind_stream`]; a stream of its own if `own`.
    fn bind_stream_as(&self, own: bool) -> Result<(StreamId, RawStream)> {
        let i = &self.rt.inner;
        if let Some(cap) = self.capture.borrow().clone() {
            // A task of a scope capture submits to the capturing stream.
            cap.check_open()?;
            i.ledger.bind(self.task(), cap.slot.0);
            self.slot.set(Some(cap.slot));
            self.pending.set(true);
            self.wait_after()?;
            return Ok(cap.slot);
        }
        let (stream, idle) = if own {
            i.core.streams.acquire_own(self.rt.driver(), &i.ledger)?
        } else {
            i.core.streams.acquire(self.rt.driver(), &i.ledger)?
        };
        i.ledger.bind(self.task(), stream);
        let b = (stream, self.rt.raw_stream(stream));
        self.slot.set(Some(b));
        self.pending.set(!idle);
        self.wait_after()?;
        Ok(b)
    }

    /// The bound stream's ledger id. Only after [`TaskContext::bind`] or
    /// [`TaskContext::bound`] returned `Ok`.
    #[inline]
    pub(crate) fn sid(&self) -> StreamId {
        self.slot.get().expect("the task's stream is bound").0
    }

    /// The bound stream's driver handle (as [`TaskContext::sid`]).
    #[inline]
    pub(crate) fn raw(&self) -> RawStream {
        self.slot.get().expect("the task's stream is bound").1
    }

    /// Orders this task after `fence` (R8): on the device now if the task
    /// has a stream, else when it binds one. A task that never submits GPU
    /// work never waits.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; driver errors from the wait.
    pub fn after_fence(&self, fence: crate::fence::Fence) -> Result<()> {
        if self.slot.get().is_some() {
            self.wait_fence(fence)
        } else {
            self.rt.check_group(fence.runtime(), "the fence")?;
            self.after.borrow_mut().push(fence);
            Ok(())
        }
    }

    /// Fences that order a new child task after everything this task is
    /// ordered after and has submitted: a fresh fence on its stream if it
    /// submitted, else (clones of) the fences it waits for itself.
    ///
    /// # Errors
    ///
    /// Driver errors from recording the fence.
    pub fn fences_for_child(&self) -> Result<smallvec::SmallVec<[crate::fence::Fence; 1]>> {
        if self.submitted.get() {
            Ok(smallvec::smallvec![self.fence()?])
        } else {
            Ok(self.after.borrow().iter().cloned().collect())
        }
    }

    #[inline]
    pub(crate) fn hand_off(&self, uses: &Uses, access: Access) -> Result<()> {
        self.hand_off_range(uses, gpu_epoch::WHOLE, access)
    }

    /// R9, X3: hands `range` of a buffer with `uses` to this stream.
    #[inline]
    pub(crate) fn hand_off_range(
        &self,
        uses: &Uses,
        range: std::ops::Range<usize>,
        access: Access,
    ) -> Result<()> {
        let (s, raw) = (self.sid(), self.raw());
        let d = self.rt.decide_range(uses, range, s, access, true);
        wait_streams(&self.rt, self.task(), s, raw, d)
    }

    /// R1 + R9 around one submission: hands every touched buffer off to this
    /// stream, stamps, submits, stamps again.
    pub(crate) fn tracked<R>(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        submit: impl FnOnce(&[MemAccess], RawStream) -> Result<R>,
    ) -> Result<R> {
        let (sid, raw) = self.bind()?;
        let l = &self.rt.inner.ledger;
        if touches.len() > MAX_TOUCHES {
            return Err(Error::BadKernelArgs {
                kernel: "operation",
                problem: format!("touches {} buffers; at most {MAX_TOUCHES}", touches.len()),
            });
        }
        // The epoch the stamps below carry at least: if no close of this
        // stream comes before the submission is in, stamping again after it
        // would change nothing. (In the runtime only the stream's task
        // closes it; the ledger allows a second task to share it, R3.)
        let epoch = l.epoch(sid);
        let mut mem = smallvec::SmallVec::<[MemAccess; 6]>::new();
        for t in touches.iter_mut() {
            mem.push(t.mem);
            let r = &t.range;
            match &mut t.stamps {
                Stamps::Write(s) => {
                    let u = s.get_mut();
                    self.hand_off_range(u, r.clone(), Access::Write)?;
                    l.stamp_write_range(u, r.clone(), sid);
                }
                Stamps::Read(s) => {
                    let d = {
                        let mut u = s.lock();
                        // Decide under the lock; a wait happens without it
                        // (R14), the common no-wait stamps at once.
                        let d = self.rt.decide_range(&u, r.clone(), sid, Access::Read, true);
                        if let Decision::NoWait(_) = d {
                            l.stamp_read_range(&mut u, r.clone(), sid);
                            continue;
                        }
                        d
                    };
                    wait_streams(&self.rt, self.task(), sid, raw, d)?;
                    l.stamp_read_range(&mut s.lock(), r.clone(), sid);
                }
            }
        }
        if let Some(cap) = &*self.capture.borrow() {
            // No trace span: its records would go into the graph, between
            // another task's dependencies and its operation.
            let r = cap.submit(self.rt.driver(), &self.chain, &mem, || submit(&mem, raw))?;
            return Ok(r);
        }
        let tracer = &self.rt.inner.tracer;
        let span = tracer.open(self.rt.driver(), raw);
        let r = submit(&mem, raw)?;
        tracer.close(self.rt.driver(), span, sid, raw, name);
        if let Some(log) = self.capture_log.borrow_mut().as_mut() {
            log.extend_from_slice(&mem);
        }
        if l.epoch(sid) != epoch {
            for t in touches.iter_mut() {
                let r = t.range.clone();
                match &mut t.stamps {
                    Stamps::Write(s) => {
                        l.stamp_write_range(s.get_mut(), r, sid);
                    }
                    Stamps::Read(s) => {
                        l.stamp_read_range(&mut s.lock(), r, sid);
                    }
                }
            }
        }
        Ok(r)
    }

    /// §8: an operation that reads or writes host memory cannot go into a
    /// graph: the graph would keep the host pointer past the borrow and use
    /// it at every launch. Checked before anything is submitted.
    pub(crate) fn host_memory_outside_capture(&self, what: &'static str) -> Result<()> {
        // A task of a scope capture may have no stream yet: its first
        // operation binds it to the capturing one.
        if self.in_scope_capture() {
            return Err(Error::Capturing { what });
        }
        // Otherwise a task without a stream is not capturing.
        if self
            .slot
            .get()
            .is_some_and(|(s, _)| self.rt.inner.ledger.is_capturing(s))
        {
            return Err(Error::Capturing { what });
        }
        Ok(())
    }

    fn check<T: DeviceRepr>(
        &self,
        b: &(impl DeviceSlice<T> + ?Sized),
        what: &'static str,
    ) -> Result<()> {
        self.rt.check_same(b.runtime_id(), what)
    }

    // ----- allocation and copies -------------------------------------------

    /// A new buffer of `len` elements, allocated in stream order on this
    /// task's stream; its contents are unspecified (zeros on the host
    /// backend).
    ///
    /// # Errors
    ///
    /// [`Error::OutOfMemory`] or a driver error.
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<Buffer<T>> {
        self.bind()?;
        if self.in_scope_capture() || self.rt.inner.ledger.is_capturing(self.sid()) {
            // The graph would own the memory (an allocation node: the
            // address is valid only while a launch of the graph runs), and
            // the buffer outlive it: a later use reads freed memory, and a
            // captured temporary is freed before the graph's first launch.
            return Err(Error::Capturing {
                what: "allocating device memory in a capture (allocate before it)",
            });
        }
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::TooLarge {
                elements: len,
                element_bytes: std::mem::size_of::<T>(),
                during: "computing an allocation size",
            })?;
        let ptr = self.rt.driver().alloc(device_bytes(bytes), self.raw())?;
        let i = &self.rt.inner;
        i.allocations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        i.device_bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        let mut b = Buffer {
            ptr,
            len,
            rt: self.rt.clone(),
            stamps: gpu_epoch::BufferStamps::new(),
            range: crate::buffer::WHOLE,
            _t: PhantomData,
        };
        // The allocation is an operation on this stream: stamp it (R1).
        i.ledger.stamp_write(b.stamps.get_mut(), self.sid());
        Ok(b)
    }

    /// A buffer of `len` zeros.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::alloc`].
    pub fn zeros<T: DeviceRepr>(&self, len: usize) -> Result<Buffer<T>> {
        let mut b = self.alloc::<T>(len)?;
        self.memset_zero(&mut b)?;
        Ok(b)
    }

    /// A buffer holding a copy of `src`.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::alloc`].
    pub fn from_host<T: DeviceRepr>(&self, src: &[T]) -> Result<Buffer<T>> {
        let mut b = self.alloc::<T>(src.len())?;
        self.copy_from_host(&mut b, src)?;
        Ok(b)
    }

    /// Sets every byte of `dst` to zero.
    ///
    /// # Errors
    ///
    /// A driver error, or [`Error::WrongDevice`].
    pub fn memset_zero<T: DeviceRepr>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.check(dst, "the destination buffer")?;
        let (ptr, bytes) = (dst.device_ptr(), dst.bytes());
        // Whole aligned words are set on the device; anything else (an odd
        // size, a view of bytes off a word boundary) is copied from zeros in
        // host memory, below.
        let words = bytes % 4 == 0 && ptr % 4 == 0;
        if !words {
            self.host_memory_outside_capture("zeroing a buffer of odd size or offset")?;
        }
        let drv = self.rt.driver();
        // `dst` is live and ordered for its bytes in both calls below:
        // `tracked` handed it to this stream for a write, it is borrowed
        // now, and its buffer's drop frees it only after a hand-off from
        // this stream (X4).
        self.tracked("memset", &mut [Touch::write(dst)], |_, raw| {
            if words {
                // SAFETY: as above, for `bytes / 4` words, 4-aligned
                // (checked above).
                unsafe { drv.memset_u32(ptr, 0, bytes / 4, raw) }
            } else {
                let zeros = vec![0u8; bytes];
                // SAFETY: as above; `zeros` is pageable memory of `bytes`,
                // staged by the call, and no capture takes it (checked
                // above).
                unsafe { drv.copy_htod(ptr, zeros.as_ptr(), bytes, raw) }
            }
        })
    }

    /// Copies `src` from host memory into `dst`; `src` may be reused on
    /// return. From pageable memory the copy is asynchronous (the driver
    /// stages it); from page-locked memory (a [`crate::Staging`] buffer's
    /// slice, of this runtime or another, or memory another library pinned),
    /// which the device reads while the copy runs, it waits for the copy
    /// (§8: the host could write or free the memory under it).
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
    pub fn copy_from_host<T: DeviceRepr>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
        src: &[T],
    ) -> Result<()> {
        // This runtime's page-locked memory, or any the driver knows as such
        // (another runtime's `Staging`, another library's): the device reads
        // it after the call returns.
        let pinned = self
            .rt
            .is_pinned(src.as_ptr() as usize, std::mem::size_of_val(src))
            || (!src.is_empty() && self.rt.driver().is_page_locked(src.as_ptr().cast()));
        self.copy_from_host_staged(dst, src)?;
        if pinned {
            self.synchronize_past_errors()?;
        }
        Ok(())
    }

    /// [`TaskContext::copy_from_host`] without the wait for page-locked
    /// memory: for [`crate::Staging`], which keeps a fence of the copy and
    /// waits for it before the host touches the memory again.
    pub(crate) fn copy_from_host_staged<T: DeviceRepr>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
        src: &[T],
    ) -> Result<()> {
        self.check(dst, "the destination buffer")?;
        self.host_memory_outside_capture("copying from host memory")?;
        if dst.len() != src.len() {
            return Err(Error::LengthMismatch {
                what: "the host source",
                expected: dst.len(),
                got: src.len(),
            });
        }
        // SAFETY: `src` holds `dst.len()` elements (the lengths agree);
        // pageable memory is staged by the driver during the call, and
        // page-locked memory stays unmodified until the copy ran:
        // `copy_from_host` synchronizes for any memory this runtime or the
        // driver knows as page-locked, and `Staging` waits for its fence.
        unsafe { self.copy_from_host_async(dst, src.as_ptr()) }
    }

    /// Copies `len` elements from host memory at `src` into `dst`,
    /// asynchronously, without staging: for page-locked memory (a
    /// [`crate::Staging`] buffer), the copy runs at the full transfer rate.
    ///
    /// # Safety
    ///
    /// `src` points to `dst.len()` readable elements that stay alive and
    /// unmodified until this stream has reached the copy (synchronize the
    /// stream, or wait for a later event on it, before touching them).
    ///
    /// # Errors
    ///
    /// Driver errors; [`Error::WrongDevice`].
    pub unsafe fn copy_from_host_async<T: DeviceRepr>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
        src: *const T,
    ) -> Result<()> {
        self.check(dst, "the destination buffer")?;
        self.host_memory_outside_capture("copying from host memory")?;
        let (ptr, bytes, drv) = (dst.device_ptr(), dst.bytes(), self.rt.driver());
        // SAFETY: this function's contract: `src` holds `dst.len()`
        // elements, alive and unmodified until this stream reached the copy;
        // no capture takes it (checked above). `tracked` handed `dst` to
        // this stream for a write, and its buffer's drop frees it only after
        // a hand-off from this stream (X4).
        self.tracked("htod", &mut [Touch::write(dst)], |_, raw| unsafe {
            drv.copy_htod(ptr, src as *const u8, bytes, raw)
        })
    }

    /// Copies `src` to host memory at `dst`, asynchronously: the data is
    /// there once this stream has reached the copy.
    ///
    /// # Safety
    ///
    /// `dst` points to `src.len()` writable elements that stay alive, and
    /// that nothing else reads or writes, until this stream has reached the
    /// copy.
    ///
    /// # Errors
    ///
    /// Driver errors; [`Error::WrongDevice`].
    pub unsafe fn copy_to_host_async<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: *mut T,
    ) -> Result<()> {
        self.check(src, "the source buffer")?;
        self.host_memory_outside_capture("copying to host memory")?;
        let (ptr, bytes, drv) = (src.device_ptr(), src.bytes(), self.rt.driver());
        // SAFETY: this function's contract: `dst` holds `src.len()`
        // writable elements that nothing else touches until this stream
        // reached the copy; no capture takes it (checked above). `tracked`
        // handed `src` to this stream for a read, and its buffer's drop
        // frees it only after a hand-off from this stream (X4).
        self.tracked("dtoh", &mut [Touch::read(src)], |_, raw| unsafe {
            drv.copy_dtoh(dst as *mut u8, ptr, bytes, raw)
        })
    }

    /// Copies `src` to host memory and waits for it: a host synchronize of
    /// this task's stream (R5), so it gives the Completed fact.
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
    pub fn copy_to_host<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut [T],
    ) -> Result<()> {
        self.check(src, "the source buffer")?;
        self.host_memory_outside_capture("copying to host memory")?;
        if dst.len() != src.len() {
            return Err(Error::LengthMismatch {
                what: "the host destination",
                expected: src.len(),
                got: dst.len(),
            });
        }
        let (ptr, bytes, drv) = (src.device_ptr(), src.bytes(), self.rt.driver());
        // SAFETY: `tracked` handed `src` to this stream for a read, and its
        // buffer's drop frees it only after a hand-off from this stream
        // (X4). `dst` holds `bytes` (the lengths agree) and stays borrowed
        // until `synchronize_past_errors` below returns, which is once the
        // stream ran the copy or the device is broken for good (nothing
        // more runs on it); no capture takes it (checked above).
        self.tracked("dtoh", &mut [Touch::read(src)], |_, raw| unsafe {
            drv.copy_dtoh(dst.as_mut_ptr() as *mut u8, ptr, bytes, raw)
        })?;
        // `dst` is borrowed only for this call: wait for the copy.
        self.synchronize_past_errors()
    }

    /// [`TaskContext::synchronize`] for a copy through host memory that is
    /// borrowed only for the caller's call: returns once the stream ran
    /// everything queued (retrying a synchronize that fails while the
    /// device still works), or with the error once the device is broken
    /// for good and nothing more runs on it ([`Runtime::wait_past_errors`]).
    pub(crate) fn synchronize_past_errors(&self) -> Result<()> {
        self.rt.wait_past_errors(|| self.synchronize())
    }

    /// Copies `src` into a new `Vec` (waits, like [`TaskContext::copy_to_host`]).
    ///
    /// # Errors
    ///
    /// Driver errors.
    pub fn to_vec<T: DeviceRepr + Default>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
    ) -> Result<Vec<T>> {
        let mut v = vec![T::default(); src.len()];
        self.copy_to_host(src, &mut v)?;
        Ok(v)
    }

    /// Copies `src` into `dst` on the device: buffers or views, of two
    /// buffers or of one (two ranges of one buffer are the views of a
    /// [`Buffer::split_at_mut`]).
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
    pub fn copy<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.check(src, "the source buffer")?;
        self.check(dst, "the destination buffer")?;
        self.device_copy(src, dst, None)
    }

    /// Copies `src` into `dst` where the two may be of different devices
    /// of this runtime's group (§11): `cuMemcpyPeerAsync` on this task's
    /// stream (over NVLink where peer access is on), ordered like any
    /// copy: `src` is read and `dst` written, so their earlier users on any
    /// device are waited for on the device and later ones wait for this.
    /// The task's own device may be either one (or a third).
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`] for a buffer of another group;
    /// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
    pub fn copy_peer<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let group = &self.rt.inner.group;
        let src_rt = group.member(src.runtime_id()).ok_or(Error::WrongDevice {
            what: "the source buffer",
        })?;
        let dst_rt = group.member(dst.runtime_id()).ok_or(Error::WrongDevice {
            what: "the destination buffer",
        })?;
        if self.in_scope_capture() {
            // The graph's launch takes buffers of its own device only.
            return Err(Error::Capturing {
                what: "a peer copy in a scope capture",
            });
        }
        self.device_copy(src, dst, Some((&src_rt, &dst_rt)))
    }

    /// A tracked device copy of `src` into `dst` on this stream: within
    /// this runtime's device (`peers` none), or between the devices of the
    /// runtimes `peers` names (source's, destination's), whose memory
    /// `src` and `dst` are (the callers checked).
    fn device_copy<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
        peers: Option<(&Runtime, &Runtime)>,
    ) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::LengthMismatch {
                what: "the destination buffer",
                expected: src.len(),
                got: dst.len(),
            });
        }
        let (s, d, bytes, drv) = (
            src.device_ptr(),
            dst.device_ptr(),
            src.bytes(),
            self.rt.driver(),
        );
        let name = if peers.is_some() { "peer" } else { "dtod" };
        // SAFETY: `tracked` handed `src` (read) and `dst` (write) to this
        // stream; both are borrowed now, hold `bytes` (the lengths agree),
        // are memory of this runtime's driver or, for a peer copy, of the
        // drivers of the runtimes named (held by the caller), and their
        // buffers' drops free them only after a hand-off from this stream
        // (X4).
        self.tracked(
            name,
            &mut [Touch::read(src), Touch::write(dst)],
            |_, raw| unsafe {
                match peers {
                    None => drv.copy_dtod(d, s, bytes, raw),
                    Some((from, to)) => drv.copy_peer(d, to.driver(), s, from.driver(), bytes, raw),
                }
            },
        )
    }

    // ----- synchronization ----------------------------------------------------

    /// R5: waits on the host until this task's stream finished everything
    /// submitted so far; its epoch becomes Completed.
    ///
    /// # Errors
    ///
    /// [`Error::Capturing`] while capturing; driver errors.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.rt
            .inner
            .ledger
            .stream_sync(self.task(), self.sid(), || {
                self.rt
                    .driver()
                    .stream_sync(self.raw(), self.rt.inner.sync_mode)
            })
            .map_err(|_| Error::Capturing {
                what: "synchronizing the stream",
            })??;
        self.pending.set(false);
        Ok(())
    }

    /// R10: the raw device pointer of `buf`, for code outside the runtime
    /// (a library call, a hand-written launch). The buffer is stamped once on
    /// this stream and marked escaped: no shortcut applies to it until it
    /// moves to another stream, which then waits for everything this stream
    /// queued. Work submitted through the pointer after the buffer moved is
    /// not ordered with other tasks' work: order it yourself.
    ///
    /// Safe to call, as `slice::as_ptr` is: an address does nothing by
    /// itself, and every use of it (an FFI call, or [`crate::Launch::raw_ptr`]
    /// followed by the `unsafe` [`crate::Launch::submit`]) is `unsafe`, with
    /// the caller vouching that the memory is alive (as long as `buf` is)
    /// and the work ordered (§8). No safe function of this crate uses a raw
    /// address: `Launch::raw_ptr` only records it for the `unsafe` submit.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; [`Error::Capturing`] in a scope capture
    /// ([`TaskContext::capture_scope`]: its tasks share one stream, so the
    /// escape would order nothing, and the graph could not order the work
    /// done through the pointer with the other tasks'); driver errors from
    /// the hand-off.
    pub fn raw_ptr<T: DeviceRepr>(
        &self,
        buf: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<u64> {
        self.check(buf, "the buffer")?;
        if self.in_scope_capture() {
            return Err(Error::Capturing {
                what: "taking a raw pointer in a scope capture (take it before the capture)",
            });
        }
        self.bind()?;
        let u = buf.stamps_mut().get_mut();
        self.hand_off(u, Access::Write)?;
        self.rt.inner.ledger.escape(u, self.sid());
        Ok(buf.device_ptr())
    }

    /// R11: a pointer for code that is not stream-aware (MPI, FFI): hands
    /// `buf` to this task's stream (a device wait if needed), then
    /// synchronizes this stream, not the old one. It waits only for what
    /// orders `buf` plus this task's own work. Safe to call for the same
    /// reason as [`TaskContext::raw_ptr`]: using the address is `unsafe`.
    ///
    /// # Errors
    ///
    /// [`Error::Capturing`] while capturing; driver errors.
    pub fn host_sync_ptr<T: DeviceRepr>(
        &self,
        buf: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<u64> {
        self.check(buf, "the buffer")?;
        self.bind()?;
        if self.rt.inner.ledger.is_capturing(self.sid()) {
            return Err(Error::Capturing {
                what: "taking a host-sync pointer",
            });
        }
        let u = buf.stamps_mut().get_mut();
        self.hand_off(u, Access::Write)?;
        self.rt.inner.ledger.stamp_write(u, self.sid());
        self.synchronize()?;
        Ok(buf.device_ptr())
    }

    /// R11 for code that only reads the buffer (an MPI send): as
    /// [`TaskContext::host_sync_ptr`], but `buf` is shared, handed to this
    /// task's stream for a read and stamped as read there, so it waits only
    /// for the buffer's writers (not for other readers) plus this task's
    /// own work, and other tasks may read `buf` meanwhile. The caller only
    /// reads through the address, and only while `buf` stays borrowed.
    ///
    /// Safe to call, as [`TaskContext::raw_ptr`] is: the address does
    /// nothing by itself, and reading through it is `unsafe`, with the
    /// caller vouching for the above (§8).
    ///
    /// # Errors
    ///
    /// [`Error::Capturing`] while capturing; [`Error::WrongDevice`]; driver
    /// errors.
    pub fn host_sync_ptr_read<T: DeviceRepr>(
        &self,
        buf: &(impl DeviceSlice<T> + ?Sized),
    ) -> Result<u64> {
        self.check(buf, "the buffer")?;
        let (sid, raw) = self.bind()?;
        if self.rt.inner.ledger.is_capturing(sid) {
            return Err(Error::Capturing {
                what: "taking a host-sync pointer",
            });
        }
        // As a tracked read: decide under the lock, wait without it (R14).
        let (r, l) = (buf.range(), &self.rt.inner.ledger);
        let d = self
            .rt
            .decide_range(&buf.stamps().lock(), r.clone(), sid, Access::Read, true);
        wait_streams(&self.rt, self.task(), sid, raw, d)?;
        l.stamp_read_range(&mut buf.stamps().lock(), r, sid);
        self.synchronize()?;
        Ok(buf.device_ptr())
    }

    /// X3: ends a [`Split`]: hands each view's uses to this stream (a
    /// device wait where a view's work is not yet ordered before it) and
    /// restamps the parent buffer here. Rejoin after the views' tasks
    /// joined, and the waits are usually avoided.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`] for a split of another runtime; driver errors
    /// from a wait. Either way the parent's uses stay unknown (its next use
    /// waits for every stream), never stale.
    pub fn rejoin<T: DeviceRepr>(&self, mut split: Split<'_, T>) -> Result<()> {
        self.rt.check_same(split.runtime_id(), "the split buffer")?;
        self.bind()?;
        let (parent, views) = split.parts();
        for v in views.iter_mut() {
            self.hand_off(v.get_mut(), Access::Write)?;
        }
        self.rt
            .inner
            .ledger
            .stamp_write(parent.get_mut(), self.sid());
        Ok(())
    }
}

impl Drop for TaskContext {
    fn drop(&mut self) {
        if self.capture.get_mut().is_some() {
            // A task of a scope capture: the stream and the ledger task are
            // the capture's, which ends them (`capture_scope`).
            return;
        }
        let i = &self.rt.inner;
        let Some((s, _)) = self.slot.get() else {
            // Never bound a stream: nothing to close or give back (the
            // fences it would have waited for go back with `after`).
            if let Some(t) = self.task.get() {
                i.ledger.finish_task(t);
            }
            return;
        };
        if self.submitted.get() {
            // R2 at the task's end: its last epoch closes while the task
            // still owns the stream, so a later hand-off's device wait on
            // this stream learns it (closed_counted), and a synchronize after
            // that wait completes it. Without it, `Buffer::zeros` then
            // `to_vec` left the next writer a needless device wait (§8).
            i.ledger.close(self.task(), s);
        }
        i.ledger.finish_task(self.task());
        let tail = if i.ledger.is_shared(s) || self.capture_log.borrow().is_some() {
            // Another live task may have work on it (§9), or a write now
            // would go into the graph: ask the driver when it comes back.
            Tail::Unknown
        } else if !self.pending.get() && !self.raw_used.get() {
            Tail::Idle
        } else {
            i.core.streams.end_of_work(self.rt.driver(), s)
        };
        i.core.streams.release(s, tail, self.rt.driver(), &i.ledger);
    }
}
