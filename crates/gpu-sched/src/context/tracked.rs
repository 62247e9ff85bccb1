//! The core of every tracked operation (R1, R9): the buffers it touches,
//! their hand-offs to the task's stream (the ledger's decision carried out
//! by a device wait or a host wait, `wait_streams`, which the ordered free
//! of handoff.rs takes too) and their stamps around the submission; the
//! checks made before anything is submitted.

use super::TaskContext;
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::driver::{MemAccess, NodeOp, RawStream};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use gpu_epoch::{Access, Decision, StreamId, Task, Uses};

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
    /// stream, stamps, submits, stamps again. Refused in a graphed scope
    /// (§14), which takes only operations [`TaskContext::tracked_node`]
    /// can record.
    #[inline]
    pub(crate) fn tracked<R>(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        submit: impl FnOnce(&[MemAccess], RawStream) -> Result<R>,
    ) -> Result<R> {
        self.tracked_as(
            name,
            touches,
            None::<fn(&[MemAccess]) -> (NodeOp, R)>,
            submit,
        )
    }

    /// [`TaskContext::tracked`] for an operation a graphed scope (§14)
    /// records as a node: `node` gives it (from what it touches) in place
    /// of `submit`.
    #[inline]
    pub(crate) fn tracked_node(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        node: impl FnOnce(&[MemAccess]) -> NodeOp,
        submit: impl FnOnce(&[MemAccess], RawStream) -> Result<()>,
    ) -> Result<()> {
        self.tracked_as(name, touches, Some(|m: &[MemAccess]| (node(m), ())), submit)
    }

    fn tracked_as<R>(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        node: Option<impl FnOnce(&[MemAccess]) -> (NodeOp, R)>,
        submit: impl FnOnce(&[MemAccess], RawStream) -> Result<R>,
    ) -> Result<R> {
        let (sid, raw) = self.bind()?;
        let l = self.rt.ledger_rw();
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
            if cap.is_build() {
                // Recorded, to run in the graph this scope launches on this
                // stream when its body ends (§14): the stamps above, on
                // this stream in its current epoch, stand for that launch
                // (nothing closes the epoch before it: records and
                // synchronizes are refused in the scope).
                // Checked here, off the plain path: nothing was queued
                // yet (the stamps taken above only cost a later wait).
                let Some(node) = node else {
                    return Err(Error::Capturing {
                        what: "an operation other than a kernel launch, a device copy or a fill (a library call, a collective, a host copy) in a graphed scope (`gpu::capture` takes capture-safe library calls)",
                    });
                };
                let (op, r) = node(&mem);
                if !op.is_empty() {
                    cap.record(&self.chain, self.next_op_key(), &mem, op)?;
                }
                return Ok(r);
            }
            // No trace span: its records would go into the graph, between
            // another task's dependencies and its operation (the graph's
            // launch, `launch_graph`, gets one).
            let r = cap.submit(self.rt.driver(), &self.chain, &mem, || submit(&mem, raw))?;
            return Ok(r);
        }
        let tracer = self.rt.tracer();
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

    /// Whether this task is in a graphed scope (§14).
    #[inline]
    pub(crate) fn in_graphed_scope(&self) -> bool {
        self.capture.borrow().as_ref().is_some_and(|c| c.is_build())
    }

    /// Whether this task's stream is capturing (either kind of capture, or
    /// a graphed scope's recording).
    pub(crate) fn capturing(&self) -> bool {
        self.in_scope_capture()
            || self
                .slot
                .get()
                .is_some_and(|(s, _)| self.rt.ledger_rw().is_capturing(s))
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
            .is_some_and(|(s, _)| self.rt.ledger_rw().is_capturing(s))
        {
            return Err(Error::Capturing { what });
        }
        Ok(())
    }

    pub(crate) fn check<T: DeviceRepr>(
        &self,
        b: &(impl DeviceSlice<T> + ?Sized),
        what: &'static str,
    ) -> Result<()> {
        self.rt.check_same(b.runtime_id(), what)
    }
}

/// Carries out a hand-off decision for `task` on `s2`.
pub(crate) fn wait_streams(
    rt: &Runtime,
    task: &Task,
    s2: StreamId,
    raw2: RawStream,
    d: Decision,
) -> Result<()> {
    match d {
        Decision::NoWait(_) => Ok(()),
        Decision::DeviceWait(set) => {
            for s in set.iter() {
                let l = rt.ledger_rw();
                let covered = l.closed_counted(s);
                // The device whose stream `s` is (§11): the event is
                // recorded there, and waited for here (a wait on another
                // device's event is a device wait too). None: retired since
                // the decision, idle.
                let Some(core) = rt.group().owner(rt.core(), s) else {
                    l.mark_ordered(task, s2, s, covered);
                    continue;
                };
                refuse_building(&core.streams, s)?;
                // While `s`'s owner captures it, its captured work runs only
                // when the graph is launched: wait for what was queued
                // before the capture, never record into another task's
                // graph.
                let slot = core.streams.capture_slot(s).lock();
                // Read under the slot's lock, which a retiring stream's
                // handle is taken away under (§9): 0 is a stream retired
                // since the decision, idle, so its work is done.
                let raw = core.streams.raw(s);
                let r = match slot.as_ref() {
                    Some(pre) => rt.driver().wait_event(raw2, pre.raw),
                    None if raw.0 == 0 => Ok(()),
                    None => {
                        let ev = core.events.take(&*core.driver)?;
                        // A record the ledger does not make: the event
                        // covers nothing from now on (§8), or a user who
                        // gets it from the pool next would learn a false
                        // fact by synchronizing it.
                        l.record_untracked(&ev.coverage);
                        let r = core
                            .driver
                            .record(ev.raw, raw)
                            .and_then(|_| rt.driver().wait_event(raw2, ev.raw));
                        // The wait captured the record: the event may be
                        // reused now.
                        core.events.give(ev);
                        r
                    }
                };
                drop(slot);
                r?;
                l.mark_ordered(task, s2, s, covered);
            }
            Ok(())
        }
        Decision::HostSync(set) => {
            for s in set.iter() {
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
    // The device whose stream `s` is (§11); none: retired, idle.
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
        // Retired since the decision (§9): idle, its work done.
        return Ok(());
    }
    let ev = core.events.take(&*core.driver)?;
    // Untracked record: the event covers nothing (§8).
    rt.ledger_rw().record_untracked(&ev.coverage);
    let recorded = core.driver.record(ev.raw, raw);
    drop(slot);
    let r = recorded.and_then(|_| core.driver.event_sync(ev.raw));
    core.events.give(ev);
    r
}

/// §14: a graphed scope in progress stamped the buffers its operations use
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
