//! The host backend's captures and graphs: the operations a capture
//! records, with their dependencies, and the orders a graph's launch
//! replays them in.

use super::stream::Op;
use std::sync::atomic::AtomicU64;

/// A capture in progress on a host stream: the operations, each with the
/// operations it depends on (by index). As on CUDA, an operation depends on
/// the stream's dependency set: the previous operation, unless
/// `capture_set_deps` set another.
#[derive(Default)]
pub(super) struct HostCapture {
    pub(super) ops: Vec<Op>,
    pub(super) deps: Vec<Vec<usize>>,
    /// What the next operation depends on.
    pub(super) next: Vec<usize>,
}

impl HostCapture {
    pub(super) fn push(&mut self, op: Op) {
        let i = self.ops.len();
        self.ops.push(op);
        self.deps.push(std::mem::replace(&mut self.next, vec![i]));
    }
}

/// An ended host capture: its operations and their dependencies, and how
/// often it was launched.
pub(super) struct HostGraph {
    pub(super) ops: Vec<Op>,
    pub(super) deps: Vec<Vec<usize>>,
    pub(super) launches: AtomicU64,
}

impl HostGraph {
    /// The order in which launch number `k` replays the operations: one the
    /// dependencies allow, the ready operation with the highest priority
    /// first: the latest captured at the first launch, the earliest at the
    /// second, a pseudo-random one after. Independent operations then run
    /// in other orders than their capture's, so that a dependency the
    /// capture missed shows as a wrong value in the host backend's tests,
    /// as it would as a race on a GPU.
    pub(super) fn replay_order(&self, k: u64) -> Vec<usize> {
        let n = self.ops.len();
        let priority = |i: usize| -> u64 {
            match k {
                0 => i as u64,
                1 => (n - i) as u64,
                _ => {
                    // SplitMix64 of (launch, index).
                    let mut z = ((k << 32) ^ i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^ (z >> 31)
                }
            }
        };
        let mut waiting: Vec<usize> = self.deps.iter().map(Vec::len).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, d) in self.deps.iter().enumerate() {
            for &j in d {
                dependents[j].push(i);
            }
        }
        let mut ready: std::collections::BinaryHeap<(u64, usize)> = (0..n)
            .filter(|&i| waiting[i] == 0)
            .map(|i| (priority(i), i))
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some((_, i)) = ready.pop() {
            order.push(i);
            for &d in &dependents[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    ready.push((priority(d), d));
                }
            }
        }
        debug_assert_eq!(
            order.len(),
            n,
            "a captured operation depends on a later one"
        );
        order
    }
}
