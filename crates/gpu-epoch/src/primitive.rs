//! The switch between std and loom primitives (crossbeam's `mod primitive`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: every ledger critical section leaves its
/// data consistent before anything in it can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Waiting for a short critical section on another thread: spin a while,
/// then yield the processor (crossbeam's `Backoff`).
#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Loom's stand-in for crossbeam's `Backoff`: each round yields, so that
/// loom's scheduler runs the thread being waited for.
#[cfg(loom)]
pub(crate) struct Backoff;

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }

    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
    }
}
