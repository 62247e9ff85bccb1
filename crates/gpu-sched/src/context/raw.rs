//! Escape hatches (R10, DESIGN "Soundness"): a task's raw stream handle, raw device
//! pointers of its buffers, and sharing another task's stream, behind one
//! trait that code imports on purpose (`use gpu_sched::raw::RawTask`), so
//! they are not among the methods of every task and scope. Library calls
//! that declare their buffers need none of them: see
//! [`TaskContext::foreign`].

use super::TaskContext;
use crate::buffer::{DeviceRepr, DeviceSliceMut};
use crate::error::{Error, Result};
use gpu_epoch::{Access, Binding};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::TaskContext {}
}

/// A task's escape hatches, implemented by [`TaskContext`] (and so reached
/// from a `gpu::Scope`, which dereferences to one, once imported). Sealed.
pub trait RawTask: sealed::Sealed {
    /// The driver's handle of this task's stream (`CUstream` as an integer
    /// on CUDA; an index on the host backend), for interop with libraries
    /// that take a stream. Work submitted on it directly is not tracked:
    /// take buffers' pointers with [`RawTask::raw_ptr`], or declare them
    /// with [`TaskContext::foreign`]. A capture begun
    /// on it directly must end before the task does (the runtime marks the
    /// end of the task's work on this stream). The handle is the task's
    /// while it lives: once the task ended, the runtime may give the stream
    /// to another task, or destroy it once idle (DESIGN "Streams are a resource").
    ///
    /// # Panics
    ///
    /// If the task has no stream yet and none can be had (a broken
    /// context); in a scope capture ([`TaskContext::capture_scope`]).
    fn cu_stream(&self) -> u64;

    /// R10: the raw device pointer of `buf`, for code outside the runtime
    /// (a library call, a hand-written launch). The buffer is stamped once on
    /// this stream and marked escaped: no shortcut applies to it until it
    /// moves to another stream, which then waits for everything this stream
    /// queued. Work submitted through the pointer after the buffer moved is
    /// not ordered with other tasks' work: order it yourself.
    ///
    /// Safe to call, as `slice::as_ptr` is: an address does nothing by
    /// itself, and every use of it (an FFI call, or a [`crate::Untracked`]
    /// passed to the `unsafe` [`crate::Kernel::launch`] or
    /// [`crate::Builtin::launch`]) is `unsafe`, with the caller vouching
    /// that the memory is alive (as long as `buf` is) and the work ordered
    /// (DESIGN "Soundness"). No safe function of this crate uses a raw address: an
    /// `Untracked` only carries it to an `unsafe` launch.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`]; [`Error::Capturing`] in a scope capture
    /// ([`TaskContext::capture_scope`]: its tasks share one stream, so the
    /// escape would order nothing, and the graph could not order the work
    /// done through the pointer with the other tasks'); driver errors from
    /// the hand-off.
    fn raw_ptr<T: DeviceRepr>(&self, buf: &mut (impl DeviceSliceMut<T> + ?Sized)) -> Result<u64>;

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
    fn share_stream_of(&self, other: &TaskContext) -> Result<Binding>;
}

impl RawTask for TaskContext {
    fn cu_stream(&self) -> u64 {
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

    fn raw_ptr<T: DeviceRepr>(&self, buf: &mut (impl DeviceSliceMut<T> + ?Sized)) -> Result<u64> {
        self.check(buf, "the buffer")?;
        if self.in_scope_capture() {
            return Err(Error::Capturing {
                what: "taking a raw pointer in a scope capture (take it before the capture)",
            });
        }
        self.bind()?;
        let mem = super::tracked::mem_of(&*buf, Access::Write);
        let u = buf.stamps_mut().get_mut();
        self.hand_off_write(u, Some(mem))?;
        self.rt.ledger_rw().escape(u, self.sid());
        self.rt.core().streams.note_other(self.sid());
        Ok(buf.device_ptr())
    }

    fn share_stream_of(&self, other: &TaskContext) -> Result<Binding> {
        // A stream id means something only in its own runtime's pool (and
        // a stream submits to one device): another runtime's would index
        // another table.
        self.rt
            .check_same(other.rt.id(), "the task whose stream is shared")?;
        Ok(self.rt.ledger_rw().bind(self.task(), other.bound()?.0))
    }
}
