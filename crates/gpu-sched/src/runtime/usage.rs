//! What a runtime's memory holds, counted as it is allocated and freed
//! ([`Runtime::live`](crate::Runtime::live) reads it): live device
//! allocations and their bytes, and live page-locked host bytes (staging
//! blocks cached or handed out, gates' flags).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The counts; each method is one atomic update (counts, not orders:
/// `Relaxed`).
#[derive(Debug, Default)]
pub(crate) struct Usage {
    allocations: AtomicUsize,
    device_bytes: AtomicUsize,
    pinned_bytes: AtomicUsize,
}

impl Usage {
    /// A device allocation of `bytes` was made.
    #[inline]
    pub(crate) fn device_allocated(&self, bytes: usize) {
        self.allocations.fetch_add(1, Relaxed);
        self.device_bytes.fetch_add(bytes, Relaxed);
    }

    /// A device allocation of `bytes` was freed (or left the runtime).
    #[inline]
    pub(crate) fn device_freed(&self, bytes: usize) {
        self.allocations.fetch_sub(1, Relaxed);
        self.device_bytes.fetch_sub(bytes, Relaxed);
    }

    /// `bytes` of page-locked host memory were allocated.
    pub(crate) fn pinned_allocated(&self, bytes: usize) {
        self.pinned_bytes.fetch_add(bytes, Relaxed);
    }

    /// `bytes` of page-locked host memory were freed.
    pub(crate) fn pinned_freed(&self, bytes: usize) {
        self.pinned_bytes.fetch_sub(bytes, Relaxed);
    }

    /// (live device allocations, their bytes, live page-locked bytes).
    pub(crate) fn now(&self) -> (usize, usize, usize) {
        (
            self.allocations.load(Relaxed),
            self.device_bytes.load(Relaxed),
            self.pinned_bytes.load(Relaxed),
        )
    }
}
