//! A sequence lock (crossbeam-utils' `atomic/seq_lock.rs`): writers take it
//! one at a time with a compare-and-swap and let go with a store; readers take
//! no lock: they read, then check that no writer came in between.
//!
//! ## Memory ordering
//!
//! `seq` is even while nobody writes and odd while a writer does; each write
//! section adds 2. The data it guards are atomics accessed `Relaxed`.
//!
//! - [`SeqLock::write`]: compare-and-swap even to odd (`Acquire`: the
//!   section's accesses stay after it), then `fence(Release)`: a reader whose
//!   data load sees a store of the section synchronizes with this fence
//!   through its own `fence(Acquire)`, and then sees the odd count (or later).
//! - The guard's drop: a store of the count + 2 (`Release`), which pairs with
//!   [`SeqLock::optimistic_read`]'s `Acquire` load: a reader that starts from
//!   that count sees every store of the section.
//! - [`SeqLock::validate_read`]: `fence(Acquire)` (the reader's data loads
//!   stay before it), then a `Relaxed` load of the count.

use crate::primitive::{fence, AtomicU64, Backoff};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The lock alone: the data it guards live beside it.
#[derive(Debug)]
pub(crate) struct SeqLock {
    seq: AtomicU64,
}

impl SeqLock {
    pub(crate) fn new() -> Self {
        SeqLock {
            seq: AtomicU64::new(0),
        }
    }

    /// The stamp to validate reads against; `None` while a write is in
    /// progress.
    #[inline]
    pub(crate) fn optimistic_read(&self) -> Option<u64> {
        let s = self.seq.load(Acquire);
        (s & 1 == 0).then_some(s)
    }

    /// Whether no write section began since `stamp` was taken: the loads made
    /// in between saw one consistent state.
    #[inline]
    pub(crate) fn validate_read(&self, stamp: u64) -> bool {
        fence(Acquire);
        self.seq.load(Relaxed) == stamp
    }

    /// Opens a write section, ended when the guard drops; waits for a writer
    /// in one (write sections are a few stores long).
    #[inline]
    pub(crate) fn write(&self) -> SeqLockWriteGuard<'_> {
        let backoff = Backoff::new();
        loop {
            let s = self.seq.load(Relaxed);
            if s & 1 == 0
                && self
                    .seq
                    .compare_exchange_weak(s, s + 1, Acquire, Relaxed)
                    .is_ok()
            {
                fence(Release);
                return SeqLockWriteGuard { lock: self, seq: s };
            }
            backoff.snooze();
        }
    }
}

/// A write section of a [`SeqLock`]; ends on drop.
#[derive(Debug)]
pub(crate) struct SeqLockWriteGuard<'a> {
    lock: &'a SeqLock,
    /// The (even) count the section began from.
    seq: u64,
}

impl Drop for SeqLockWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lock.seq.store(self.seq + 2, Release);
    }
}
