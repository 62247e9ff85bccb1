//! Copies: host to device and back (staged, page-locked, asynchronous),
//! within a device and between devices.

use super::{TaskContext, Touch};
use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::driver::NodeOp;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

impl TaskContext {
    /// Copies `src` from host memory into `dst`; `src` may be reused on
    /// return. From pageable memory the copy is asynchronous (the driver
    /// stages it); from page-locked memory (a [`crate::Staging`] buffer's
    /// slice, of this runtime or another, or memory another library pinned),
    /// which the device reads while the copy runs, it waits for the copy
    /// (DESIGN "Soundness": the host could write or free the memory under it).
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
        self.rt
            .wait_past_errors_borrowed(|| self.synchronize_stream())?;
        self.conclude_checks()
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
    /// [`crate::Buffer::split_at_mut`]).
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
    /// of this runtime's group (DESIGN "Beyond one GPU"): `cuMemcpyPeerAsync` on this task's
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
        let group = self.rt.group();
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
        let submit = |_: &[_], raw| unsafe {
            match peers {
                None => drv.copy_dtod(d, s, bytes, raw),
                Some((from, to)) => drv.copy_peer(d, to.driver(), s, from.driver(), bytes, raw),
            }
        };
        let touches = &mut [Touch::read(src), Touch::write(dst)];
        if peers.is_some() {
            return self.tracked(name, touches, submit);
        }
        // A graphed scope records a copy within the device as a node.
        self.tracked_node(
            name,
            touches,
            |_| NodeOp::Copy {
                dst: d,
                src: s,
                bytes,
            },
            submit,
        )
    }
}
