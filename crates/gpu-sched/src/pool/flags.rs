//! The end-of-work flags (DESIGN "Cold start"): a word of mapped pinned
//! memory per stream, which the device sets when a task's work is done, so
//! that the pool sees a stream idle with a load ([`Tail::Written`]). Off
//! by default ([`crate::RuntimeOptions::end_flags`]).

use super::{StreamPool, Tail};
use crate::driver::{Driver, RawEvent};
use gpu_epoch::StreamId;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// The end-of-work flags: `bytes` of mapped pinned memory, seen by the host
/// at `host` and by the device at `dev`.
#[derive(Debug)]
pub(super) struct Flags {
    pub(super) host: usize,
    pub(super) dev: u64,
    pub(super) bytes: usize,
}

impl StreamPool {
    /// Allocates the end-of-work flags. Without them (not asked for, or the
    /// allocation refused) every stream whose task left work in flight is
    /// queried instead.
    pub(crate) fn init_flags(&self, driver: &dyn Driver) {
        let bytes = self.issued.len() * 4;
        match driver.alloc_host(bytes, true) {
            Ok((host, dev)) => {
                // SAFETY: `host` is `bytes` of fresh host memory; zero, so
                // that no flag holds a value before the device writes one
                // (values asked for start at 1).
                unsafe { std::ptr::write_bytes(host, 0, bytes) };
                let _ = self.flags.set(Flags {
                    host: host as usize,
                    dev,
                    bytes,
                });
            }
            Err(_) => self.flags_off.store(true, Relaxed),
        }
    }

    /// The flags' memory, to free once every stream is drained.
    pub(crate) fn flag_memory(&self) -> Option<(*mut u8, usize)> {
        self.flags.get().map(|f| (f.host as *mut u8, f.bytes))
    }

    /// How `id`'s task ends: asks the device to set `id`'s flag once
    /// everything queued on the stream so far is done. [`Tail::Unknown`] if
    /// there are no flags or the driver refuses.
    pub(crate) fn end_of_work(&self, driver: &dyn Driver, id: StreamId) -> Tail {
        let Some(f) = self.flags.get() else {
            return Tail::Unknown;
        };
        if self.flags_off.load(Relaxed) {
            return Tail::Unknown;
        }
        let i = id.index();
        // Only the task that holds the stream writes its entry.
        let v = self.issued[i].load(Relaxed).wrapping_add(1).max(1);
        self.issued[i].store(v, Relaxed);
        // An event recorded first, so that the write (with its memory
        // barrier) only follows the stream's work: written straight behind
        // a running kernel, it sometimes held kernels launched just after
        // it on other streams back until that kernel ended (8 siblings of a
        // 40 ms kernel ran in two rounds in 20 of 112 fresh processes on an
        // H200; DESIGN "Cold start"). Without an event (none could be made, or
        // the record failed) the write goes alone: still correct.
        if let Some(e) = self.end_event(driver, i) {
            let _ = driver.record(e, self.raw(id));
        }
        // SAFETY: the flags are `issued.len()` 4-aligned words of mapped
        // pinned memory of `driver` (`init_flags`) and `i` indexes one; they
        // are freed only when the runtime drops, after every stream was
        // synchronized, and the host only loads them atomically
        // (`value_written`).
        match unsafe { driver.write_value(self.raw(id), f.dev + 4 * i as u64, v) } {
            Ok(()) => Tail::Written(v),
            Err(_) => {
                self.flags_off.store(true, Relaxed);
                Tail::Unknown
            }
        }
    }

    /// The end event of the stream at index `i`, made at its first use.
    /// Only the task that holds the stream (by itself) calls this.
    fn end_event(&self, driver: &dyn Driver, i: usize) -> Option<RawEvent> {
        match self.end_events[i].load(Acquire) {
            0 => {
                let e = driver.create_event(false).ok()?;
                self.end_events[i].store(e.0, Release);
                Some(e)
            }
            e => Some(RawEvent(e)),
        }
    }

    /// The end event of `id`, taken out (the stream goes, or the pool).
    pub(crate) fn take_end_event(&self, id: StreamId) -> Option<RawEvent> {
        match self.end_events[id.index()].swap(0, AcqRel) {
            0 => None,
            e => Some(RawEvent(e)),
        }
    }

    /// Whether `id`'s flag holds `v`: its last task's work is done.
    pub(super) fn written(&self, driver: &dyn Driver, id: StreamId, v: u32) -> bool {
        let Some(f) = self.flags.get() else {
            return false;
        };
        // SAFETY: the flags are 4-aligned mapped pinned memory of `driver`,
        // `issued.len()` words, alive until the runtime drops (after every
        // stream is drained); `id` indexes one of them.
        unsafe { driver.value_written((f.host + 4 * id.index()) as *const u32, v) }
    }
}
