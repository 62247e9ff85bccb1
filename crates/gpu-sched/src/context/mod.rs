//! A task's handle on its stream: the type, its start and end, its stream
//! (R3, DESIGN "Streams are a resource") and its fences. The operations are in the files beside this
//! one: `tracked.rs` (the path every operation takes and its hand-offs,
//! R1, R9), `memory.rs` (allocation), `copy.rs` (copies), `host.rs`
//! (synchronizes and pointers for host code, R10, R11), `launch.rs` (the
//! one path of every kernel launch), `foreign.rs` (library calls and other
//! work queued by hand, DESIGN "Graphs without capture by hand"), `event.rs` (records and waits of events and
//! fences, R4-R8), `graph.rs` (captures, R12), `gate.rs` (blocking on a
//! gate).

use crate::buffer::{Buffer, DeviceRepr};
use crate::driver::{MemAccess, Nodes, RawStream};
use crate::error::{Error, Result};
use crate::graph::{CaptureHandle, ScopeCapture};
use crate::pool::Tail;
use crate::runtime::Runtime;
use gpu_epoch::{StreamId, Task};
use std::marker::PhantomData;

mod checks;
mod copy;
mod event;
mod foreign;
mod graph;
mod graphed;
mod host;
mod interop;
mod launch;
mod memory;
mod raw;
mod tracked;

pub use checks::Unchecked;
pub(crate) use foreign::batched_node;
pub use foreign::{
    BatchCall, BatchFn, DevicePtr, DevicePtrMut, Foreign, ForeignStream, ReadArg, Reads,
    StreamSlot, TouchList, WriteArg, Writes,
};
pub use graph::GraphLaunch;
pub use raw::RawTask;
pub(crate) use tracked::{Touch, MAX_TOUCHES};

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
    pub(super) rt: Runtime,
    /// The ledger's task, made when first needed (its stream's binding):
    /// a task that never submits costs the ledger nothing.
    pub(super) task: std::cell::OnceCell<Task>,
    /// The task's stream, once it has one: bound at the first operation
    /// that needs it (DESIGN "Streams are a resource"), so a task that never submits GPU work holds none.
    pub(super) slot: std::cell::Cell<Option<(StreamId, RawStream)>>,
    /// Fences the task is ordered after (its spawn's, its joined tasks'),
    /// waited for on the device when it binds its stream: a task that never
    /// submits never waits.
    pub(super) after: std::cell::RefCell<smallvec::SmallVec<[crate::fence::Fence; 1]>>,
    /// While capturing: the memory the captured operations touch (R12).
    pub(super) capture_log: std::cell::RefCell<Option<Vec<MemAccess>>>,
    /// The scope capture this task joined, or began (`crate::capture`).
    pub(super) capture: std::cell::RefCell<Option<std::sync::Arc<ScopeCapture>>>,
    /// In a scope capture: the graph nodes of the task's last operation and
    /// of the fences it waited for since, which its next operation follows.
    pub(super) chain: std::cell::RefCell<Nodes>,
    /// In a scope capture: the task's name, the same from one run of the
    /// scope to the next (its spawner's key and its place among the
    /// spawner's children, `capture_handle`), which with `ops` names each
    /// operation of a graphed scope (DESIGN "Graphs without capture by hand") whatever order the tasks ran in.
    pub(super) key: std::cell::Cell<u64>,
    /// Tasks this one started in its capture (`capture_handle`).
    pub(super) spawned: std::cell::Cell<u32>,
    /// Operations this task recorded in a graphed scope.
    pub(super) ops: std::cell::Cell<u32>,
    /// Whether the task submitted anything on its stream (or handed the
    /// stream out raw): see [`TaskContext::has_submitted`].
    pub(super) submitted: std::cell::Cell<bool>,
    /// Whether the stream may have work in flight: it was not idle when the
    /// task got it, or the task submitted since it last synchronized it.
    pub(super) pending: std::cell::Cell<bool>,
    /// The stream was handed out raw ([`RawTask::cu_stream`](crate::raw::RawTask::cu_stream)): work the
    /// runtime does not see may be on it.
    /// Set while tracked operations are stamped whose submission comes
    /// later ([`TaskContext::submitting_later`]): no close after each.
    pub(super) submit_later: std::cell::Cell<bool>,
    pub(super) raw_used: std::cell::Cell<bool>,
    /// The priority of the stream the task takes ([`TaskContext::set_priority`]).
    pub(super) priority: std::cell::Cell<crate::Priority>,
    /// The task's name ([`TaskContext::set_name`]).
    pub(super) name: std::cell::RefCell<Option<std::sync::Arc<str>>>,
    /// Results of library operations to check at the next host wait
    /// (`checks.rs`; what a check is: `fence/checks.rs`).
    pub(super) checks: std::cell::RefCell<Vec<crate::fence::Pending>>,
    pub(super) _not_sync: PhantomData<std::cell::Cell<()>>,
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
    /// capture (`capture` from its [`TaskHooks::capture_handle`](crate::plumbing::TaskHooks::capture_handle)): the new
    /// task joins that capture (its work goes into the graph). `gpu`'s pool
    /// starts spawned and joined tasks this way. Not for direct use.
    ///
    /// # Errors
    ///
    /// As [`Runtime::begin_task`]; [`Error::Unsupported`] for a task of
    /// another device than the capture's; [`Error::CaptureEnded`].
    pub(crate) fn begin_task_in(&self, capture: &CaptureHandle) -> Result<TaskContext> {
        self.driver().check_sticky()?;
        let (capture, key) = (capture.0.clone(), capture.1);
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
            key: std::cell::Cell::new(key),
            spawned: std::cell::Cell::new(0),
            ops: std::cell::Cell::new(0),
            submitted: std::cell::Cell::new(false),
            pending: std::cell::Cell::new(false),
            raw_used: std::cell::Cell::new(false),
            submit_later: std::cell::Cell::new(false),
            priority: std::cell::Cell::new(crate::Priority::Normal),
            name: std::cell::RefCell::new(None),
            checks: Default::default(),
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
    /// operation that needs one (DESIGN "Streams are a resource").
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

    /// Sets the priority of the stream this task takes at its first GPU
    /// operation (a task takes its stream then: DESIGN "Streams are a
    /// resource"): [`crate::Priority::High`] for the critical path. Returns
    /// whether it applies: `false` once the task holds a stream (which
    /// keeps its priority), and in a scope capture or graphed scope (the
    /// task's work goes into the graph; the graph's launch has its
    /// stream's priority). The pool gives a task a stream of its priority
    /// where one is free or can be made, else any, as it would a task of
    /// the other priority: a priority never costs a task its stream.
    pub fn set_priority(&self, priority: crate::Priority) -> bool {
        if self.has_stream() || self.capture.borrow().is_some() {
            return false;
        }
        self.priority.set(priority);
        true
    }

    /// The priority asked for with [`TaskContext::set_priority`].
    pub fn priority(&self) -> crate::Priority {
        self.priority.get()
    }

    /// Names the task (`"system 7"`): the failures of library results it
    /// leaves to check from now on say so ([`crate::Error::InTask`]),
    /// wherever they are reported; in `gpu`, so does its body's error
    /// (`s.task().name(..)`).
    pub fn set_name(&self, name: impl Into<std::sync::Arc<str>>) {
        *self.name.borrow_mut() = Some(name.into());
    }

    /// The task's name, if it was given one.
    pub fn name(&self) -> Option<std::sync::Arc<str>> {
        self.name.borrow().clone()
    }

    /// Whether this task has submitted anything on its stream (an
    /// operation, a wait, a record, a synchronize) or handed the stream out
    /// through [`RawTask::cu_stream`](crate::raw::RawTask::cu_stream). A task that has not is ordered
    /// after nothing of its own: a fence on its stream would order another
    /// task after nothing, and `spawn` and `join` skip it.
    #[inline]
    pub fn has_submitted(&self) -> bool {
        self.submitted.get()
    }

    /// Whether this task records for a serial graphed scope
    /// (`gpu::Graphed::serial`): `gpu` runs its spawns and joins at once,
    /// on this thread. Unlike [`TaskHooks::capture_handle`](crate::plumbing::TaskHooks::capture_handle), names no
    /// child.
    pub(crate) fn records_serially(&self) -> bool {
        self.capture.borrow().as_ref().is_some_and(|c| c.serial)
    }

    /// The scope capture this task's spawned jobs join (none outside one);
    /// for `gpu`'s pool, which enters it around each job.
    pub(crate) fn capture_handle(&self) -> CaptureHandle {
        let cap = self.capture.borrow().clone();
        if cap.is_none() {
            return CaptureHandle::default();
        }
        // The child's key: this task's and its place among this task's
        // children (a task starts them in its program order), mixed
        // (SplitMix64's finalizer).
        let n = self.spawned.get();
        self.spawned.set(n + 1);
        let mut z = self.key.get() ^ (u64::from(n) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        CaptureHandle(cap, z ^ (z >> 31))
    }

    /// This task's next operation's name in a graphed scope (DESIGN "Graphs without capture by hand").
    pub(crate) fn next_op_key(&self) -> (u64, u32) {
        let n = self.ops.get();
        self.ops.set(n.wrapping_add(1));
        (self.key.get(), n)
    }

    /// Whether this task joined (or began) a scope capture.
    pub(crate) fn in_scope_capture(&self) -> bool {
        self.capture.borrow().is_some()
    }

    /// The ledger's task.
    #[inline]
    pub(crate) fn task(&self) -> &Task {
        self.task.get_or_init(|| self.rt.ledger_rw().begin_task())
    }

    /// The ledger's id of this task.
    pub fn task_id(&self) -> gpu_epoch::TaskId {
        self.task().id()
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
        self.rt.ledger_rw().bind(self.task(), b.0);
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

    /// DESIGN "Streams are a resource": takes a stream from the pool for this task (R3, R13), then waits
    /// on the device for the fences the task is ordered after.
    #[cold]
    fn bind_stream(&self) -> Result<(StreamId, RawStream)> {
        self.bind_stream_as(false, None)
    }

    /// Binds a stream to this task (of no capture, with none yet) that no
    /// other task holds while it does ([`crate::pool::StreamPool`]'s
    /// `acquire_own`): a communicator's task (DESIGN "Beyond one GPU").
    ///
    /// # Errors
    ///
    /// [`gpu_epoch::LedgerError::TooManyStreams`] where every stream is
    /// held; driver errors.
    pub(crate) fn bind_own_stream(&self) -> Result<()> {
        debug_assert!(self.slot.get().is_none() && self.capture.borrow().is_none());
        self.bind_stream_as(true, None).map(drop)
    }

    /// Binds this task's first stream (it has none) for an operation that
    /// writes a buffer (at the device address `follow.1`) last written by
    /// `follow.0`: that use's stream if no task holds it, its end is not
    /// known and it holds stamps of that buffer alone (taken over as it
    /// is, with no driver call: the write would wait for all of it
    /// anyway), else one as [`TaskContext::bind_stream`] takes (DESIGN
    /// "Streams are a resource").
    pub(crate) fn bind_following(&self, follow: (gpu_epoch::Use, u64)) -> Result<()> {
        debug_assert!(self.slot.get().is_none());
        self.bind_stream_as(false, Some(follow)).map(drop)
    }

    /// [`TaskContext::bind_stream`]; a stream of its own if `own`, `follow`'s
    /// if it can be had (see [`TaskContext::bind_following`]).
    fn bind_stream_as(
        &self,
        own: bool,
        follow: Option<(gpu_epoch::Use, u64)>,
    ) -> Result<(StreamId, RawStream)> {
        let rt = &self.rt;
        if let Some(cap) = self.capture.borrow().clone() {
            // A task of a scope capture submits to the capturing stream.
            cap.check_open()?;
            rt.ledger_rw().bind(self.task(), cap.slot.0);
            self.slot.set(Some(cap.slot));
            self.pending.set(true);
            self.wait_after()?;
            return Ok(cap.slot);
        }
        let (stream, idle) = if own {
            rt.core()
                .streams
                .acquire_own(self.rt.driver(), rt.ledger_rw())?
        } else if let Some(u) = follow {
            rt.core().streams.acquire_following(
                self.rt.driver(),
                rt.ledger_rw(),
                self.priority.get(),
                u,
            )?
        } else {
            rt.core()
                .streams
                .acquire_with(self.rt.driver(), rt.ledger_rw(), self.priority.get())?
        };
        rt.ledger_rw().bind(self.task(), stream);
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
        self.adopt_checks(&fence);
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
            let after = self.after.borrow();
            if after.is_empty() {
                // The common case of a task with no GPU work (B10).
                return Ok(smallvec::SmallVec::new());
            }
            Ok(after.iter().cloned().collect())
        }
    }
}

impl Drop for TaskContext {
    fn drop(&mut self) {
        self.conclude_at_drop();
        if self.capture.get_mut().is_some() {
            // A task of a scope capture: the stream and the ledger task are
            // the capture's, which ends them (`capture_scope`).
            return;
        }
        let rt = &self.rt;
        let Some((s, _)) = self.slot.get() else {
            // Never bound a stream: nothing to close or give back (the
            // fences it would have waited for go back with `after`).
            if let Some(t) = self.task.get() {
                rt.ledger_rw().finish_task(t);
            }
            return;
        };
        if self.submitted.get() {
            // R2 at the task's end: its last epoch closes while the task
            // still owns the stream, so a later hand-off's device wait on
            // this stream learns it (closed_counted), and a synchronize after
            // that wait completes it. Without it, `Buffer::zeros` then
            // `to_vec` left the next writer a needless device wait (DESIGN "Soundness").
            rt.ledger_rw().close(self.task(), s);
        }
        rt.ledger_rw().finish_task(self.task());
        let tail = if rt.ledger_rw().is_shared(s) || self.capture_log.borrow().is_some() {
            // Another live task may have work on it (DESIGN "Streams are a resource"), or a write now
            // would go into the graph: ask the driver when it comes back.
            Tail::Unknown
        } else if !self.pending.get() && !self.raw_used.get() {
            Tail::Idle
        } else {
            rt.core().streams.end_of_work(self.rt.driver(), s)
        };
        rt.core()
            .streams
            .release(s, tail, self.rt.driver(), rt.ledger_rw());
    }
}
