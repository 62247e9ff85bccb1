//! Hand-off decisions (R9, R11) and ordered frees (X4): the ledger's
//! decision for a buffer that moves to a stream, carried out by a device
//! wait or a host wait ([`wait_streams`], which every tracked operation of
//! `context/` and the free here go through), and freeing a buffer's
//! memory once every use is ordered before the free; buffers' drops free
//! through this file.

use crate::driver::{MemAccess, RawEvent, RawStream};
use crate::error::{Error, Result};
use crate::runtime::{device_bytes, Runtime};
use gpu_epoch::{Access, Decision, StreamId, Task, Uses};

impl Runtime {
    /// X4: frees `ptr` in stream order on the reclaim stream, after a
    /// hand-off of its uses (so every reader and writer is ordered first).
    /// Never blocks.
    ///
    /// # Safety
    ///
    /// `ptr` is a buffer's allocation of `device_bytes(bytes)` by this
    /// runtime's driver ([`TaskContext::alloc`]), freed once; `uses` are its
    /// uses (every operation on it stamped them, or they are unknown), and
    /// no operation on it is submitted after this call.
    pub(crate) unsafe fn free_ordered(&self, ptr: u64, bytes: usize, uses: &Uses) {
        // Earlier frees deferred first: this one, deferred, waits for the
        // next chance. Then the deferred checks already done (a query each).
        self.retry_deferred_frees();
        self.deferred_checks().reap(self, false);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.free_or_defer(ptr, bytes, uses) };
    }

    /// The frees whose hand-off failed on a live context, tried again
    /// (each kept again if it fails again). Never blocks.
    pub(crate) fn retry_deferred_frees(&self) {
        for (ptr, bytes, uses) in self.deferred_frees().take_all() {
            // SAFETY: deferred by `free_or_defer`, whose caller's contract
            // holds still: no operation on the memory was submitted since,
            // and it left the list above, once.
            unsafe { self.free_or_defer(ptr, bytes, &uses) };
        }
    }

    /// [`Runtime::free_ordered`]'s free: a hand-off from `uses` to the
    /// reclaim stream, then the free there. The hand-off failing on a live
    /// context (an event not taken or recorded, a wait not queued), the
    /// free is deferred: tried again at the next free or synchronize
    /// rather than waited for here (never blocks). On a broken context the
    /// device may still use the memory: it is kept rather than freed under
    /// a running kernel.
    ///
    /// # Safety
    ///
    /// As [`Runtime::free_ordered`].
    unsafe fn free_or_defer(&self, ptr: u64, bytes: usize, uses: &Uses) {
        let s = self.reclaim_stream();
        let raw = self.raw_stream(s);
        let d = self.decide(uses, s, Access::Write, true);
        if waits_for_building(self, &d) {
            // The memory is in a graph not launched yet (DESIGN "Graphs without capture by hand"): freed once
            // it is (the graphed scope retries the deferred frees then).
            self.deferred_frees().keep(ptr, bytes, uses);
            return;
        }
        let free = MemAccess {
            ptr,
            bytes,
            access: Access::Write,
        };
        if let Err(e) = wait_streams(self, self.reclaimer(), s, raw, d, Some(free)) {
            if !e.is_sticky() {
                self.deferred_frees().keep(ptr, bytes, uses);
            }
            return;
        }
        // SAFETY: the caller's contract: `ptr` is an allocation of this size
        // by this driver, freed once and used no more; the hand-off above
        // ordered every use before the reclaim stream reaches the free.
        if unsafe { self.driver().free(ptr, device_bytes(bytes), raw) }.is_ok() {
            self.usage().device_freed(bytes);
        }
    }

    /// R9: the ledger's decision for `uses` moving to `s2`.
    #[inline]
    pub(crate) fn decide(
        &self,
        uses: &Uses,
        s2: StreamId,
        access: Access,
        device: bool,
    ) -> Decision {
        self.audit_decision();
        self.ledger_rw().hand_off(uses, s2, access, device)
    }

    /// R9, X3: the ledger's decision for `range` of `uses` moving to `s2`.
    #[inline]
    pub(crate) fn decide_range(
        &self,
        uses: &Uses,
        range: std::ops::Range<usize>,
        s2: StreamId,
        access: Access,
        device: bool,
    ) -> Decision {
        self.audit_decision();
        self.ledger_rw()
            .hand_off_range(uses, range, s2, access, device)
    }

    /// The wait audit's mark of a decision (`Driver::audit_decision`).
    #[inline]
    fn audit_decision(&self) {
        if crate::driver::AUDITING.load(std::sync::atomic::Ordering::Relaxed) {
            self.driver().audit_decision();
        }
    }
}

impl Runtime {
    /// Runs `wait` (a synchronize of a stream or a fence) until it
    /// succeeds, or until the device is broken for good (a sticky error:
    /// nothing more runs on it), for memory the device may still use and
    /// that is about to be handed back or freed: a wait that fails while
    /// the device still works is tried again. `Ok` once the work waited for
    /// is done; the first error once the device is broken.
    ///
    /// A driver that neither runs the work nor reports a broken device for
    /// [`crate::RuntimeOptions::wait_limit`] (a minute by default) leaves
    /// no way to know when the memory is free: the wait returns
    /// [`Error::DeviceUnresponsive`], and so does every later one at once
    /// (sticky: the device is treated as broken). Its callers then keep
    /// the memory (never free or hand it back), as for a broken context.
    /// Nothing here aborts the process.
    pub(crate) fn wait_past_errors(&self, wait: impl FnMut() -> Result<()>) -> Result<()> {
        if let Some(e) = self.unresponsive().get() {
            return Err(e.clone());
        }
        self.retry_wait(wait, Past::Return)
    }

    /// [`Runtime::wait_past_errors`] for host memory the caller only
    /// borrows for this call (a copy to or from a `&mut [T]` or a
    /// page-locked `&[T]`): the memory cannot be kept, so the wait cannot
    /// end while the queued copy may still touch it. Past the wait limit it
    /// marks the device unresponsive (every wait that guards memory the
    /// runtime owns then fails at once with [`Error::DeviceUnresponsive`],
    /// so the rest of the program learns it), says so once on stderr, and
    /// goes on waiting: soundness over liveness, on a driver that neither
    /// runs the work nor reports a broken context. It never aborts.
    pub(crate) fn wait_past_errors_borrowed(&self, wait: impl FnMut() -> Result<()>) -> Result<()> {
        self.retry_wait(wait, Past::KeepWaiting)
    }

    /// The loop of both: `wait` until it succeeds or the device is broken
    /// for good; past the wait limit, as `past` says.
    fn retry_wait(&self, mut wait: impl FnMut() -> Result<()>, past: Past) -> Result<()> {
        let first = match wait() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let start = std::time::Instant::now();
        loop {
            if self.driver().check_sticky().is_err() {
                return Err(first);
            }
            if wait().is_ok() {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited > self.wait_limit()
                && (past == Past::Return || self.unresponsive().get().is_none())
            {
                let e = Error::DeviceUnresponsive {
                    waited_ms: waited.as_millis() as u64,
                    first: first.to_string(),
                };
                if past == Past::Return {
                    return Err(self.unresponsive().get_or_init(|| e).clone());
                }
                eprintln!("gpu: {e}; a copy through borrowed host memory goes on waiting for it");
                let _ = self.unresponsive().set(e);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// What a wait that guards memory does past the wait limit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Past {
    /// Returns [`Error::DeviceUnresponsive`]: the caller keeps the memory.
    Return,
    /// Marks the device unresponsive once and goes on waiting: the memory
    /// is the caller's, borrowed for the call.
    KeepWaiting,
}

/// Carries out a hand-off decision for `task` on `s2`, for `on_behalf`:
/// the access about to be made on `s2` (the host backend's wait audit
/// judges each wait against it; `None` where there is no one access).
pub(crate) fn wait_streams(
    rt: &Runtime,
    task: &Task,
    s2: StreamId,
    raw2: RawStream,
    d: Decision,
    on_behalf: Option<MemAccess>,
) -> Result<()> {
    match d {
        Decision::NoWait(_) => Ok(()),
        Decision::DeviceWait(set) => {
            for s in set.iter() {
                let l = rt.ledger_rw();
                // Read before the record below: what the wait teaches.
                let facts = l.hand_off_facts(s);
                // The device whose stream `s` is (DESIGN "Beyond one GPU"): the event is
                // recorded there, and waited for here (a wait on another
                // device's event is a device wait too). None: retired since
                // the decision, idle.
                let Some(core) = rt.group().owner(rt.core(), s) else {
                    l.learn_hand_off(task, s2, &facts);
                    continue;
                };
                refuse_building(&core.streams, s)?;
                // While `s`'s owner captures it, its captured work runs only
                // when the graph is launched: wait for what was queued
                // before the capture, never record into another task's
                // graph.
                let slot = core.streams.capture_slot(s).lock();
                // Read under the slot's lock, which a retiring stream's
                // handle is taken away under (DESIGN "Streams are a resource"): 0 is a stream retired
                // since the decision, idle, so its work is done.
                let raw = core.streams.raw(s);
                let r = match slot.as_ref() {
                    Some(pre) => {
                        rt.driver().audit_wait(raw2, pre.raw, on_behalf);
                        rt.driver().wait_event(raw2, pre.raw)
                    }
                    None if raw.0 == 0 => Ok(()),
                    None => {
                        let ev = core.events.take(&*core.driver)?;
                        // A record the ledger does not make: the event
                        // covers nothing from now on (DESIGN "Soundness"), or a user who
                        // gets it from the pool next would learn a false
                        // fact by synchronizing it.
                        l.record_untracked(&ev.coverage);
                        let r = core.driver.record(ev.raw, raw).and_then(|_| {
                            rt.driver().audit_wait(raw2, ev.raw, on_behalf);
                            rt.driver().wait_event(raw2, ev.raw)
                        });
                        // The wait captured the record: the event may be
                        // reused now.
                        core.events.give(ev);
                        r
                    }
                };
                drop(slot);
                r?;
                l.learn_hand_off(task, s2, &facts);
            }
            Ok(())
        }
        Decision::HostSync(set) => {
            for s in set.iter() {
                // Not classified by the wait audit: counted.
                rt.driver().audit_wait(raw2, RawEvent(0), None);
                host_wait(rt, s)?;
            }
            Ok(())
        }
    }
}

/// Waits on the host for everything queued on `s` so far. A stream its
/// owner is capturing cannot be synchronized (an error) nor recorded on
/// (that would add to the owner's graph): wait for what was queued before
/// the capture began, the only work of it that runs on the stream.
fn host_wait(rt: &Runtime, s: StreamId) -> Result<()> {
    // The device whose stream `s` is (DESIGN "Beyond one GPU"); none: retired, idle.
    let Some(core) = rt.group().owner(rt.core(), s) else {
        return Ok(());
    };
    refuse_building(&core.streams, s)?;
    let slot = core.streams.capture_slot(s).lock();
    if let Some(pre) = slot.as_ref() {
        // Synchronized under the lock: once the lock is let go, the capture
        // may end and its pre event go back to the pool and be recorded on
        // another stream, and a synchronize then would wait for that
        // stream instead. The capture's end waits for this (the work before
        // the capture runs whatever the capture does: no deadlock); the
        // lock is the pool's, no ledger lock (R14).
        return core.driver.event_sync(pre.raw);
    }
    let raw = core.streams.raw(s);
    if raw.0 == 0 {
        // Retired since the decision (DESIGN "Streams are a resource"): idle, its work done.
        return Ok(());
    }
    let l = rt.ledger_rw();
    // Read before the record below: what seeing it complete teaches.
    let facts = l.hand_off_facts(s);
    let ev = core.events.take(&*core.driver)?;
    // Untracked record: the event covers nothing (DESIGN "Soundness").
    l.record_untracked(&ev.coverage);
    let recorded = core.driver.record(ev.raw, raw);
    drop(slot);
    let r = recorded.and_then(|_| core.driver.event_sync(ev.raw));
    core.events.give(ev);
    if r.is_ok() {
        l.learn_host_wait(&facts);
    }
    r
}

/// DESIGN "Graphs without capture by hand": a graphed scope in progress stamped the buffers its operations use
/// on its stream `s`, in an epoch whose work is queued only when its graph
/// is launched: a wait for `s` now would not cover it. Only work outside
/// the scope asks (its own tasks are on `s`), for a buffer it got hold of
/// meanwhile (through a lock): refused rather than waited for, which could
/// wait for itself.
#[inline]
fn refuse_building(pool: &crate::pool::StreamPool, s: StreamId) -> Result<()> {
    if pool.is_building(s) {
        return Err(Error::Capturing {
            what: "using a buffer that a graphed scope in progress used, from outside that scope (its graph is launched when its body returns)",
        });
    }
    Ok(())
}

/// Whether `d` waits for a stream a graphed scope is recording for (see
/// `refuse_building`): a free must wait for the graph's launch.
pub(crate) fn waits_for_building(rt: &Runtime, d: &Decision) -> bool {
    let set = match d {
        Decision::NoWait(_) => return false,
        Decision::DeviceWait(set) | Decision::HostSync(set) => set,
    };
    set.iter().any(|s| {
        rt.group()
            .owner(rt.core(), s)
            .is_some_and(|core| core.streams.is_building(s))
    })
}
