//! Where host code meets a task's stream: synchronizes, raw and host-sync
//! pointers (R10, R11), and rejoining a split.

use super::tracked::mem_of;
use super::TaskContext;
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut, Split};
use crate::error::{Error, Result};
use crate::handoff::wait_streams;
use gpu_epoch::Access;

impl TaskContext {
    // ----- synchronization ----------------------------------------------------

    /// R5: waits on the host until this task's stream finished everything
    /// submitted so far; its epoch becomes Completed. Then checks the
    /// results library operations left (a factorization's `info`, DESIGN "Numerical libraries and foreign work"):
    /// every wait on the host built on this one (`to_vec`,
    /// `copy_to_host`, `host_sync_ptr`) reports them.
    ///
    /// # Errors
    ///
    /// [`Error::Capturing`] while capturing; driver errors; the first
    /// failed result of a library operation
    /// ([`Error::NotPositiveDefinite`], [`Error::Singular`]) since the
    /// last wait, of this task or of tasks it joined (the wait itself
    /// succeeded: the stream is idle).
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_stream()?;
        self.conclude_checks()
    }

    /// [`TaskContext::synchronize`] without the checks.
    pub(crate) fn synchronize_stream(&self) -> Result<()> {
        self.bind()?;
        if self.in_graphed_scope() {
            // Nothing of the scope has run yet; and the synchronize would
            // close the epoch its operations are stamped in (DESIGN "Graphs without capture by hand").
            return Err(Error::Capturing {
                what: "synchronizing the stream",
            });
        }
        self.rt
            .ledger_rw()
            .stream_sync(self.task(), self.sid(), || {
                self.rt
                    .driver()
                    .stream_sync(self.raw(), self.rt.sync_mode())
            })
            .map_err(|_| Error::Capturing {
                what: "synchronizing the stream",
            })??;
        self.pending.set(false);
        Ok(())
    }

    /// R11: a pointer for code that is not stream-aware (MPI, FFI): hands
    /// `buf` to this task's stream (a device wait if needed), then
    /// synchronizes this stream, not the old one. It waits only for what
    /// orders `buf` plus this task's own work. Safe to call for the same
    /// reason as [`RawTask::raw_ptr`](crate::raw::RawTask::raw_ptr): using the address is `unsafe`.
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
        if self.capturing() {
            return Err(Error::Capturing {
                what: "taking a host-sync pointer",
            });
        }
        let mem = mem_of(&*buf, Access::Write);
        let u = buf.stamps_mut().get_mut();
        self.hand_off_write(u, Some(mem))?;
        self.rt.ledger_rw().stamp_write(u, self.sid());
        self.rt.core().streams.note_other(self.sid());
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
    /// Safe to call, as [`RawTask::raw_ptr`](crate::raw::RawTask::raw_ptr) is: the address does
    /// nothing by itself, and reading through it is `unsafe`, with the
    /// caller vouching for the above (DESIGN "Soundness").
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
        if self.capturing() {
            return Err(Error::Capturing {
                what: "taking a host-sync pointer",
            });
        }
        // As a tracked read: decide under the lock, wait without it (R14).
        let (r, l) = (buf.range(), self.rt.ledger_rw());
        let d = self
            .rt
            .decide_range(&buf.stamps().lock(), r.clone(), sid, Access::Read, true);
        wait_streams(
            &self.rt,
            self.task(),
            sid,
            raw,
            d,
            Some(mem_of(buf, Access::Read)),
        )?;
        l.stamp_read_range(&mut buf.stamps().lock(), r, sid);
        self.rt.core().streams.note_other(sid);
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
    /// from a wait. Either way the parent gets its views' uses, as when a
    /// split is dropped without a rejoin ([`Split`]): never stale.
    pub fn rejoin<T: DeviceRepr>(&self, mut split: Split<'_, T>) -> Result<()> {
        self.rt.check_same(split.runtime_id(), "the split buffer")?;
        self.bind()?;
        let (parent, views) = split.parts();
        for v in views.iter_mut() {
            self.hand_off_write(v.get_mut(), None)?;
        }
        self.rt
            .ledger_rw()
            .stamp_write(parent.get_mut(), self.sid());
        self.rt.core().streams.note_other(self.sid());
        split.mark_rejoined();
        Ok(())
    }
}
