//! Gates: an operation that blocks its stream until the test opens it. On
//! CUDA a kernel spinning on a flag in pinned host memory mapped into the
//! device (never managed memory), with a timeout that sets a second flag; on
//! the host backend a blocking operation.

use crate::error::Result;
use crate::fence::Fence;
use crate::runtime::Runtime;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// A gate: two flags (`open`, `timed_out`) in mapped pinned host memory.
pub struct Gate {
    pub(crate) rt: Runtime,
    /// The flags, `open` then `timed_out`, 4 bytes each.
    pub(crate) host: *mut u8,
    /// Their device address.
    pub(crate) dev: u64,
    /// A fence after each operation blocked on the gate: the flags are
    /// freed only once all of them passed (fences, not streams: a stream
    /// may be recycled or retired once its task ends, DESIGN "Streams are a resource").
    pub(crate) used_by: Mutex<Vec<Fence>>,
    /// An operation blocked on the gate that no fence follows (recording it
    /// failed): the drop synchronizes the device before freeing the flags.
    pub(crate) unfenced: std::sync::atomic::AtomicBool,
}

// SAFETY: the flags are only touched through atomics (host) and volatile
// loads/stores (device); the pointer is owned by the gate.
unsafe impl Send for Gate {}
// SAFETY: as above.
unsafe impl Sync for Gate {}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("open", &self.is_open())
            .field("timed_out", &self.timed_out())
            .finish()
    }
}

const GATE_BYTES: usize = 256;

impl Runtime {
    /// A closed gate.
    ///
    /// # Errors
    ///
    /// A driver error from allocating mapped pinned memory.
    pub fn gate(&self) -> Result<Gate> {
        let (host, dev) = self.driver().alloc_host(GATE_BYTES, true)?;
        self.usage().pinned_allocated(GATE_BYTES);
        let g = Gate {
            rt: self.clone(),
            host,
            dev,
            used_by: Mutex::new(Vec::new()),
            unfenced: std::sync::atomic::AtomicBool::new(false),
        };
        g.flag(0).store(0, Ordering::SeqCst);
        g.flag(1).store(0, Ordering::SeqCst);
        Ok(g)
    }
}

impl Gate {
    fn flag(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `host` points to GATE_BYTES of live, 4-aligned pinned
        // memory owned by the gate; i is 0 or 1.
        unsafe { &*(self.host.add(4 * i) as *const AtomicU32) }
    }

    /// Opens the gate: every operation blocked on it proceeds.
    pub fn open(&self) {
        self.flag(0).store(1, Ordering::SeqCst);
    }

    /// Whether the gate was opened.
    pub fn is_open(&self) -> bool {
        self.flag(0).load(Ordering::SeqCst) != 0
    }

    /// Whether an operation blocked on the gate gave up waiting.
    pub fn timed_out(&self) -> bool {
        self.flag(1).load(Ordering::SeqCst) != 0
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Nothing may still spin on the flags when they are freed.
        self.open();
        if self.unfenced.load(Ordering::SeqCst)
            && self.rt.wait_past_errors(|| self.rt.synchronize()).is_err()
        {
            return;
        }
        for f in self.used_by.lock().drain(..) {
            if self
                .rt
                .wait_past_errors(|| f.clone().synchronize())
                .is_err()
            {
                // Broken context: something may still read the flags; keep
                // their memory.
                return;
            }
        }
        // SAFETY: the flags came from `alloc_host` with `GATE_BYTES`, and are
        // freed once, here; every operation blocked on the gate passed (the
        // fences above, or the device's synchronize for one without a fence,
        // of a stream of this runtime: `block_on` checks; captures are
        // refused), and `&mut self` leaves no reference to them.
        let _ = unsafe { self.rt.driver().free_host(self.host, GATE_BYTES) };
        self.rt.usage().pinned_freed(GATE_BYTES);
    }
}
