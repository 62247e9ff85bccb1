//! Completion as futures, for async code (a tokio service, any executor):
//! a [`Fence`] is awaited (`fence.await`, [`Fence::wait_async`]), and a
//! copy to the host is a future that owns its destination
//! ([`TaskContext::to_vec_async`], [`crate::Buffer::to_vec_async`]).
//! Runtime-agnostic: no executor is named, a future is woken through the
//! [`Waker`] it was polled with.
//!
//! # How a future is woken
//!
//! Nothing polls and no executor thread blocks. A runtime that has a
//! future pending keeps one waiter thread and one stream of its own (the
//! *notifier*). A future whose event is not complete when polled
//! registers it: the notifier stream waits for the event and records an
//! event of the waiter's, made with blocking synchronization (CUDA's
//! `CU_EVENT_BLOCKING_SYNC`: the thread sleeps in the driver rather than
//! spinning); the waiter thread sleeps on the oldest such event, then
//! wakes the future. The notifier stream runs the registrations in order,
//! so the oldest is the first to complete: a future is woken once its
//! work and the work of every wait registered before it (on that device)
//! are done. The thread and the stream go away after 100 ms without a
//! registration (and with them the waiter's hold on the runtime).
//!
//! A failed wait (a broken device) wakes the future too; it then asks the
//! driver and returns the error, never waiting on the polling thread.
//!
//! # Dropped before completion
//!
//! A [`FenceFuture`] dropped while registered leaves its registration to
//! the waiter, without its waker: the waiter drops it once the event
//! completes. A [`ToVecFuture`]'s page-locked destination, which the
//! device may still be writing, is handed to the waiter, which gives it
//! back to the runtime's page-locked cache once the copy is done (never
//! in the drop, which does not block); on a broken device it is never
//! given back.

use crate::buffer::{Buffer, DeviceRepr, DeviceSlice};
use crate::context::{TaskContext, Touch};
use crate::driver::{RawEvent, RawStream};
use crate::error::{Error, Result};
use crate::fence::carried_fences;
use crate::fence::Fence;
use crate::runtime::Runtime;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How long an idle waiter thread stays for the next registration.
const LINGER: Duration = Duration::from_millis(100);

/// What runs once a wait ended, for a future dropped before: its argument
/// says whether the waited-for event completed.
type Orphan = Box<dyn FnOnce(bool) + Send>;

/// One registered wait, completed by the waiter thread.
#[derive(Default)]
struct Slot(Mutex<SlotState>);

#[derive(Default)]
struct SlotState {
    /// Once the wait ended: whether it saw the event complete.
    done: Option<bool>,
    /// The waker of the future's last poll.
    waker: Option<Waker>,
    /// The cleanup of a future dropped before the wait ended.
    orphan: Option<Orphan>,
}

impl Slot {
    /// Whether the wait ended (and how); if not, `waker` is woken when it
    /// does.
    fn poll(&self, waker: &Waker) -> Option<bool> {
        let mut st = self.0.lock();
        if st.done.is_none() && !st.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.waker = Some(waker.clone());
        }
        st.done
    }

    /// The future went away: no waker is kept; `orphan` runs once the wait
    /// ends (here, if it has).
    fn abandon(&self, orphan: Option<Orphan>) {
        let mut st = self.0.lock();
        st.waker = None;
        match st.done {
            Some(ok) => {
                drop(st);
                if let Some(o) = orphan {
                    o(ok);
                }
            }
            None => st.orphan = orphan,
        }
    }

    /// The wait ended: wakes the future, or runs the cleanup of a dropped
    /// one.
    fn complete(&self, ok: bool) {
        let (waker, orphan) = {
            let mut st = self.0.lock();
            st.done = Some(ok);
            (st.waker.take(), st.orphan.take())
        };
        if let Some(w) = waker {
            // A waker is the caller's code: its panic must not end the
            // waiter thread, which every later future of the runtime needs
            // (the panicking future is then not polled again; the others
            // are).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
        }
        if let Some(o) = orphan {
            o(ok);
        }
    }
}

/// A registration: the waiter's event recorded after the awaited one.
struct Entry {
    ev: RawEvent,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Queue {
    /// In the notifier stream's order.
    entries: VecDeque<Entry>,
    /// Blocking events seen complete, for the next registrations.
    free: Vec<RawEvent>,
}

/// A runtime's waiter: its thread, its notifier stream, the registrations.
struct Waiter {
    rt: Runtime,
    stream: RawStream,
    queue: Mutex<Queue>,
    cv: Condvar,
}

/// The waiters of the runtimes that have futures pending. Lock order: this
/// one, then a waiter's queue.
static WAITERS: Mutex<Vec<Arc<Waiter>>> = Mutex::new(Vec::new());

/// Registers a wait for `ev`'s last record (an event of `rt`): the slot
/// completes once it is done, or once waiting for it failed.
fn register(rt: &Runtime, ev: RawEvent) -> Result<Arc<Slot>> {
    let mut all = WAITERS.lock();
    let w = match all.iter().find(|w| w.rt.same(rt)) {
        Some(w) => w.clone(),
        None => {
            let stream = rt.driver().create_stream()?;
            let w = Arc::new(Waiter {
                rt: rt.clone(),
                stream,
                queue: Mutex::default(),
                cv: Condvar::new(),
            });
            let t = w.clone();
            let spawned = std::thread::Builder::new()
                .name("gpu-waiter".into())
                .spawn(move || t.run());
            if let Err(e) = spawned {
                let _ = rt.driver().destroy_stream(stream);
                return Err(Error::Io {
                    during: "starting the waiter thread of async completions",
                    source: Arc::new(e),
                });
            }
            all.push(w.clone());
            w
        }
    };
    // Under the queue's lock: the entries stay in the notifier stream's
    // order. The waiters' lock is held on, so the thread does not leave
    // before the entry is in (it leaves under both locks).
    let mut q = w.queue.lock();
    let d = rt.driver();
    let bev = match q.free.pop() {
        Some(e) => e,
        None => d.create_blocking_event()?,
    };
    if let Err(e) = d
        .wait_event(w.stream, ev)
        .and_then(|()| d.record(bev, w.stream))
    {
        // Not recorded (or recorded after a wait that may not be): it is
        // left unused, never waited for.
        let _ = d.destroy_event(bev);
        return Err(e);
    }
    let slot = Arc::new(Slot::default());
    q.entries.push_back(Entry {
        ev: bev,
        slot: slot.clone(),
    });
    w.cv.notify_one();
    Ok(slot)
}

impl Waiter {
    /// The thread: sleeps on the oldest registration's event, completes
    /// it, and leaves once idle for [`LINGER`].
    fn run(self: Arc<Self>) {
        loop {
            let next = {
                let mut q = self.queue.lock();
                loop {
                    if let Some(e) = q.entries.front() {
                        break Some((e.ev, e.slot.clone()));
                    }
                    if self.cv.wait_for(&mut q, LINGER).timed_out() && q.entries.is_empty() {
                        break None;
                    }
                }
            };
            let Some((ev, slot)) = next else {
                // Idle: leave, unless a registration came in meanwhile
                // (registrations hold the waiters' lock until theirs is in).
                let mut all = WAITERS.lock();
                if !self.queue.lock().entries.is_empty() {
                    continue;
                }
                all.retain(|w| !Arc::ptr_eq(w, &self));
                break;
            };
            let ok = self.rt.driver().event_sync(ev).is_ok();
            {
                let mut q = self.queue.lock();
                let e = q.entries.pop_front().expect("the entry waited for");
                if ok {
                    q.free.push(e.ev);
                } else {
                    // Perhaps still recorded: not used again.
                    let _ = self.rt.driver().destroy_event(e.ev);
                }
            }
            slot.complete(ok);
        }
        let free = std::mem::take(&mut self.queue.lock().free);
        for e in free {
            let _ = self.rt.driver().destroy_event(e);
        }
        // Nothing is pending on it: every recorded event was seen complete.
        let _ = self.rt.driver().destroy_stream(self.stream);
    }
}

/// Whether `ev` (of `rt`) completed, without waiting.
fn query(rt: &Runtime, ev: RawEvent) -> Result<bool> {
    rt.driver().event_query(ev)
}

/// The first fence `fence`'s completion still waits for: itself, then
/// those of the results it carries (other tasks' work, checked with it).
/// `None` when all are done (a fence of a scope capture: at once). The
/// fence is returned, not its event, so that the caller holds it (and its
/// pooled event out of the pool) until the wait is registered.
fn first_unfinished(fence: &Fence) -> Result<Option<Fence>> {
    if fence.shared.nodes.is_some() {
        return Ok(None);
    }
    if !query(fence.runtime(), fence.event().raw)? {
        return Ok(Some(fence.clone()));
    }
    let carried = carried_fences(&fence.shared.checks.lock());
    for f in carried {
        if let Some(ev) = f.shared.ev.as_ref() {
            if !query(&f.shared.rt, ev.raw)? {
                return Ok(Some(f));
            }
        }
    }
    Ok(None)
}

/// The completion of a [`Fence`]: `fence.await` or [`Fence::wait_async`].
/// Returns what [`Fence::synchronize`] returns (the results of library
/// operations the fence carries checked, a failed factorization's error
/// among them), without blocking the polling thread: see the module's
/// documentation (`gpu_sched::future` in the source) for how it is woken.
///
/// Dropped before completion, the fence goes as any dropped fence: the
/// results it carries are deferred to the runtime's reclaim path (and a
/// failure among them to [`Runtime::synchronize`]).
#[must_use = "a future does nothing unless awaited"]
pub struct FenceFuture {
    /// `None` once completed.
    fence: Option<Fence>,
    /// The registered wait, while one is.
    slot: Option<Arc<Slot>>,
}

impl std::fmt::Debug for FenceFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FenceFuture")
            .field("done", &self.fence.is_none())
            .field("registered", &self.slot.is_some())
            .finish()
    }
}

impl Future for FenceFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(slot) = &this.slot {
                if slot.poll(cx.waker()).is_none() {
                    return Poll::Pending;
                }
                this.slot = None;
            }
            let fence = this
                .fence
                .as_ref()
                .expect("a FenceFuture polled after it completed");
            let next = first_unfinished(fence).and_then(|n| match n {
                None => Ok(None),
                Some(f) => register(f.runtime(), f.event().raw).map(Some),
            });
            match next {
                // Every event is done: the synchronize does not wait.
                Ok(None) => {
                    let f = this.fence.take().expect("checked above");
                    return Poll::Ready(f.synchronize());
                }
                Ok(Some(slot)) => this.slot = Some(slot),
                Err(e) => {
                    this.fence = None;
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

impl Drop for FenceFuture {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.abandon(None);
        }
    }
}

impl Fence {
    /// The fence's completion as a future (what `fence.await` does): a
    /// [`Fence::synchronize`] that does not block the polling thread.
    pub fn wait_async(self) -> FenceFuture {
        FenceFuture {
            fence: Some(self),
            slot: None,
        }
    }
}

impl IntoFuture for Fence {
    type Output = Result<()>;
    type IntoFuture = FenceFuture;

    /// [`Fence::wait_async`].
    fn into_future(self) -> FenceFuture {
        self.wait_async()
    }
}

/// A copy to the host in flight, into page-locked memory it owns.
struct Download<T: DeviceRepr> {
    rt: Runtime,
    /// `None` once given back (or handed to the waiter).
    ptr: Option<*mut T>,
    len: usize,
    /// What was taken from the page-locked cache.
    bytes: usize,
    /// After the copy.
    fence: Fence,
    slot: Option<Arc<Slot>>,
}

/// A copy to the host in flight, as a future of its data:
/// [`TaskContext::to_vec_async`], [`crate::Buffer::to_vec_async`]. The
/// device writes page-locked memory the future owns (a copy into pageable
/// memory would block the thread that queues it); once the copy is done,
/// the future copies it into the `Vec` it returns and gives the memory
/// back to the runtime's cache.
///
/// `Send` and `'static`: it can be returned from a scope and awaited on
/// any executor. Dropped before the copy is done, it never frees the
/// memory under the copy: the memory goes to the runtime's waiter thread,
/// which gives it back once the copy is done (see the module's
/// documentation, `gpu_sched::future` in the source).
#[must_use = "a future does nothing unless awaited"]
pub struct ToVecFuture<T: DeviceRepr> {
    inner: Option<Download<T>>,
}

// SAFETY: the page-locked memory `ptr` points to is owned by this value
// (nothing else holds its address but the queued copy); the host reads it
// only in `poll`, through `&mut self`, after the copy completed, and `T`
// is `Send`. Every other field is `Send`.
unsafe impl<T: DeviceRepr> Send for ToVecFuture<T> {}

impl<T: DeviceRepr> std::fmt::Debug for ToVecFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToVecFuture")
            .field("len", &self.inner.as_ref().map(|d| d.len))
            .finish_non_exhaustive()
    }
}

impl<T: DeviceRepr> Future for ToVecFuture<T> {
    type Output = Result<Vec<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Vec<T>>> {
        let this = self.get_mut();
        loop {
            let d = this
                .inner
                .as_mut()
                .expect("a ToVecFuture polled after it completed");
            if let Some(slot) = &d.slot {
                if slot.poll(cx.waker()).is_none() {
                    return Poll::Pending;
                }
                d.slot = None;
            }
            let ev = d.fence.event().raw;
            match query(&d.rt, ev) {
                Ok(true) => {
                    let d = this.inner.take().expect("checked above");
                    return Poll::Ready(d.finish());
                }
                // On an error the memory stays with the future: its drop
                // hands it on or keeps it (the copy may not be done).
                Ok(false) => match register(&d.rt, ev) {
                    Ok(slot) => d.slot = Some(slot),
                    Err(e) => return Poll::Ready(Err(e)),
                },
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl<T: DeviceRepr> Download<T> {
    /// After the copy's fence completed: the data, the memory given back.
    fn finish(mut self) -> Result<Vec<T>> {
        let ptr = self.ptr.take().expect("the memory is the future's");
        // Done (queried): the synchronize does not wait; it records the
        // completion in the ledger and reports a driver error.
        let r = self.fence.clone().synchronize().map(|()| {
            // SAFETY: the copy into the `len` elements at `ptr` completed
            // (its fence did), so nothing else touches them; they were
            // written with the source's `T`s (`DeviceRepr`: plain data).
            unsafe { std::slice::from_raw_parts(ptr, self.len) }.to_vec()
        });
        // SAFETY: `ptr` came from `pinned_take` with `bytes`, is given back
        // once (taken out of `self.ptr`), and the copy through it is done;
        // the slice above was copied out and is gone.
        unsafe { self.rt.pinned_give(ptr as *mut u8, self.bytes) };
        r
    }
}

/// A dropped download's memory, until the copy into it is done.
struct Orphaned {
    rt: Runtime,
    ptr: usize,
    bytes: usize,
    fence: Fence,
}

impl Orphaned {
    /// Gives the memory back if the copy is done (`done`, or the event
    /// says so); never otherwise (a broken device may still write it).
    fn release(self, done: bool) {
        let done = done || matches!(query(&self.rt, self.fence.event().raw), Ok(true));
        if done {
            // SAFETY: the memory came from `pinned_take` with `bytes` and
            // is given back once (only the orphan holds it); the copy into
            // it completed and no reference to it is left.
            unsafe { self.rt.pinned_give(self.ptr as *mut u8, self.bytes) };
        }
    }
}

impl<T: DeviceRepr> Drop for Download<T> {
    fn drop(&mut self) {
        let Some(ptr) = self.ptr.take() else {
            return;
        };
        let orphan = Orphaned {
            rt: self.rt.clone(),
            ptr: ptr as usize,
            bytes: self.bytes,
            fence: self.fence.clone(),
        };
        if let Some(slot) = self.slot.take() {
            slot.abandon(Some(Box::new(move |ok| orphan.release(ok))));
            return;
        }
        let ev = self.fence.event().raw;
        match query(&self.rt, ev) {
            Ok(true) => orphan.release(true),
            Ok(false) => match register(&self.rt, ev) {
                Ok(slot) => slot.abandon(Some(Box::new(move |ok| orphan.release(ok)))),
                // Nobody could tell when the copy is done: kept for good.
                Err(_) => std::mem::forget(orphan),
            },
            Err(_) => std::mem::forget(orphan),
        }
    }
}

impl TaskContext {
    /// Copies `src` to the host asynchronously, as a future of a new `Vec`
    /// (a [`TaskContext::to_vec`] that does not wait): the copy is queued
    /// now, on this task's stream, into page-locked memory the future
    /// owns; awaiting it blocks no thread. The future is `Send` and
    /// `'static`: return it from a scope, await it anywhere.
    ///
    /// Unlike [`TaskContext::to_vec`], the future checks no results of the
    /// task's library operations: they stay with the task (its next host
    /// wait, its scope's end). Await a fence for those
    /// ([`Fence::wait_async`]).
    ///
    /// Any executor drives it; here the smallest one, which parks the
    /// thread until the waker unparks it (tokio's `.await` works alike):
    ///
    /// ```
    /// use std::future::Future;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake};
    ///
    /// struct Unpark(std::thread::Thread);
    /// impl Wake for Unpark {
    ///     fn wake(self: Arc<Self>) {
    ///         self.0.unpark();
    ///     }
    /// }
    ///
    /// fn block_on<F: Future>(f: F) -> F::Output {
    ///     let mut f = std::pin::pin!(f);
    ///     let waker = Arc::new(Unpark(std::thread::current())).into();
    ///     let mut cx = Context::from_waker(&waker);
    ///     loop {
    ///         match f.as_mut().poll(&mut cx) {
    ///             Poll::Ready(v) => return v,
    ///             Poll::Pending => std::thread::park(),
    ///         }
    ///     }
    /// }
    ///
    /// # fn main() -> gpu_sched::Result<()> {
    /// let rt = gpu_sched::Runtime::host()?;
    /// let t = rt.begin_task()?;
    /// let buf = t.from_host(&[1u32, 2, 3])?;
    /// let data = t.to_vec_async(&buf)?; // queued, not waited for
    /// drop(t);
    /// assert_eq!(block_on(data)?, [1, 2, 3]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Capturing`] in a capture; [`Error::WrongDevice`]; driver
    /// errors (out of page-locked memory).
    pub fn to_vec_async<T: DeviceRepr>(
        &self,
        src: &(impl DeviceSlice<T> + ?Sized),
    ) -> Result<ToVecFuture<T>> {
        self.check(src, "the source buffer")?;
        self.host_memory_outside_capture("copying to host memory")?;
        let (len, bytes) = (src.len(), src.bytes().max(1));
        let dst = self.rt.pinned_take(bytes)? as *mut T;
        let (ptr, drv) = (src.device_ptr(), self.rt.driver());
        let n = src.bytes();
        // SAFETY: `tracked` handed `src` to this stream for a read, and its
        // buffer's drop frees it only after a hand-off from this stream
        // (X4). `dst` is page-locked memory of `n` bytes or more, which the
        // future made below owns: nothing else touches it until the copy's
        // fence completed (its poll and its drop see to that); no capture
        // takes it (checked above).
        let queued = self.tracked("dtoh", &mut [Touch::read(src)], |_, raw| unsafe {
            drv.copy_dtoh(dst as *mut u8, ptr, n, raw)
        });
        // Even after a failure the copy may be queued: the memory goes back
        // only after a fence that covers it, or never.
        let fence = match self.fence() {
            Ok(f) => f,
            Err(e) => {
                // Nothing tells when the copy is done: the memory is kept
                // for good (as a `Staging`'s whose copy is lost).
                return Err(queued.err().unwrap_or(e));
            }
        };
        let d = Download {
            rt: self.rt.clone(),
            ptr: Some(dst),
            len,
            bytes,
            fence,
            slot: None,
        };
        // On a failure, `d`'s drop gives the memory back once the fence says
        // nothing writes it any more.
        queued?;
        Ok(ToVecFuture { inner: Some(d) })
    }
}

impl<T: DeviceRepr> Buffer<T> {
    /// [`TaskContext::to_vec_async`] in a task of its own: the copy is
    /// queued now, after the buffer's writers, and the future is its data.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::to_vec_async`].
    pub fn to_vec_async(&self) -> Result<ToVecFuture<T>> {
        self.rt.begin_task()?.to_vec_async(self)
    }
}
