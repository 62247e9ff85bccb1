//! The event pool (X5): pooled driver events, each with its ledger
//! coverage, handed out and taken back, created only when the pool is
//! empty.

use crate::driver::{Driver, RawEvent};
use crate::error::Result;
use gpu_epoch::EventCoverage;
use parking_lot::Mutex;

/// A pooled driver event with its ledger coverage.
#[derive(Debug)]
pub(crate) struct PooledEvent {
    pub(crate) raw: RawEvent,
    pub(crate) coverage: EventCoverage,
}

/// Events: handed out and taken back, created only when the pool is empty.
#[derive(Debug)]
#[allow(clippy::vec_box)] // events go in and out as boxes: moving one is a pointer copy
pub(crate) struct EventPool {
    free: Mutex<Vec<Box<PooledEvent>>>,
    created: std::sync::atomic::AtomicUsize,
}

impl EventPool {
    pub(crate) fn new() -> Self {
        EventPool {
            free: Mutex::new(Vec::new()),
            created: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub(crate) fn warm(&self, driver: &dyn Driver, n: usize) -> Result<()> {
        for _ in 0..n {
            let e = self.create(driver)?;
            self.free.lock().push(e);
        }
        Ok(())
    }

    fn create(&self, driver: &dyn Driver) -> Result<Box<PooledEvent>> {
        let raw = driver.create_event(false)?;
        self.created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Box::new(PooledEvent {
            raw,
            coverage: EventCoverage::new(),
        }))
    }

    #[inline]
    pub(crate) fn take(&self, driver: &dyn Driver) -> Result<Box<PooledEvent>> {
        if let Some(e) = self.free.lock().pop() {
            return Ok(e);
        }
        self.create(driver)
    }

    #[inline]
    pub(crate) fn give(&self, e: Box<PooledEvent>) {
        self.free.lock().push(e);
    }

    pub(crate) fn created(&self) -> usize {
        self.created.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn idle_count(&self) -> usize {
        self.free.lock().len()
    }

    #[allow(clippy::vec_box)]
    pub(crate) fn drain(&self) -> Vec<Box<PooledEvent>> {
        std::mem::take(&mut *self.free.lock())
    }
}
