//! Foreign work (DESIGN "Numerical libraries and foreign work"): a library call, or any code that queues work on the
//! task's stream itself, run as a tracked operation over the buffers it
//! declares, with an optional safe host twin for the host backend.
//!
//! ```text
//! unsafe { t.foreign("cublasSgemm", (&a, &b), (&mut c,)) }
//!     .host(move |(a, b), (c,)| { host_gemm(a, b, c); Ok(()) })   // the host backend's twin
//!     .run(|s, (a, b), (c,)| { sgemm(handle, s.raw(), a.as_ptr(), b.as_ptr(), c.as_mut_ptr()) })
//! ```
//!
//! On the host backend the twin is queued on the task's stream as a
//! kernel's host implementation is, and `run` returns once it is queued,
//! as the device closure does on CUDA: the twin owns what it uses
//! (`'static`) and reaches the buffers through pointers that the buffers'
//! tracking keeps valid until the stream passed it (a buffer is freed only
//! after a hand-off from the streams that used it). Its error or panic is
//! a fault of the device, reported by the next wait, as a kernel's.
//! [`Foreign::host_sync`] keeps a twin that borrows the caller's data or
//! returns a value: the caller waits for it.

use super::tracked::Touch;
use super::TaskContext;
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::driver::{BatchTag, ChildNode, MemAccess, NodeOp, RawStream};
use crate::error::{Error, Result, ResultExt};
use crate::graph::{capture_child, CallKey};
use crate::BackendKind;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A buffer a foreign operation reads, as its device closure sees it: the
/// device address of its first element and its length. `Copy`; valid only
/// inside the closure it was given to.
#[derive(Debug)]
pub struct DevicePtr<T> {
    ptr: u64,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

/// A buffer a foreign operation writes (and may read), as its device closure
/// sees it. Valid only inside the closure it was given to.
#[derive(Debug)]
pub struct DevicePtrMut<T> {
    ptr: u64,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

impl<T> DevicePtr<T> {
    /// The device address (`CUdeviceptr`).
    pub fn raw(&self) -> u64 {
        self.ptr
    }
    /// The address as a pointer to `T`, for a library's `const T*`.
    pub fn as_ptr(&self) -> *const T {
        self.ptr as usize as *const T
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> DevicePtrMut<T> {
    /// The device address (`CUdeviceptr`).
    pub fn raw(&self) -> u64 {
        self.ptr
    }
    /// The address as a pointer to `T`, for a library's `T*`.
    pub fn as_mut_ptr(&self) -> *mut T {
        self.ptr as usize as *mut T
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The task's stream as a foreign operation's device closure gets it
/// (outside one: [`TaskContext::stream_slot`]).
#[derive(Debug)]
pub struct ForeignStream<'t> {
    raw: u64,
    slot: usize,
    rt: &'t crate::Runtime,
    capturing: bool,
}

impl ForeignStream<'_> {
    /// Whether the work queued on this stream is captured into a graph
    /// (in `TaskContext::capture`, `gpu::capture` or a graphed scope,
    /// `gpu::Graphed`) rather than run: it runs at each launch of the
    /// graph, later, maybe on another stream. A library then uses objects
    /// it keeps for captures alone, that own no memory other work may use
    /// meanwhile (a cuBLAS handle without a workspace of its own, say);
    /// see the contract of [`Foreign::run`].
    pub fn capturing(&self) -> bool {
        self.capturing
    }

    /// The stream's slot in its runtime's stream pool (its ledger index,
    /// [`crate::StreamId::index`]): what a library keys its per-stream
    /// objects by (handles, plans, generators: see
    /// [`crate::Runtime::extension`]). Slots are bounded by the pool's
    /// capacity, so a pool of objects per slot stays bounded. A slot holds
    /// one stream at a time, and a slot's stream is retired idle (every
    /// piece of its work finished) before another is made in it: an object
    /// last bound to the slot's earlier stream has no work pending when it
    /// is bound to the new one (which may have the same address: bind it
    /// again at each use).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The `CUstream` (a library's `cudaStream_t`), as an integer: queue
    /// the operation's work on it and nowhere else.
    pub fn raw(&self) -> u64 {
        self.raw
    }

    /// The runtime whose stream it is: where a library keeps its objects
    /// ([`crate::Runtime::extension`]), for a batched form
    /// ([`Foreign::batchable`]), which is called without the task.
    pub fn runtime(&self) -> &crate::Runtime {
        self.rt
    }

    /// The stream as cudarc's, borrowed (dropping it does not destroy the
    /// stream), of the runtime's context ([`crate::Runtime::cuda_context`]),
    /// for cudarc's calls and its library wrappers inside the closure. The
    /// closure's contract holds for it: queue work on it and keep it no
    /// longer than the closure runs.
    ///
    /// # Errors
    ///
    /// As [`crate::Runtime::cuda_context`].
    pub fn cudarc(&self) -> Result<Arc<cudarc::driver::CudaStream>> {
        let ctx = self.rt.cuda_context()?;
        // SAFETY: `raw` is this task's live stream of that context (the
        // runtime's primary context, checked by `cuda_context`); it lives
        // while the task does, longer than the closure that may use the
        // wrapper (`Foreign::run`'s contract); the work queued through it
        // is ordered by the operation's declared buffers.
        Ok(unsafe { ctx.wrap_borrowed_stream(self.raw as usize as cudarc::driver::sys::CUstream) })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// One buffer a foreign operation reads: `&B` for a [`DeviceSlice<T>`]
/// (a [`crate::Buffer`] or a view). Sealed.
pub trait ReadArg<'b, T: DeviceRepr>: sealed::Sealed {
    #[doc(hidden)]
    fn touch(self, l: &mut TouchList<'b>) -> (DevicePtr<T>, usize);
}

/// One buffer a foreign operation writes: `&mut B` for a
/// [`DeviceSliceMut<T>`] (a buffer or a mutable view). Sealed.
pub trait WriteArg<'b, T: DeviceRepr>: sealed::Sealed {
    #[doc(hidden)]
    fn touch(self, l: &mut TouchList<'b>) -> (DevicePtrMut<T>, usize);
}

impl<B: ?Sized> sealed::Sealed for &B {}
impl<B: ?Sized> sealed::Sealed for &mut B {}

impl<'b, T: DeviceRepr, B: DeviceSlice<T> + ?Sized> ReadArg<'b, T> for &'b B {
    fn touch(self, l: &mut TouchList<'b>) -> (DevicePtr<T>, usize) {
        l.runtimes.push(self.runtime_id());
        l.touches.push(Touch::read(self));
        let p = DevicePtr {
            ptr: self.device_ptr(),
            len: self.len(),
            _t: PhantomData,
        };
        (p, self.len())
    }
}

impl<'b, T: DeviceRepr, B: DeviceSliceMut<T> + ?Sized> WriteArg<'b, T> for &'b mut B {
    fn touch(self, l: &mut TouchList<'b>) -> (DevicePtrMut<T>, usize) {
        let (ptr, len) = (self.device_ptr(), self.len());
        l.runtimes.push(self.runtime_id());
        l.touches.push(Touch::write(self));
        let p = DevicePtrMut {
            ptr,
            len,
            _t: PhantomData,
        };
        (p, len)
    }
}

/// The buffers of one foreign operation, as the runtime tracks them.
#[doc(hidden)]
#[allow(missing_debug_implementations)] // internal; holds borrowed stamps
pub struct TouchList<'b> {
    touches: SmallVec<[Touch<'b>; 4]>,
    runtimes: SmallVec<[u64; 4]>,
}

/// The buffers a foreign operation reads: a tuple of up to 8 [`ReadArg`]s
/// (`()` for none), `(&a, &b)`. `E` is the tuple of their element types,
/// which the compiler infers.
pub trait Reads<'b, E> {
    /// What the device closure gets: a [`DevicePtr`] per buffer (plain
    /// addresses, which a queued host twin carries to the stream).
    type Ptrs: Copy + Send + 'static;
    /// What the host twin gets: a `&[T]` per buffer.
    type Host<'h>;
    #[doc(hidden)]
    fn touch_all(self, l: &mut TouchList<'b>) -> Self::Ptrs;
    /// # Safety
    ///
    /// `p` came from `touch_all` on buffers that are live and ordered for
    /// the caller, and nothing writes them while the result lives.
    #[doc(hidden)]
    unsafe fn host<'h>(p: Self::Ptrs) -> Self::Host<'h>;
}

/// The buffers a foreign operation writes: a tuple of up to 8
/// [`WriteArg`]s (`()` for none), `(&mut c,)`. `E` is the tuple of their
/// element types, which the compiler infers.
pub trait Writes<'b, E> {
    /// What the device closure gets: a [`DevicePtrMut`] per buffer.
    type Ptrs: Copy + Send + 'static;
    /// What the host twin gets: a `&mut [T]` per buffer.
    type Host<'h>;
    #[doc(hidden)]
    fn touch_all(self, l: &mut TouchList<'b>) -> Self::Ptrs;
    /// # Safety
    ///
    /// `p` came from `touch_all` on buffers that are live and ordered for
    /// the caller, and nothing else reads or writes them while the result
    /// lives.
    #[doc(hidden)]
    unsafe fn host<'h>(p: Self::Ptrs) -> Self::Host<'h>;
}

impl<T> Clone for DevicePtrMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtrMut<T> {}

impl<'b> Reads<'b, ()> for () {
    type Ptrs = ();
    type Host<'h> = ();
    fn touch_all(self, _: &mut TouchList<'b>) {}
    unsafe fn host<'h>(_: ()) -> Self::Host<'h> {}
}
impl<'b> Writes<'b, ()> for () {
    type Ptrs = ();
    type Host<'h> = ();
    fn touch_all(self, _: &mut TouchList<'b>) {}
    unsafe fn host<'h>(_: ()) -> Self::Host<'h> {}
}

macro_rules! tuples {
    ($($a:ident $t:ident $i:tt),+) => {
        impl<'b, $($t: DeviceRepr, $a: ReadArg<'b, $t>),+> Reads<'b, ($($t,)+)> for ($($a,)+) {
            type Ptrs = ($(DevicePtr<$t>,)+);
            type Host<'h> = ($(&'h [$t],)+);
            fn touch_all(self, l: &mut TouchList<'b>) -> Self::Ptrs {
                ($(self.$i.touch(l).0,)+)
            }
            unsafe fn host<'h>(p: Self::Ptrs) -> Self::Host<'h> {
                // SAFETY: the caller's contract: each pointer holds `len`
                // live, ordered elements that nothing writes meanwhile.
                ($(unsafe { std::slice::from_raw_parts(p.$i.as_ptr(), p.$i.len) },)+)
            }
        }
        impl<'b, $($t: DeviceRepr, $a: WriteArg<'b, $t>),+> Writes<'b, ($($t,)+)> for ($($a,)+) {
            type Ptrs = ($(DevicePtrMut<$t>,)+);
            type Host<'h> = ($(&'h mut [$t],)+);
            fn touch_all(self, l: &mut TouchList<'b>) -> Self::Ptrs {
                ($(self.$i.touch(l).0,)+)
            }
            unsafe fn host<'h>(p: Self::Ptrs) -> Self::Host<'h> {
                // SAFETY: the caller's contract: each pointer holds `len`
                // live, ordered elements, and the buffers are distinct
                // (each was borrowed `&mut`), so the slices do not alias.
                ($(unsafe { std::slice::from_raw_parts_mut(p.$i.as_mut_ptr(), p.$i.len) },)+)
            }
        }
    };
}
tuples!(A0 T0 0);
tuples!(A0 T0 0, A1 T1 1);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2, A3 T3 3);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2, A3 T3 3, A4 T4 4);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2, A3 T3 3, A4 T4 4, A5 T5 5);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2, A3 T3 3, A4 T4 4, A5 T5 5, A6 T6 6);
tuples!(A0 T0 0, A1 T1 1, A2 T2 2, A3 T3 3, A4 T4 4, A5 T5 5, A6 T6 6, A7 T7 7);

/// A host twin run while the caller waits ([`Foreign::host_sync`]): safe
/// code over the operation's buffers as slices, which may borrow the
/// caller's data and returns the operation's value.
type HostTwin<'f, 'b, RE, WE, R, W, O> = Box<
    dyn for<'h> FnOnce(<R as Reads<'b, RE>>::Host<'h>, <W as Writes<'b, WE>>::Host<'h>) -> Result<O>
        + Send
        + 'f,
>;

/// A queued host twin ([`Foreign::host`]) bound to the operation's
/// buffers' pointers: it owns everything it uses. Called only by the
/// task's stream once it reached the operation ([`queue_twin`]).
type QueuedTwin = Box<dyn FnOnce() -> Result<()> + Send>;

/// The host backend's twin of a foreign operation.
enum Twin<'f, 'b, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O> {
    /// Queued on the stream; `run` returns the value (`()`) once queued.
    Queued(QueuedTwin, O),
    /// Run in stream order while the caller waits.
    Waited(HostTwin<'f, 'b, RE, WE, R, W, O>),
}

/// A foreign operation being declared: made by [`TaskContext::foreign`],
/// given a host twin by [`Foreign::host`], run by [`Foreign::run`].
#[must_use = "a foreign operation does nothing until run"]
pub struct Foreign<'t, 'b, 'f, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O> {
    t: &'t TaskContext,
    name: &'static str,
    list: TouchList<'b>,
    reads: R::Ptrs,
    writes: W::Ptrs,
    host: Option<Twin<'f, 'b, RE, WE, R, W, O>>,
    capture_safe: bool,
    /// [`Foreign::reuse_capture`]'s key, and the value `run` returns
    /// without running the device closure (the unit).
    reuse: Option<(CallKey, O)>,
    /// [`Foreign::batchable`]'s batched form.
    batch: Option<BatchFn>,
}

impl<'b, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O> std::fmt::Debug
    for Foreign<'_, 'b, '_, RE, WE, R, W, O>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Foreign")
            .field("name", &self.name)
            .field("buffers", &self.list.touches.len())
            .field(
                "host",
                &self.host.as_ref().map(|h| match h {
                    Twin::Queued(..) => "queued",
                    Twin::Waited(_) => "waited",
                }),
            )
            .field("capture_safe", &self.capture_safe)
            .field("reuse", &self.reuse.as_ref().map(|r| &r.0))
            .field("batchable", &self.batch.is_some())
            .finish()
    }
}

impl TaskContext {
    /// Declares a foreign operation named `name` (for traces and errors)
    /// on this task's stream: a library call, or any code that queues
    /// device work itself, that reads the buffers `reads` (a tuple of `&`
    /// buffers or views, `()` for none) and writes the buffers `writes` (a
    /// tuple of `&mut` ones, `()` for none). [`Foreign::run`] hands every
    /// buffer to this stream first and stamps it after, exactly as a
    /// kernel launch does (R1, R9), so the work is ordered with every other
    /// use of those buffers and waits for nothing else (where `raw_ptr` +
    /// `cu_stream` by hand must wait for everything, R10).
    ///
    /// ```
    /// # fn main() -> gpu_sched::Result<()> {
    /// let rt = gpu_sched::Runtime::global()?;
    /// let t = rt.begin_task()?;
    /// let x = t.from_host(&[1.0f32, 2.0, 3.0])?;
    /// let mut y = t.zeros::<f32>(3)?;
    /// let op = t
    ///     .foreign("twice", (&x,), (&mut y,))
    ///     .host(|(x,): (&[f32],), (y,): (&mut [f32],)| {
    ///         y.iter_mut().zip(x).for_each(|(y, x)| *y = 2.0 * x);
    ///         Ok(())
    ///     });
    /// // SAFETY: the device closure queues nothing (a library call on
    /// // `s.raw()` over `x` and `y` would go here).
    /// unsafe { op.run(|_s, (_x,), (_y,)| Ok(()))? };
    /// if rt.backend() == gpu_sched::BackendKind::Host {
    ///     assert_eq!(t.to_vec(&y)?, [2.0, 4.0, 6.0]);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn foreign<'t, 'b, 'f, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O>(
        &'t self,
        name: &'static str,
        reads: R,
        writes: W,
    ) -> Foreign<'t, 'b, 'f, RE, WE, R, W, O> {
        let mut list = TouchList {
            touches: SmallVec::new(),
            runtimes: SmallVec::new(),
        };
        let reads = reads.touch_all(&mut list);
        let writes = writes.touch_all(&mut list);
        Foreign {
            t: self,
            name,
            list,
            reads,
            writes,
            host: None,
            capture_safe: false,
            reuse: None,
            batch: None,
        }
    }
}

/// A task's stream as a library sees it outside a foreign operation
/// ([`TaskContext::stream_slot`]): its slot and its driver handle, for
/// work that queues nothing on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSlot {
    slot: usize,
    raw: u64,
}

impl StreamSlot {
    /// The stream's slot in its runtime's stream pool, as
    /// [`ForeignStream::slot`].
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The `CUstream` as an integer, as [`ForeignStream::raw`]: to bind a
    /// library's object to (a handle made or reused for a size query).
    /// Work queued on it here is not tracked: queue work through
    /// [`TaskContext::foreign`].
    pub fn raw(&self) -> u64 {
        self.raw
    }
}

impl TaskContext {
    /// This task's stream slot and stream, outside a foreign operation
    /// (binding a stream first if the task has none, and making the
    /// runtime's context current on this thread, as [`Foreign::run`]
    /// does): for a library's work that queues nothing, such as a size
    /// query, or making the objects it keeps per stream slot
    /// ([`ForeignStream::slot`]). Unlike
    /// [`RawTask::cu_stream`](crate::raw::RawTask::cu_stream) it does not
    /// count as a use of the stream.
    ///
    /// # Errors
    ///
    /// Driver errors from getting a stream or binding the context.
    pub fn stream_slot(&self) -> Result<StreamSlot> {
        let (sid, raw) = self.bound()?;
        self.runtime().driver().bind_context()?;
        Ok(StreamSlot {
            slot: sid.index(),
            raw: raw.0,
        })
    }
}

impl<'b, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>> Foreign<'_, 'b, '_, RE, WE, R, W, ()> {
    /// Gives the operation a host twin: safe code over the same buffers as
    /// slices (`&[T]` for the reads, `&mut [T]` for the writes, in the
    /// declared order), which the host backend queues in the device
    /// closure's place: it runs on the task's stream thread, in stream
    /// order (the race detector checks its accesses as a kernel's), and
    /// [`Foreign::run`] returns once it is queued, without waiting, as on
    /// CUDA. Without a twin, the operation is
    /// [`Error::NoHostImplementation`] on the host backend. The CUDA
    /// backend never runs it. Annotate the closure's parameters:
    /// `move |(a, b): (&[f32], &[f32]), (c,): (&mut [f32],)|`.
    ///
    /// The twin runs after `run` returned, so it owns what it uses
    /// (`'static`: scalars moved in, no borrows of the caller's stack; the
    /// slices it is given are the buffers themselves) and its effects are
    /// its buffers' contents. An error it returns, or a panic, is a fault
    /// of the device, as a kernel's panic on the host backend and a
    /// library kernel's fault on CUDA are: the runtime's context is broken
    /// for good, and the task's next wait (and every later call on the
    /// runtime) returns [`Error::StickyDeviceError`] naming the operation
    /// and the twin's error. A twin that borrows the caller's data, or
    /// whose failure is an ordinary error of the call: [`Foreign::host_sync`].
    pub fn host(
        mut self,
        twin: impl for<'h> FnOnce(R::Host<'h>, W::Host<'h>) -> Result<()> + Send + 'static,
    ) -> Self {
        let (reads, writes) = (self.reads, self.writes);
        let job: QueuedTwin = Box::new(move || {
            // SAFETY: a queued twin is called only by `queue_twin`'s body,
            // on the task's stream once it reached the operation: the
            // hand-offs before it are done, so each pointer holds its
            // buffer's live elements (a buffer is freed only after a
            // hand-off from this stream, which follows the operation), and
            // nothing else touches them until the stream passed it (later
            // uses are handed to this stream first, as a kernel's; writes
            // were borrowed `&mut`, so the slices do not alias).
            let (r, w) = unsafe { (R::host(reads), W::host(writes)) };
            twin(r, w)
        });
        self.host = Some(Twin::Queued(job, ()));
        self
    }

    /// Lets a graphed scope (`gpu::Graphed`) reuse this operation's
    /// capture from the last run instead of running the device closure and
    /// capturing again, where this run's has the same name, `key` (the
    /// call's scalars and options, as words: a float by its bits) and
    /// buffers (addresses, lengths, accesses): the graph is then replayed
    /// as it is, with no capture, no update and no call of the closure. It
    /// implies [`Foreign::capture_safe`]. On the host backend, and outside
    /// a graphed scope, it changes nothing.
    ///
    /// # Safety
    ///
    /// Besides [`Foreign::run`]'s contract for a capture-safe operation:
    /// the work the device closure queues is determined by the declared
    /// buffers and `key` alone (every scalar and option of the call is in
    /// `key`), and it uses no memory besides the declared buffers but
    /// memory that lives as long as the runtime (a captured graph of it
    /// may run again at later runs, after the call that made it returned).
    pub unsafe fn reuse_capture(mut self, key: &[u64]) -> Self {
        self.capture_safe = true;
        self.reuse = Some((key.into(), ()));
        self
    }
}

impl<'b, 'f, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O: Send>
    Foreign<'_, 'b, 'f, RE, WE, R, W, O>
{
    /// Gives the operation a host twin that [`Foreign::run`] waits for (a
    /// synchronize of the task's stream, whatever else is queued on it):
    /// as [`Foreign::host`], but the twin may borrow the caller's data
    /// (`'f`) and return the operation's value, and its error is `run`'s
    /// error, its panic resumed by `run`; the runtime goes on working. For
    /// a twin whose result the host needs at once; a library call that
    /// only queues work takes [`Foreign::host`], which does not wait.
    pub fn host_sync(
        mut self,
        twin: impl for<'h> FnOnce(R::Host<'h>, W::Host<'h>) -> Result<O> + Send + 'f,
    ) -> Self {
        self.host = Some(Twin::Waited(Box::new(twin)));
        self
    }

    /// Declares that the device closure is safe to record in a CUDA graph
    /// (see the contract of [`Foreign::run`]), so the operation may run
    /// inside `TaskContext::capture` and `gpu::capture` on the CUDA
    /// backend, and in a graphed scope (`gpu::Graphed`) on both backends.
    /// Without it, a foreign operation in a capture or a graphed scope is
    /// [`Error::Capturing`] (in a graphed scope wrapped in
    /// [`Error::Context`] naming the operation). Capture-safe, as their
    /// vendors document: cuBLAS (given a workspace set before the capture,
    /// `cublasSetWorkspace`, or none), cuFFT's execution calls, cuRAND's
    /// generation on a device generator, cuSPARSE's SpMV and SpMM given
    /// their buffer; not cuSOLVER's factorizations (they synchronize), nor
    /// anything that allocates or copies synchronously.
    ///
    /// In a graphed scope the device closure runs at every run of the
    /// scope, on a side stream whose work is captured into a child graph,
    /// which the scope's graph runs as one node (set in place at the next
    /// run where its topology is the same, else the graph is built anew):
    /// the scalars and pointers it passes are each run's. On the host
    /// backend a queued twin ([`Foreign::host`]) is recorded the same way
    /// (each run's graph is launched once); a twin waited for
    /// ([`Foreign::host_sync`]) is refused there, and the host backend
    /// never captures a twin in `TaskContext::capture` (a twin runs once,
    /// a captured graph at each launch).
    pub fn capture_safe(mut self) -> Self {
        self.capture_safe = true;
        self
    }

    /// Runs the operation: hands every declared buffer to the task's
    /// stream, then, on the CUDA backend, calls `device` with the stream
    /// and the buffers' device pointers (in the declared order), or on the
    /// host backend queues the host twin on the stream ([`Foreign::host`]:
    /// `run` returns once it is queued, without waiting, as `device` does)
    /// or runs it in stream order and waits for it
    /// ([`Foreign::host_sync`]); then stamps the buffers with the stream's
    /// epoch. `device`'s error is returned as it is (use
    /// [`Error::external`] or `?` on a cudarc error).
    ///
    /// # Safety
    ///
    /// The runtime orders the buffers declared, and cannot see what
    /// `device` does. The caller guarantees that it:
    /// - queues work on the stream it is given ([`ForeignStream::raw`]) and
    ///   no other (a library handle is bound to that stream for the call,
    ///   e.g. `cublasSetStream`), and returns once the work is queued: it
    ///   neither waits for other streams' work nor keeps the stream;
    /// - reads only memory of the buffers declared, within their lengths,
    ///   and writes only memory of those declared as writes, besides memory
    ///   it owns and orders itself (a library's workspace used on this
    ///   stream only);
    /// - where [`Foreign::capture_safe`] is declared, queues only work that
    ///   CUDA's stream capture records (no synchronous calls, no
    ///   allocation, no host callbacks that touch the buffers), and while
    ///   [`ForeignStream::capturing`], uses no memory besides the declared
    ///   buffers that any other work may use while the graph lives: the
    ///   captured work runs at each launch of the graph, later, on any
    ///   stream (a library uses objects kept for captures, without a
    ///   workspace of their own or with one only that graph uses);
    /// - hands every [`StatusWord`](crate::StatusWord) whose device
    ///   pointer it gives to queued work to
    ///   [`TaskContext::check_status_later`] once `run` returned, never
    ///   drops it: a dropped word goes back to the runtime's pool while the
    ///   device may still write it, and the check of its next user could
    ///   read that write.
    ///
    /// The host twin is safe code over slices and needs no such promise.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`] for a buffer of another runtime;
    /// [`Error::Capturing`] in a capture or a graphed scope without
    /// [`Foreign::capture_safe`] (or with a host twin on the host backend
    /// in a capture, a [`Foreign::host_sync`] twin in a graphed scope);
    /// [`Error::NoHostImplementation`] on the host backend without a twin;
    /// the hand-offs' and the device closure's errors, or a
    /// [`Foreign::host_sync`] twin's. Nothing is queued when the checks
    /// fail. A queued twin ([`Foreign::host`]) fails later, at the task's
    /// next wait ([`Error::StickyDeviceError`]).
    ///
    /// # Panics
    ///
    /// A panic of a [`Foreign::host_sync`] twin is resumed here, after it
    /// was caught on the stream thread and the stream drained. A queued
    /// twin's panic is a fault of the device, as its error is.
    pub unsafe fn run(
        self,
        device: impl FnOnce(&ForeignStream<'_>, R::Ptrs, W::Ptrs) -> Result<O>,
    ) -> Result<O> {
        let Foreign {
            t,
            name,
            mut list,
            reads,
            writes,
            host,
            capture_safe,
            reuse,
            batch,
        } = self;
        let rt = t.runtime();
        for id in &list.runtimes {
            rt.check_same(*id, "a buffer of a foreign operation")?;
        }
        let capturing = t.capturing();
        if t.in_graphed_scope() {
            if !capture_safe {
                return Err(Error::Capturing {
                    what: "a foreign operation not declared capture-safe (`Foreign::capture_safe`)",
                })
                .with_context(|| format!("`{name}` in a graphed scope"));
            }
            let batch = batch.zip(reuse.as_ref()).map(|(batched, (key, _))| {
                Arc::new(BatchTag {
                    routine: batched as usize,
                    form: Box::new(batched),
                    key: key.clone(),
                })
            });
            let reuse = reuse.map(|r| (r, batch));
            return record(t, name, &mut list, (reads, writes), host, reuse, device);
        }
        match rt.backend() {
            BackendKind::Cuda => {
                if capturing && !capture_safe {
                    return Err(Error::Capturing {
                        what: "a foreign operation not declared capture-safe",
                    });
                }
                // The caller's contract: `device` queues only on `raw` and
                // touches only the declared buffers, which `tracked`
                // handed to this stream and stamps.
                t.tracked(name, &mut list.touches, |_, raw| {
                    // The closure calls the driver API itself: the
                    // runtime's context must be current on this thread.
                    rt.driver().bind_context()?;
                    let slot = t.sid().index();
                    device(
                        &ForeignStream {
                            raw: raw.0,
                            slot,
                            rt,
                            capturing,
                        },
                        reads,
                        writes,
                    )
                })
            }
            BackendKind::Host => {
                let Some(twin) = host else {
                    return Err(Error::NoHostImplementation {
                        kernel: name.to_owned(),
                    });
                };
                if capturing {
                    return Err(Error::Capturing {
                        what: "a foreign operation's host twin",
                    });
                }
                let twin = match twin {
                    Twin::Queued(job, value) => {
                        // SAFETY: `mem` lists every declared buffer (the
                        // pointers `job` was bound to), handed to `raw` by
                        // `tracked` and stamped with this stream after:
                        // each stays allocated, and untouched by other
                        // streams, until the stream passed the operation.
                        t.tracked(name, &mut list.touches, |mem, raw| unsafe {
                            queue_twin(t, name, raw, mem, job)
                        })?;
                        return Ok(value);
                    }
                    Twin::Waited(twin) => twin,
                };
                let outcome = t.tracked(name, &mut list.touches, |mem, raw| {
                    // SAFETY: `mem` lists every declared buffer, handed to
                    // `raw` by `tracked`; `run_twin` returns only once the
                    // twin has run or can never run.
                    Ok(unsafe { run_twin::<RE, WE, R, W, O>(t, raw, mem, twin, reads, writes) })
                })?;
                match outcome {
                    Ok(r) => r,
                    Err(Payload(p)) => resume_unwind(p),
                }
            }
        }
    }
}

mod batch;
mod graphed;
mod twin;

pub(crate) use batch::batched_node;
pub use batch::{BatchCall, BatchFn};

use graphed::record;
use twin::{queue_twin, run_twin, Payload};
