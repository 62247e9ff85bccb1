//! Buffers' frees whose hand-off to the reclaim stream failed on a live
//! context, or waits for a graph not launched yet (`handoff.rs` decides):
//! kept, and tried again at the next free, synchronize and graph launch,
//! and at the runtime's drop.

use gpu_epoch::Uses;
use parking_lot::Mutex;

/// The frees kept: (address, bytes, uses).
#[derive(Debug, Default)]
pub(crate) struct DeferredFrees(Mutex<Vec<(u64, usize, Uses)>>);

impl DeferredFrees {
    /// Keeps the free of `ptr` (`bytes`, used as `uses`) for later.
    pub(crate) fn keep(&self, ptr: u64, bytes: usize, uses: &Uses) {
        self.0.lock().push((ptr, bytes, uses.clone()));
    }

    /// Every free kept, taken out (none: no allocation).
    pub(crate) fn take_all(&self) -> Vec<(u64, usize, Uses)> {
        let mut d = self.0.lock();
        if d.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut *d)
    }
}
