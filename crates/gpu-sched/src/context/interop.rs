//! cudarc buffers both ways (DESIGN "Numerical libraries and foreign work"): a `CudaSlice` adopted as a `Buffer`,
//! ordered after the slice's pending work, and a `Buffer` given back as a
//! `CudaSlice`, ordered after the ledger's last use; one event wait each
//! way, and from then on one tracker (cudarc's or the ledger) per buffer.

use super::TaskContext;
use crate::buffer::{Buffer, DeviceRepr};
use crate::error::{Error, Result};
use crate::BackendKind;
use cudarc::driver::{sys, CudaSlice, CudaStream};
use gpu_epoch::Access;
use std::sync::Arc;

impl TaskContext {
    /// The checks both directions make: the CUDA backend, outside any
    /// capture, and `ctx` this runtime's context.
    fn check_cudarc(&self, ctx: &cudarc::driver::CudaContext, what: &'static str) -> Result<()> {
        if self.rt.backend() != BackendKind::Cuda {
            return Err(Error::Unsupported(
                "cudarc buffers on the host backend (it has no CUDA memory)",
            ));
        }
        if self.capturing() {
            return Err(Error::Capturing { what });
        }
        if ctx.cu_ctx() as usize as u64 != self.rt.driver().peer_handles().0 {
            return Err(Error::WrongDevice { what });
        }
        Ok(())
    }

    /// Adopts a cudarc `CudaSlice<T>` as a [`Buffer<T>`] of this runtime:
    /// this task's stream waits for everything the slice's stream queued
    /// before the call (so for the slice's pending work, which cudarc's own
    /// event tracking has made that stream wait for), and the buffer is the
    /// ledger's from then on, stamped as written by this task. Its memory
    /// is freed by the runtime (stream-ordered), not by cudarc.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] on the host backend, or for a context without
    /// stream-ordered allocation (the runtime frees with `cuMemFreeAsync`);
    /// [`Error::WrongDevice`] for a slice of another device;
    /// [`Error::Capturing`] in a capture (each of these before anything is
    /// queued; the slice is then dropped by cudarc as usual); a driver
    /// error where neither an event nor a host wait could order the slice's
    /// pending work (a broken context): its memory is then kept, never
    /// freed, since the device may still use it.
    pub fn adopt_cudarc<T: DeviceRepr>(&self, slice: CudaSlice<T>) -> Result<Buffer<T>> {
        let ctx = slice.context().clone();
        self.check_cudarc(&ctx, "adopting a cudarc slice")?;
        if !ctx.has_async_alloc() {
            return Err(Error::Unsupported(
                "adopting a cudarc slice of a context without stream-ordered allocation",
            ));
        }
        let (_, raw) = self.bind()?;
        let theirs = slice.stream().clone();
        let len = slice.len();
        // `leak` queues on the slice's stream the waits for cudarc's own
        // events (its uses on other streams), and lets go of the memory.
        let ptr = slice.leak();
        // SAFETY: `raw` is this task's live stream of `ctx`'s context
        // (checked above); the borrowed wrapper lives for the wait only.
        let ours = unsafe { ctx.wrap_borrowed_stream(raw.0 as usize as sys::CUstream) };
        // One event on the slice's stream, after those waits: this stream
        // waits for every use of the slice that cudarc ordered.
        let ordered = theirs.record_event(None).and_then(|e| ours.wait(&e));
        if let Err(e) = ordered {
            // Not ordered by an event: order it from the host, or keep the
            // memory (never freed while the device may use it).
            theirs.synchronize().map_err(|_| Error::from(e))?;
        }
        // The adoption is a write on this stream (R1), as an allocation is.
        Ok(self.own(ptr, len))
    }

    /// Gives `buf` to cudarc as a `CudaSlice<T>` on `stream`: `buf` is
    /// handed to this task's stream (which waits for its last use by any
    /// stream, as the ledger knows it), and `stream` waits for that; the
    /// slice is cudarc's from then on (its event tracking starts afresh,
    /// and its drop frees the memory on `stream`).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] on the host backend; [`Error::WrongDevice`]
    /// for a buffer of another runtime or a stream of another device;
    /// [`Error::Capturing`] in a capture; driver errors (the buffer is then
    /// still the runtime's, and dropped as usual).
    ///
    /// # Panics
    ///
    /// Where cudarc's event tracking is on and creating its two events for
    /// the slice fails (cudarc's `upgrade_device_ptr` unwraps them).
    pub fn into_cudarc<T: DeviceRepr>(
        &self,
        mut buf: Buffer<T>,
        stream: &Arc<CudaStream>,
    ) -> Result<CudaSlice<T>> {
        self.check(&buf, "the buffer")?;
        let ctx = stream.context().clone();
        self.check_cudarc(&ctx, "giving a buffer to cudarc")?;
        let (_, raw) = self.bind()?;
        let mem = super::tracked::mem_of(&buf, Access::Write);
        self.hand_off_write(buf.stamps.get_mut(), Some(mem))?;
        // SAFETY: as in `adopt_cudarc`.
        let ours = unsafe { ctx.wrap_borrowed_stream(raw.0 as usize as sys::CUstream) };
        let done = ours.record_event(None)?;
        stream.wait(&done)?;
        // The runtime lets go of the memory without freeing it.
        let (ptr, len) = buf.into_raw_parts();
        // SAFETY: `ptr` is a live allocation of this device's context of
        // `len` `T`s (the buffer's, which no longer frees it), from
        // `cuMemAllocAsync`, which cudarc's drop frees with
        // `cuMemFreeAsync` on `stream`; `stream` is ordered after every use
        // the runtime made of it (the wait above), and nothing of the
        // runtime uses it again.
        Ok(unsafe { stream.upgrade_device_ptr::<T>(ptr, len) })
    }
}

impl<T: DeviceRepr> Buffer<T> {
    /// Lets go of the memory without freeing it (it leaves the runtime's
    /// counts): the pointer and length, for a new owner that frees it
    /// (`TaskContext::into_cudarc`). The caller has ordered the new
    /// owner's uses after every use the stamps record.
    pub(crate) fn into_raw_parts(self) -> (u64, usize) {
        let me = std::mem::ManuallyDrop::new(self);
        let (ptr, len) = (me.ptr, me.len);
        let bytes = len * std::mem::size_of::<T>();
        me.rt.usage().device_freed(bytes);
        // SAFETY: `me` is never dropped (ManuallyDrop) nor used after these
        // reads, so its three owning fields are each read out, and dropped,
        // once; the other fields own nothing.
        unsafe {
            drop(std::ptr::read(&me.rt));
            drop(std::ptr::read(&me.stamps));
            // A graphed scope's block leaves its memory for good.
            drop(std::ptr::read(&me.home));
        }
        (ptr, len)
    }
}
