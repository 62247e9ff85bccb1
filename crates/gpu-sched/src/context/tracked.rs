//! The core of every tracked operation (R1, R9): the buffers it touches,
//! their hand-offs to the task's stream (the ledger's decision carried out
//! by `handoff::wait_streams`) and their stamps around the submission; the
//! checks made before anything is submitted.

use super::TaskContext;
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::driver::{MemAccess, NodeOp, RawStream};
use crate::error::{Error, Result};
use crate::handoff::wait_streams;
use gpu_epoch::{Access, Decision, Uses};

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

/// The memory of `b`, accessed as `access`.
pub(crate) fn mem_of<T: DeviceRepr>(
    b: &(impl DeviceSlice<T> + ?Sized),
    access: Access,
) -> MemAccess {
    MemAccess {
        ptr: b.device_ptr(),
        bytes: b.bytes(),
        access,
    }
}

impl<'a> Touch<'a> {
    pub(crate) fn read<T: DeviceRepr>(b: &'a (impl DeviceSlice<T> + ?Sized)) -> Self {
        Touch {
            mem: mem_of(b, Access::Read),
            range: b.range(),
            stamps: Stamps::Read(b.stamps()),
        }
    }

    pub(crate) fn write<T: DeviceRepr>(b: &'a mut (impl DeviceSliceMut<T> + ?Sized)) -> Self {
        Touch {
            mem: mem_of(&*b, Access::Write),
            range: b.range(),
            stamps: Stamps::Write(b.stamps_mut()),
        }
    }
}

impl TaskContext {
    /// R9: hands a buffer with `uses` to this stream, for a write of its
    /// memory `mem` (`None`: no one range, e.g. a split's view).
    #[inline]
    pub(crate) fn hand_off_write(&self, uses: &Uses, mem: Option<MemAccess>) -> Result<()> {
        self.hand_off_range(uses, gpu_epoch::WHOLE, Access::Write, mem)
    }

    /// R9, X3: hands `range` of a buffer with `uses` to this stream, for
    /// `access` of its memory `mem` (see [`TaskContext::hand_off_write`]).
    #[inline]
    pub(crate) fn hand_off_range(
        &self,
        uses: &Uses,
        range: std::ops::Range<usize>,
        access: Access,
        mem: Option<MemAccess>,
    ) -> Result<()> {
        let (s, raw) = (self.sid(), self.raw());
        let d = self.rt.decide_range(uses, range, s, access, true);
        wait_streams(&self.rt, self.task(), s, raw, d, mem)
    }

    /// R1 + R9 around one submission: hands every touched buffer off to this
    /// stream, stamps, submits, stamps again. Refused in a graphed scope
    /// (DESIGN "Graphs without capture by hand"), which takes only operations [`TaskContext::tracked_node`]
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
            None::<fn(&[MemAccess]) -> Result<(NodeOp, R)>>,
            submit,
        )
    }

    /// [`TaskContext::tracked`] for an operation a graphed scope (DESIGN "Graphs without capture by hand")
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
        self.tracked_as(
            name,
            touches,
            Some(|m: &[MemAccess]| Ok((node(m), ()))),
            submit,
        )
    }

    /// [`TaskContext::tracked`] for an operation of a graphed scope that
    /// `record` makes a node of (a foreign operation captured into a child
    /// graph), with its value. Only in a graphed scope.
    pub(crate) fn tracked_recorded<R>(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        record: impl FnOnce(&[MemAccess]) -> Result<(NodeOp, R)>,
    ) -> Result<R> {
        self.tracked_as(name, touches, Some(record), |_, _| {
            Err(Error::Unsupported(
                "an operation recorded for a graphed scope, outside one",
            ))
        })
    }

    /// The use a task with no stream yet may follow (DESIGN "Streams are a
    /// resource"), with the buffer's device address: the last writer of
    /// the first buffer its first operation writes, if it has one. Never a
    /// read's: readers of one buffer run side by side, and the second
    /// would wait for the first on the stream the first took. None for a
    /// buffer whose uses are unknown or escaped (R10).
    fn first_use(touches: &mut [Touch<'_>]) -> Option<(gpu_epoch::Use, u64)> {
        touches.iter_mut().find_map(|t| match &mut t.stamps {
            Stamps::Write(s) => {
                let u = s.get_mut();
                if u.is_unknown() || u.is_escaped() {
                    return None;
                }
                u.writer().map(|w| (w, t.mem.ptr))
            }
            Stamps::Read(_) => None,
        })
    }

    fn tracked_as<R>(
        &self,
        name: &'static str,
        touches: &mut [Touch<'_>],
        node: Option<impl FnOnce(&[MemAccess]) -> Result<(NodeOp, R)>>,
        submit: impl FnOnce(&[MemAccess], RawStream) -> Result<R>,
    ) -> Result<R> {
        if self.slot.get().is_none() {
            // The task's first operation: its stream follows the data.
            if let Some(u) = Self::first_use(touches) {
                self.bind_following(u)?;
            }
        }
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
        let pool = &self.rt.core().streams;
        let mut mem = smallvec::SmallVec::<[MemAccess; 6]>::new();
        for t in touches.iter_mut() {
            mem.push(t.mem);
            pool.note_touch(sid, t.mem.ptr);
            let r = &t.range;
            match &mut t.stamps {
                Stamps::Write(s) => {
                    let u = s.get_mut();
                    self.hand_off_range(u, r.clone(), Access::Write, Some(t.mem))?;
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
                    wait_streams(&self.rt, self.task(), sid, raw, d, Some(t.mem))?;
                    l.stamp_read_range(&mut s.lock(), r.clone(), sid);
                }
            }
        }
        if let Some(cap) = &*self.capture.borrow() {
            if cap.is_build() {
                // Recorded, to run in the graph this scope launches on this
                // stream when its body ends (DESIGN "Graphs without capture by hand"): the stamps above, on
                // this stream in its current epoch, stand for that launch
                // (nothing closes the epoch before it: records and
                // synchronizes are refused in the scope).
                // Checked here, off the plain path: nothing was queued
                // yet (the stamps taken above only cost a later wait).
                let Some(node) = node else {
                    return Err(Error::Capturing {
                        what: "an operation other than a kernel launch, a device copy, a fill or a capture-safe foreign operation (a collective, a host copy) in a graphed scope",
                    });
                };
                let (op, r) = node(&mem)?;
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
        // R2 after every operation (DESIGN "Beyond the seed (X1-X8)"): closes the epoch
        // its stamps carry, now that it is submitted. A close of the
        // stream's unshared owner counts, so a hand-off's wait for this
        // operation, or anything stamped before it, teaches its waiter
        // that all of it is ordered, and a later hand-off of another
        // buffer this stream used as far waits no more. Not for an
        // operation whose submission comes later (`submitting_later`):
        // the close would cover work not yet on the stream.
        if !self.submit_later.get() {
            l.close(self.task(), sid);
        }
        Ok(r)
    }

    /// Runs `f`, whose tracked operations on this task only stamp and
    /// collect what a later call submits (the parts of an NCCL group, a
    /// graph's buffers handed off before its launch), with X6's close
    /// after each held back: their stamps stay in the open epoch, which
    /// the task's next close, after the submission in its program order,
    /// covers (DESIGN "Beyond the seed (X1-X8)").
    pub(crate) fn submitting_later<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset<'a>(&'a std::cell::Cell<bool>, bool);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.set(self.1);
            }
        }
        let _reset = Reset(&self.submit_later, self.submit_later.replace(true));
        f()
    }

    /// Whether this task is in a graphed scope (DESIGN "Graphs without capture by hand").
    #[inline]
    pub(crate) fn in_graphed_scope(&self) -> bool {
        self.capture.borrow().as_ref().is_some_and(|c| c.is_build())
    }

    /// Whether this task's work is being recorded into a graph rather than
    /// run: in a capture (`TaskContext::capture`, a scope capture) or a
    /// graphed scope. What a library wrapper asks before work that cannot
    /// be recorded (an upload from host memory), to refuse it by name.
    pub fn is_recording(&self) -> bool {
        self.in_graphed_scope() || self.capturing()
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

    /// DESIGN "Soundness": an operation that reads or writes host memory cannot go into a
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
