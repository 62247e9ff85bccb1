//! The host backend's race detector: vector clocks over its streams, and
//! per allocation the accesses not yet ordered before everything: two
//! accesses to one byte range, unordered, one a write, are a race; so is a
//! touch of freed or unknown memory.
//!
//! Accesses that every stream's clock and the host's order are pruned from
//! the history (they can never race again), whenever the history has grown
//! to twice what the last pruning kept.

use crate::driver::MemAccess;
use gpu_epoch::Access;
use std::collections::BTreeMap;

/// A vector clock over host streams (index: stream clock index).
#[derive(Clone, Default, Debug)]
pub(super) struct Clock(Vec<u64>);

impl Clock {
    pub(super) fn get(&self, i: usize) -> u64 {
        self.0.get(i).copied().unwrap_or(0)
    }
    pub(super) fn tick(&mut self, i: usize) -> u64 {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] += 1;
        self.0[i]
    }
    pub(super) fn merge(&mut self, other: &Clock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }
    /// The greatest lower bound with `other`: what both know.
    pub(super) fn meet(&mut self, other: &Clock) {
        for (i, a) in self.0.iter_mut().enumerate() {
            *a = (*a).min(other.get(i));
        }
    }
    /// Component `i` at least `v`.
    pub(super) fn raise(&mut self, i: usize, v: u64) {
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].max(v);
    }
}

/// An allocation's access history for the race detector.
#[derive(Debug, Default)]
struct Shadow {
    len: usize,
    entries: Vec<AccessRec>,
}

#[derive(Clone, Copy, Debug)]
struct AccessRec {
    start: u64,
    end: u64,
    stream: usize,
    tick: u64,
    write: bool,
}

/// The fewest entries at which pruning is due.
const PRUNE_MIN: usize = 1024;

pub(super) struct Detector {
    allocs: BTreeMap<u64, Shadow>,
    pub(super) races: Vec<String>,
    /// Entries over every allocation's history.
    entries: usize,
    /// Pruning is due past this many entries: twice what the last kept, at
    /// least [`PRUNE_MIN`] (amortized: a pruning's cost is at most that of
    /// the checks since the last).
    prune_at: usize,
}

impl Default for Detector {
    fn default() -> Self {
        Detector {
            allocs: BTreeMap::new(),
            races: Vec::new(),
            entries: 0,
            prune_at: PRUNE_MIN,
        }
    }
}

impl Detector {
    /// A new allocation of `len` bytes at `ptr`, with no access yet.
    pub(super) fn allocated(&mut self, ptr: u64, len: usize) {
        let entries = Vec::new();
        if let Some(old) = self.allocs.insert(ptr, Shadow { len, entries }) {
            self.entries -= old.entries.len();
        }
    }

    /// The allocation at `ptr` is freed: later touches are reported.
    pub(super) fn freed(&mut self, ptr: u64) {
        if let Some(old) = self.allocs.remove(&ptr) {
            self.entries -= old.entries.len();
        }
    }

    /// Entries in the history, over every allocation.
    #[cfg(test)]
    pub(super) fn history_len(&self) -> usize {
        self.entries
    }

    /// Whether the history grew enough since the last pruning for
    /// [`Detector::prune`] to be due.
    pub(super) fn prune_due(&self) -> bool {
        self.entries > self.prune_at
    }

    /// Drops the entries that `floor` orders: `floor` is what every
    /// operation that runs from now on is ordered after (on every stream;
    /// the host backend's `floor`), so such an entry is ordered before any
    /// later access and can never be reported: detection stays exact.
    pub(super) fn prune(&mut self, floor: &Clock) {
        let mut kept = 0;
        for shadow in self.allocs.values_mut() {
            shadow.entries.retain(|e| e.tick > floor.get(e.stream));
            kept += shadow.entries.len();
        }
        self.entries = kept;
        self.prune_at = (2 * kept).max(PRUNE_MIN);
    }

    /// By stream index, the latest op (tick) of that stream in the history
    /// (0 where none).
    pub(super) fn newest_ticks(&self) -> Clock {
        let mut c = Clock::default();
        for e in self.allocs.values().flat_map(|s| &s.entries) {
            c.raise(e.stream, e.tick);
        }
        c
    }

    /// The wait audit: whether a wait of `stream`, which knew `knew`
    /// before it and learns `taught` from it, orders before `acc` an
    /// earlier access to its memory that conflicts with it (one of the two
    /// a write) and that `knew` did not order.
    pub(super) fn newly_orders(
        &self,
        stream: usize,
        knew: &Clock,
        taught: &Clock,
        acc: &MemAccess,
    ) -> bool {
        let (start, end) = (acc.ptr, acc.ptr + acc.bytes as u64);
        let write = acc.access == Access::Write;
        let Some((&base, shadow)) = self.allocs.range(..=start).next_back() else {
            return false;
        };
        start < base + shadow.len as u64
            && shadow.entries.iter().any(|e| {
                e.stream != stream
                    && e.start < end
                    && start < e.end
                    && (write || e.write)
                    && knew.get(e.stream) < e.tick
                    && taught.get(e.stream) >= e.tick
            })
    }

    /// Checks `acc`, made by op `tick` of `stream` (whose clock is `clock`),
    /// against the history of its allocation, then adds it there.
    pub(super) fn check(
        &mut self,
        stream: usize,
        clock: &Clock,
        tick: u64,
        acc: &MemAccess,
        what: &str,
    ) {
        if acc.bytes == 0 {
            return;
        }
        let (start, end) = (acc.ptr, acc.ptr + acc.bytes as u64);
        let write = acc.access == Access::Write;
        let Some((&base, shadow)) = self.allocs.range_mut(..=start).next_back() else {
            self.races.push(format!(
                "{what} on stream {stream} touches unknown memory {start:#x}"
            ));
            return;
        };
        if end > base + shadow.len as u64 {
            self.races.push(format!(
                "{what} on stream {stream} touches {start:#x}..{end:#x}, outside its allocation (freed or out of bounds)"
            ));
            return;
        }
        let mut found = Vec::new();
        for e in &shadow.entries {
            let overlaps = e.start < end && start < e.end;
            let ordered = e.stream == stream || clock.get(e.stream) >= e.tick;
            if overlaps && (write || e.write) && !ordered {
                found.push(format!(
                    "race: {what} ({}) on stream {stream} at {start:#x}..{end:#x} is not ordered after a {} on stream {} (op {})",
                    if write { "write" } else { "read" },
                    if e.write { "write" } else { "read" },
                    e.stream,
                    e.tick
                ));
            }
        }
        self.races.extend(found);
        let before = shadow.entries.len();
        if write {
            shadow
                .entries
                .retain(|e| !(e.start >= start && e.end <= end));
        } else {
            shadow
                .entries
                .retain(|e| !(e.stream == stream && !e.write && e.start == start && e.end == end));
        }
        shadow.entries.push(AccessRec {
            start,
            end,
            stream,
            tick,
            write,
        });
        self.entries = self.entries + shadow.entries.len() - before;
    }
}
