//! The page-locked host blocks a runtime keeps (pinning pages costs
//! milliseconds): those handed out (a safe copy from one must wait for the
//! device, DESIGN "Soundness") and those cached for reuse, by size. The
//! policy (when to allocate, free or wait) is the staging buffers'
//! (staging.rs); this type keeps the two lists.

use parking_lot::Mutex;

/// At most this many bytes are cached; a block given back beyond it is
/// freed.
const CACHE_LIMIT: usize = 1 << 30;

/// The two lists, each of (address, bytes).
#[derive(Debug, Default)]
pub(crate) struct PinnedPool {
    cache: Mutex<Vec<(usize, usize)>>,
    live: Mutex<Vec<(usize, usize)>>,
}

impl PinnedPool {
    /// A cached block of exactly `bytes`, taken out of the cache.
    pub(crate) fn take_cached(&self, bytes: usize) -> Option<usize> {
        let mut c = self.cache.lock();
        let i = c.iter().position(|&(_, b)| b == bytes)?;
        Some(c.swap_remove(i).0)
    }

    /// Notes the block at `addr` handed out.
    pub(crate) fn hand_out(&self, addr: usize, bytes: usize) {
        self.live.lock().push((addr, bytes));
    }

    /// Whether `[addr, addr + bytes)` overlaps a block handed out.
    pub(crate) fn overlaps_live(&self, addr: usize, bytes: usize) -> bool {
        self.live
            .lock()
            .iter()
            .any(|&(p, n)| addr < p + n && p < addr + bytes.max(1))
    }

    /// The block at `addr` back from its holder: cached, and `true`, if
    /// the cache has room; else `false` (the caller frees it).
    pub(crate) fn give_back(&self, addr: usize, bytes: usize) -> bool {
        {
            let mut live = self.live.lock();
            if let Some(i) = live.iter().position(|&(p, _)| p == addr) {
                live.swap_remove(i);
            }
        }
        let mut c = self.cache.lock();
        let cached: usize = c.iter().map(|&(_, b)| b).sum();
        if cached + bytes <= CACHE_LIMIT {
            c.push((addr, bytes));
            return true;
        }
        false
    }

    /// Every cached block, taken out (to be freed).
    pub(crate) fn drain_cache(&self) -> Vec<(usize, usize)> {
        std::mem::take(&mut *self.cache.lock())
    }
}
