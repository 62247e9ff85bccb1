//! Sibling library calls merged at a graphed scope's build (DESIGN
//! "Graphs without capture by hand"): which recorded operations form a
//! group (one batched call), and the graph of the groups.
//!
//! # Why merging keeps the graph acyclic and correct
//!
//! An operation's depth is one more than the deepest operation it follows
//! (0 for none). Only operations of one depth are merged, so no two
//! members of a group are ordered (a path between two operations goes to
//! a strictly deeper one), hence none of them conflicts with another: the
//! recording orders every conflicting pair. A group follows every
//! operation its members follow: each edge of the merged graph still goes
//! from one depth to a deeper one, so it has no cycle, and each member
//! still runs after everything it followed.

use super::lanes::Deps;
use super::recording::Recording;
use crate::driver::{BatchTag, ChildNode, NodeOp};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// The groups of a recording: `group[j]` is the node of the operation in
/// canonical place `j`, nodes numbered in canonical order of their first
/// member; `members[g]`, node `g`'s operations (canonical places, in
/// order).
pub(crate) struct Plan {
    pub(crate) group: Vec<u32>,
    pub(crate) members: Vec<smallvec::SmallVec<[u32; 1]>>,
}

/// The batch tag of operation `op`, if any.
fn tag(op: &NodeOp) -> Option<(&ChildNode, &Arc<BatchTag>)> {
    match op {
        NodeOp::Child(c) => c.batch.as_ref().map(|t| (c, t)),
        _ => None,
    }
}

/// The groups of `rec` (`canon`: its canonical order): operations of one
/// depth, name, batched routine, key and buffer count. `None` where no
/// two operations merge (the graph is then built as recorded).
pub(crate) fn plan(rec: &Recording, canon: &[u32]) -> Option<Plan> {
    let n = rec.len();
    // Depths, in recording order (an operation follows earlier ones).
    let mut depth = vec![0u32; n];
    let mut any = false;
    for i in 0..n {
        depth[i] = rec
            .deps(i as u32)
            .iter()
            .map(|&d| depth[d as usize] + 1)
            .max()
            .unwrap_or(0);
        any |= tag(rec.op(i as u32)).is_some();
    }
    if !any {
        return None;
    }
    type Key<'a> = (u32, &'static str, usize, &'a [u64], usize);
    let mut groups: HashMap<Key<'_>, u32> = HashMap::new();
    let mut group = Vec::with_capacity(n);
    let mut members: Vec<smallvec::SmallVec<[u32; 1]>> = Vec::new();
    for (j, &i) in canon.iter().enumerate() {
        let g = match tag(rec.op(i)) {
            Some((c, t)) => {
                let key = (
                    depth[i as usize],
                    c.name,
                    t.routine,
                    &t.key[..],
                    c.mem.len(),
                );
                *groups.entry(key).or_insert_with(|| {
                    members.push(smallvec::SmallVec::new());
                    members.len() as u32 - 1
                })
            }
            None => {
                members.push(smallvec::SmallVec::new());
                members.len() as u32 - 1
            }
        };
        members[g as usize].push(j as u32);
        group.push(g);
    }
    if members.len() == n {
        return None;
    }
    Some(Plan { group, members })
}

impl Plan {
    /// The nodes' dependencies (`canon_deps`: the operations', by
    /// canonical place): each node follows the nodes of what its members
    /// follow.
    pub(crate) fn deps(&self, canon_deps: &Deps) -> Deps {
        self.members
            .iter()
            .map(|ms| {
                let mut d: smallvec::SmallVec<[u32; 4]> = ms
                    .iter()
                    .flat_map(|&j| {
                        canon_deps[j as usize]
                            .iter()
                            .map(|&x| self.group[x as usize])
                    })
                    .collect();
                d.sort_unstable();
                d.dedup();
                d
            })
            .collect()
    }

    /// The operations (canonical places) of the groups of two or more.
    pub(crate) fn batched(&self) -> impl Iterator<Item = (usize, &[u32])> + '_ {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, ms)| ms.len() > 1)
            .map(|(g, ms)| (g, &ms[..]))
    }

    /// The group's members' child nodes and their tag (`ops` by recorded
    /// index, `canon` the canonical order).
    pub(crate) fn children<'o>(
        ops: &'o [NodeOp],
        canon: &[u32],
        members: &[u32],
    ) -> (Vec<&'o ChildNode>, &'o BatchTag) {
        let nodes: Vec<&ChildNode> = members
            .iter()
            .map(|&j| {
                tag(&ops[canon[j as usize] as usize])
                    .expect("grouped by tag")
                    .0
            })
            .collect();
        let t = nodes[0].batch.as_deref().expect("grouped by tag");
        (nodes, t)
    }
}

/// A group's pointer arrays on the device: one allocation per graph,
/// written once (in stream order, before the graph's first launch), read
/// by each launch, freed in stream order after the last (its uses are
/// stamped at each launch).
pub(crate) struct PointerArrays {
    rt: crate::Runtime,
    ptr: u64,
    bytes: usize,
    uses: gpu_epoch::Uses,
}

impl PointerArrays {
    /// `words` copied to new device memory, in stream order on `raw`
    /// (the stream `sid` of the graph's launches).
    pub(crate) fn new(
        rt: &crate::Runtime,
        words: &[u64],
        sid: gpu_epoch::StreamId,
        raw: crate::driver::RawStream,
    ) -> Result<Self> {
        let bytes = std::mem::size_of_val(words);
        let drv = rt.driver();
        let ptr = drv.alloc(crate::runtime::device_bytes(bytes), raw)?;
        rt.usage().device_allocated(bytes);
        let mut arrays = PointerArrays {
            rt: rt.clone(),
            ptr,
            bytes,
            uses: gpu_epoch::Uses::new(),
        };
        // SAFETY: `ptr` is fresh memory of `bytes` allocated on `raw`, the
        // copy queued on `raw` after it; `words` is pageable (the driver
        // stages it before returning).
        unsafe { drv.copy_htod(ptr, words.as_ptr().cast(), bytes, raw)? };
        arrays.stamp(sid);
        Ok(arrays)
    }

    /// The arrays' device address.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Stamps a use on `sid` in its current epoch (a launch of the graph
    /// there, or the copy): the free waits for it.
    pub(crate) fn stamp(&mut self, sid: gpu_epoch::StreamId) {
        self.rt.ledger_rw().stamp_write(&mut self.uses, sid);
        self.rt.core().streams.note_other(sid);
    }
}

impl Drop for PointerArrays {
    fn drop(&mut self) {
        // SAFETY: an allocation of this runtime's driver of
        // `device_bytes(bytes)` (`new`), freed once; every use (the copy,
        // each launch of the graph) was stamped in `uses`, and the graph
        // that read it is destroyed first (its holder's field order).
        unsafe { self.rt.free_ordered(self.ptr, self.bytes, &self.uses) };
    }
}

/// The words of a group's pointer arrays (`BatchCall::pointer_array`):
/// buffer-major, each array the members' pointers to that buffer.
pub(crate) fn array_words(members: &[&ChildNode], out: &mut Vec<u64>) {
    let buffers = members[0].mem.len();
    for b in 0..buffers {
        out.extend(members.iter().map(|m| m.mem[b].ptr));
    }
}

/// How a graph build makes the node of a group (`members`, at least two,
/// with their tag, the device address of their pointer arrays, and the
/// build's stream slot): the context layer's `batched_node`, passed down
/// by the graphed scope.
pub(crate) type Merge<'a> = &'a dyn Fn(&[&ChildNode], &BatchTag, u64, usize) -> Result<NodeOp>;
