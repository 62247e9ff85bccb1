//! The host backend's wait audit (`Driver::audit_wait`, [`WaitAudit`]):
//! before each device wait a hand-off inserts, an operation on the waiting
//! stream that asks the race detector whether the wait orders anything
//! the access it is for needs and nothing ordered before (judged in
//! `stream::execute`, with what the host knew at the hand-off's decision).

use super::detector::Clock;
use super::stream::{Op, OpKind};
use super::HostDriver;
use crate::driver::{MemAccess, RawEvent, RawStream, WaitAudit};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The wait audit's switch and counts.
#[derive(Default)]
pub(super) struct Audit {
    on: AtomicBool,
    needed: AtomicU64,
    unnecessary: AtomicU64,
    unclassified: AtomicU64,
}

std::thread_local! {
    /// What the host knew complete at this thread's last hand-off decision
    /// (`Driver::audit_decision`), while the audit is on.
    static DECIDED: std::cell::RefCell<Option<Clock>> = const { std::cell::RefCell::new(None) };
}

impl Audit {
    /// Counts a judged wait.
    pub(super) fn count(&self, needed: bool) {
        let c = if needed {
            &self.needed
        } else {
            &self.unnecessary
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// On (the counts from zero) or off.
    pub(super) fn set(&self, on: bool) {
        if on {
            for c in [&self.needed, &self.unnecessary, &self.unclassified] {
                c.store(0, Ordering::Relaxed);
            }
        }
        self.on.store(on, Ordering::Relaxed);
    }

    pub(super) fn counts(&self) -> WaitAudit {
        WaitAudit {
            needed: self.needed.load(Ordering::Relaxed),
            unnecessary: self.unnecessary.load(Ordering::Relaxed),
            unclassified: self.unclassified.load(Ordering::Relaxed),
        }
    }
}

/// `Driver::audit_decision`: what the host knows now, for this thread's
/// next audited waits.
pub(super) fn decision(d: &HostDriver) {
    if d.shared.audit.on.load(Ordering::Relaxed) {
        let now = d.shared.host_clock.lock().clone();
        DECIDED.with(|c| *c.borrow_mut() = Some(now));
    }
}

/// `Driver::audit_wait`: queues the audit of the wait of `s` on `e` for
/// `on_behalf` (or counts it unclassified).
pub(super) fn wait(d: &HostDriver, s: RawStream, e: RawEvent, on_behalf: Option<MemAccess>) {
    let audit = &d.shared.audit;
    if !audit.on.load(Ordering::Relaxed) {
        return;
    }
    let Some(on_behalf) = on_behalf else {
        audit.unclassified.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // The record the wait will see (the event's lock let go before the
    // queue's is taken: `record`'s order).
    let Some(of) = d.event(e).ok().and_then(|ev| ev.lock().clone()) else {
        // An event never recorded: the wait orders nothing.
        audit.count(false);
        return;
    };
    let Ok(st) = d.stream(s) else { return };
    // What the host knew at the decision (else now: later than it).
    let host_clock = DECIDED
        .with(|c| c.borrow().clone())
        .unwrap_or_else(|| d.shared.host_clock.lock().clone());
    let mut q = st.queue.lock();
    if q.capture.is_some() {
        return;
    }
    q.ops.push_back(Op {
        kind: OpKind::Audit { of, on_behalf },
        accesses: Vec::new(),
        host_clock,
    });
    q.pending += 1;
    st.work.notify_one();
}
