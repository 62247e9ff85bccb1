//! Decision counters: how often each hand-off rule fired.

use crate::primitive::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// Why a hand-off needed no wait for one earlier use of a buffer (R9).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Reason {
    /// The buffer had no earlier use (it is not dirty).
    Clean,
    /// The earlier use was on the same stream: stream order covers it.
    SameStream,
    /// The host saw the earlier use's epoch finish (R5, R6, R7).
    Completed,
    /// The new stream already waited for an event covering the use (R8, X1).
    Ordered,
    /// The earlier use's stream was recycled since, so it was idle (R13).
    Recycled,
    /// The new stream is capturing: what it queues runs only when the
    /// graph is launched, and the launch hands every buffer the graph
    /// touches off again on its own stream (R12), so nothing is waited for
    /// while capturing (X7).
    Captured,
}

impl Reason {
    /// Every reason, in counter order.
    pub const ALL: [Reason; 6] = [
        Reason::Clean,
        Reason::SameStream,
        Reason::Completed,
        Reason::Ordered,
        Reason::Recycled,
        Reason::Captured,
    ];
}

/// Per-stream counters, written by the stream's users (relaxed increments
/// on a cache line of their own) and summed when read. `Relaxed`
/// throughout: counts order nothing, and a reader that needs exact counts
/// (a test) joined the threads that counted.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    avoided: [AtomicU64; Reason::ALL.len()],
    device_waits: AtomicU64,
    host_syncs: AtomicU64,
}

impl Counters {
    #[inline]
    pub(crate) fn avoided(&self, r: Reason) {
        bump(&self.avoided[r as usize]);
    }

    #[inline]
    pub(crate) fn avoided_n(&self, r: Reason, n: u64) {
        add(&self.avoided[r as usize], n);
    }

    #[inline]
    pub(crate) fn device_waits(&self, n: u64) {
        add(&self.device_waits, n);
    }

    #[inline]
    pub(crate) fn host_syncs(&self, n: u64) {
        add(&self.host_syncs, n);
    }

    pub(crate) fn add_to(&self, snap: &mut CounterSnapshot) {
        for (i, c) in self.avoided.iter().enumerate() {
            snap.avoided[i] += c.load(Relaxed);
        }
        snap.device_waits += self.device_waits.load(Relaxed);
        snap.host_syncs += self.host_syncs.load(Relaxed);
    }
}

#[inline]
fn bump(c: &AtomicU64) {
    add(c, 1);
}

/// Adds to a counter. A read-modify-write: the reclaim stream's counters are
/// written from every thread that drops a buffer, and tests compare exact
/// counts.
#[inline]
fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

/// A copy of the ledger's decision counters at one moment.
///
/// Counts are per earlier use examined: a write hand-off that finds a writer
/// and two readers on other streams counts three outcomes.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct CounterSnapshot {
    avoided: [u64; Reason::ALL.len()],
    /// Hand-offs that made the new stream wait on the device.
    pub device_waits: u64,
    /// Hand-offs that synchronized the old stream on the host.
    pub host_syncs: u64,
}

impl CounterSnapshot {
    /// How many waits were avoided for `reason`.
    pub fn avoided(&self, reason: Reason) -> u64 {
        self.avoided[reason as usize]
    }

    /// The change from `earlier` to `self`, counter by counter.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        let mut d = *self;
        for i in 0..Reason::ALL.len() {
            d.avoided[i] -= earlier.avoided[i];
        }
        d.device_waits -= earlier.device_waits;
        d.host_syncs -= earlier.host_syncs;
        d
    }

    /// Waits avoided by what the ledger knew: all reasons but
    /// [`Reason::SameStream`] and [`Reason::Clean`] (those involve no
    /// stream switch) and [`Reason::Captured`] (the switch waits at the
    /// graph's launch instead).
    pub fn switches_avoided(&self) -> u64 {
        self.avoided(Reason::Completed)
            + self.avoided(Reason::Ordered)
            + self.avoided(Reason::Recycled)
    }
}
