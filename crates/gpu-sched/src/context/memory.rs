//! Allocation and zeroing on a task's stream.

use super::{TaskContext, Touch};
use crate::buffer::{Buffer, DeviceRepr, DeviceSliceMut};
use crate::driver::NodeOp;
use crate::error::{Error, Result};
use crate::runtime::{device_bytes, GraphMemory, Home};
use gpu_epoch::{Access, Uses};
use std::marker::PhantomData;
use std::sync::Arc;

/// The bytes of `len` `T`s.
fn alloc_bytes<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or(Error::TooLarge {
            elements: len,
            element_bytes: std::mem::size_of::<T>(),
            during: "computing an allocation size",
        })
}

impl TaskContext {
    // ----- allocation and copies -------------------------------------------

    /// A new buffer of `len` elements, allocated in stream order on this
    /// task's stream; its contents are unspecified (zeros on the host
    /// backend).
    ///
    /// # Errors
    ///
    /// [`Error::OutOfMemory`] or a driver error.
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<Buffer<T>> {
        self.bind()?;
        let memory = self
            .capture
            .borrow()
            .as_ref()
            .and_then(|c| c.memory().cloned());
        if let Some(memory) = memory {
            return self.alloc_in_graph(&memory, len);
        }
        if self.in_scope_capture() || self.rt.ledger_rw().is_capturing(self.sid()) {
            // The graph would own the memory (an allocation node: the
            // address is valid only while a launch of the graph runs), and
            // the buffer outlive it: a later use reads freed memory, and a
            // captured temporary is freed before the graph's first launch.
            return Err(Error::Capturing {
                what: "allocating device memory (allocate before the recording)",
            });
        }
        let bytes = alloc_bytes::<T>(len)?;
        let ptr = self.rt.driver().alloc(device_bytes(bytes), self.raw())?;
        Ok(self.own(ptr, len))
    }

    /// [`TaskContext::alloc`] in a graphed scope (DESIGN "Graphs without
    /// capture by hand"): the block the same allocation (named as an
    /// operation is) had in an earlier run, if its buffer was dropped and
    /// it has this size, else a new one; the buffer gives it back to
    /// `memory` at its drop. Its earlier uses (the last run's graph) are
    /// handed to this stream before it is stamped written here, so the
    /// graph that uses it now runs after them.
    fn alloc_in_graph<T: DeviceRepr>(
        &self,
        memory: &Arc<GraphMemory>,
        len: usize,
    ) -> Result<Buffer<T>> {
        let bytes = alloc_bytes::<T>(len)?;
        let key = self.next_op_key();
        let (ptr, uses) = match memory.take(key, bytes) {
            Some(block) => block,
            None => {
                // Stream-ordered on the scope's stream, ahead of the
                // graph's launch there.
                let ptr = self.rt.driver().alloc(device_bytes(bytes), self.raw())?;
                self.rt.usage().device_allocated(bytes);
                (ptr, Uses::new())
            }
        };
        let mut b = Buffer {
            ptr,
            len,
            rt: self.rt.clone(),
            stamps: gpu_epoch::BufferStamps::from_uses(uses),
            range: crate::buffer::WHOLE,
            home: Some(Box::new(Home {
                memory: Arc::downgrade(memory),
                key,
            })),
            _t: PhantomData,
        };
        // On failure the buffer goes back with its uses, unchanged.
        let mem = super::tracked::mem_of(&b, Access::Write);
        self.hand_off_write(b.stamps.get_mut(), Some(mem))?;
        self.rt
            .ledger_rw()
            .stamp_write(b.stamps.get_mut(), self.sid());
        self.rt.core().streams.note_other(self.sid());
        Ok(b)
    }

    /// A buffer owning `ptr`, an allocation of `len` `T`s on this device
    /// that the runtime frees (stream-ordered) at its drop: counted among
    /// the live allocations and stamped as written on this stream (R1), as
    /// an allocation is. The caller has ordered this stream after every
    /// earlier use of the memory.
    pub(super) fn own<T: DeviceRepr>(&self, ptr: u64, len: usize) -> Buffer<T> {
        let rt = &self.rt;
        rt.usage().device_allocated(len * std::mem::size_of::<T>());
        let mut b = Buffer {
            ptr,
            len,
            rt: self.rt.clone(),
            stamps: gpu_epoch::BufferStamps::new(),
            range: crate::buffer::WHOLE,
            home: None,
            _t: PhantomData,
        };
        rt.ledger_rw().stamp_write(b.stamps.get_mut(), self.sid());
        rt.core().streams.note_other(self.sid());
        b
    }

    /// A buffer of `len` zeros.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::alloc`].
    pub fn zeros<T: DeviceRepr>(&self, len: usize) -> Result<Buffer<T>> {
        let mut b = self.alloc::<T>(len)?;
        self.memset_zero(&mut b)?;
        Ok(b)
    }

    /// A buffer holding a copy of `src`.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::alloc`].
    pub fn from_host<T: DeviceRepr>(&self, src: &[T]) -> Result<Buffer<T>> {
        let mut b = self.alloc::<T>(src.len())?;
        self.copy_from_host(&mut b, src)?;
        Ok(b)
    }

    /// Sets every byte of `dst` to zero.
    ///
    /// # Errors
    ///
    /// A driver error, or [`Error::WrongDevice`].
    pub fn memset_zero<T: DeviceRepr>(
        &self,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.check(dst, "the destination buffer")?;
        let (ptr, bytes) = (dst.device_ptr(), dst.bytes());
        // Whole aligned words are set on the device; anything else (an odd
        // size, a view of bytes off a word boundary) is copied from zeros in
        // host memory, below.
        let words = bytes % 4 == 0 && ptr % 4 == 0;
        if !words {
            self.host_memory_outside_capture("zeroing a buffer of odd size or offset")?;
        }
        let drv = self.rt.driver();
        // `dst` is live and ordered for its bytes in both calls below:
        // `tracked` handed it to this stream for a write, it is borrowed
        // now, and its buffer's drop frees it only after a hand-off from
        // this stream (X4).
        let submit = |_: &[_], raw| {
            if words {
                // SAFETY: as above, for `bytes / 4` words, 4-aligned
                // (checked above).
                unsafe { drv.memset_u32(ptr, 0, bytes / 4, raw) }
            } else {
                let zeros = vec![0u8; bytes];
                // SAFETY: as above; `zeros` is pageable memory of `bytes`,
                // staged by the call, and no capture takes it (checked
                // above).
                unsafe { drv.copy_htod(ptr, zeros.as_ptr(), bytes, raw) }
            }
        };
        let touches = &mut [Touch::write(dst)];
        if !words {
            return self.tracked("memset", touches, submit);
        }
        // A graphed scope records a fill of words as a node.
        self.tracked_node(
            "memset",
            touches,
            |_| NodeOp::Memset {
                dst: ptr,
                value: 0,
                count: bytes / 4,
            },
            submit,
        )
    }
}
