//! The operations a graph is built from without a stream capture (DESIGN "Graphs without capture by hand"): a
//! graphed scope records each of its operations as one of these, with the
//! nodes it follows, and a backend builds an executable graph of them
//! through its explicit graph API (`Driver::graph_build`), or sets a
//! kernel node's arguments in place (`Driver::graph_set_kernel`).

use super::{Driver, HostCall, KernelCall, MemAccess};
use crate::kernel::{BuiltinHost, ErasedHost, KernelArg, LaunchConfig};
use std::sync::Arc;

/// One recorded operation: what a node of a built graph runs.
// Most recorded operations are launches: boxing them would add an
// allocation to each and save no memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(crate) enum NodeOp {
    /// A kernel launch.
    Kernel(KernelNode),
    /// A device-to-device copy of `bytes` (both within one device).
    Copy { dst: u64, src: u64, bytes: usize },
    /// `count` 32-bit words at `dst` set to `value`.
    Memset { dst: u64, value: u32, count: usize },
    /// A foreign operation (a library call, a user's code that queues
    /// work itself), captured on a stream of its own into a graph of its
    /// own, run as a child graph node.
    Child(ChildNode),
}

/// A graph captured from one foreign operation of a graphed scope
/// (`Driver::end_capture_child`): a `CUgraph` on CUDA (not instantiated),
/// a host graph on the host backend. Destroyed with its last holder: a
/// graph built from it took a copy (CUDA clones a child graph into its
/// node; the host backend's node holds its operations).
pub(crate) struct ChildGraph {
    pub(crate) raw: u64,
    driver: Arc<dyn Driver>,
}

impl ChildGraph {
    /// Owns `raw`, a child graph of `driver`'s.
    pub(crate) fn new(raw: u64, driver: Arc<dyn Driver>) -> Self {
        ChildGraph { raw, driver }
    }
}

impl Drop for ChildGraph {
    fn drop(&mut self) {
        self.driver.child_destroy(self.raw);
    }
}

/// A recorded foreign operation: its name, its captured graph and what it
/// touches.
#[derive(Clone)]
pub(crate) struct ChildNode {
    pub(crate) name: &'static str,
    pub(crate) graph: Arc<ChildGraph>,
    /// What the operation touches (its declared buffers, in the declared
    /// order).
    pub(crate) mem: smallvec::SmallVec<[MemAccess; 4]>,
    /// Its batched form, where it declared one (`Foreign::batchable`):
    /// siblings of one tag are merged into one call when the graph is
    /// built.
    pub(crate) batch: Option<Arc<BatchTag>>,
}

/// What merges sibling foreign operations into one batched call
/// (`Foreign::batchable`): the batched routine and the call's key.
/// Operations of one name, routine and key, none depending on another,
/// are one group.
pub(crate) struct BatchTag {
    /// The routine's identity (its address).
    pub(crate) routine: usize,
    /// The routine itself, opaque at this layer: `Foreign::batchable`
    /// makes it and the graph build's merge calls it (both in
    /// `context/foreign/batch.rs`).
    pub(crate) form: Box<dyn std::any::Any + Send + Sync>,
    pub(crate) key: smallvec::SmallVec<[u64; 8]>,
}

/// A recorded kernel launch.
#[derive(Clone)]
pub(crate) struct KernelNode {
    /// `CUfunction` as an integer (0 on the host backend).
    pub(crate) handle: u64,
    /// The host implementation (the host backend runs it).
    pub(crate) host: OwnedHost,
    pub(crate) cfg: LaunchConfig,
    pub(crate) args: smallvec::SmallVec<[KernelArg; 8]>,
    /// The buffers' lengths in elements, for a host implementation.
    pub(crate) lens: smallvec::SmallVec<[usize; 4]>,
    /// What the launch touches (the host backend's race detector).
    pub(crate) mem: smallvec::SmallVec<[MemAccess; 4]>,
}

/// A kernel's host implementation, owned (a recorded launch outlives the
/// call that made it).
#[derive(Clone)]
pub(crate) enum OwnedHost {
    Builtin(&'static dyn BuiltinHost),
    User(Arc<ErasedHost>),
    None,
}

impl OwnedHost {
    /// The implementation's identity: two launches of one kernel have the
    /// same.
    fn id(&self) -> usize {
        match self {
            OwnedHost::Builtin(f) => *f as *const dyn BuiltinHost as *const () as usize,
            OwnedHost::User(f) => Arc::as_ptr(f) as *const () as usize,
            OwnedHost::None => 0,
        }
    }

    /// The borrowed form a launch takes.
    pub(crate) fn call(&self) -> HostCall<'_> {
        match self {
            OwnedHost::Builtin(f) => HostCall::Builtin(*f),
            OwnedHost::User(f) => HostCall::User(f),
            OwnedHost::None => HostCall::None,
        }
    }
}

impl KernelNode {
    /// A launch of `k` with these arguments, owned.
    pub(crate) fn new(
        k: &KernelCall<'_>,
        cfg: LaunchConfig,
        args: &[KernelArg],
        lens: &[usize],
        mem: &[MemAccess],
    ) -> Self {
        let host = match k.host {
            HostCall::Builtin(f) => OwnedHost::Builtin(f),
            HostCall::User(f) => OwnedHost::User(f.clone()),
            HostCall::None => OwnedHost::None,
        };
        KernelNode {
            handle: k.handle,
            host,
            cfg,
            // Copied whole (`from_slice`), not element by element.
            args: smallvec::SmallVec::from_slice(args),
            lens: smallvec::SmallVec::from_slice(lens),
            mem: smallvec::SmallVec::from_slice(mem),
        }
    }
}

/// Whether two arguments are of one kind (values of one size).
fn same_kind(x: &KernelArg, y: &KernelArg) -> bool {
    std::mem::discriminant(x) == std::mem::discriminant(y)
        && match (x, y) {
            (KernelArg::Value(a), KernelArg::Value(b)) => a.as_bytes().len() == b.as_bytes().len(),
            _ => true,
        }
}

/// Whether two arguments are the same bit for bit (a NaN scalar equals
/// itself; `0.0` and `-0.0` differ).
fn same_bits(x: &KernelArg, y: &KernelArg) -> bool {
    match (x, y) {
        (KernelArg::F32(a), KernelArg::F32(b)) => a.to_bits() == b.to_bits(),
        (KernelArg::F64(a), KernelArg::F64(b)) => a.to_bits() == b.to_bits(),
        // Every other kind holds its bits (`half`'s as `u16`).
        _ => x == y,
    }
}

/// How a recorded operation compares with the one a built graph holds in
/// its place.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Likeness {
    /// The same operation: the node runs it as it is.
    Same,
    /// The same kernel and configuration, other arguments (pointers,
    /// scalars): the node's arguments can be set in place.
    Arguments,
    /// A foreign operation of the same name, captured again: its child
    /// graph is set in place if the driver finds it of the same topology.
    Child,
    /// Another operation: the graph must be built again.
    Other,
}

impl NodeOp {
    /// A copy or fill of nothing: submitted on a stream it does nothing
    /// (the drivers skip it), and CUDA refuses it as a graph node.
    pub(crate) fn is_empty(&self) -> bool {
        match *self {
            NodeOp::Kernel(_) => false,
            NodeOp::Copy { bytes, .. } => bytes == 0,
            NodeOp::Memset { count, .. } => count == 0,
            NodeOp::Child(_) => false,
        }
    }

    /// How `self` compares with `other`.
    pub(crate) fn likeness(&self, other: &NodeOp) -> Likeness {
        match (self, other) {
            (NodeOp::Kernel(a), NodeOp::Kernel(b)) => {
                let shape = a.handle == b.handle
                    && a.host.id() == b.host.id()
                    && a.cfg == b.cfg
                    && a.lens == b.lens
                    && a.args.len() == b.args.len()
                    && a.args.iter().zip(&b.args).all(|(x, y)| same_kind(x, y));
                if !shape {
                    Likeness::Other
                } else if a.args.iter().zip(&b.args).all(|(x, y)| same_bits(x, y)) && a.mem == b.mem
                {
                    Likeness::Same
                } else {
                    Likeness::Arguments
                }
            }
            (
                NodeOp::Copy { dst, src, bytes },
                NodeOp::Copy {
                    dst: d2,
                    src: s2,
                    bytes: b2,
                },
            ) if (dst, src, bytes) == (d2, s2, b2) => Likeness::Same,
            (
                NodeOp::Memset { dst, value, count },
                NodeOp::Memset {
                    dst: d2,
                    value: v2,
                    count: c2,
                },
            ) if (dst, value, count) == (d2, v2, c2) => Likeness::Same,
            // Captured anew at every run: its parameters (pointers,
            // scalars a library read at the call) are set in place; a
            // driver that finds the child's topology changed refuses, and
            // the graph is built again (`GraphCache::launch`).
            (NodeOp::Child(a), NodeOp::Child(b)) if Arc::ptr_eq(&a.graph, &b.graph) => {
                Likeness::Same
            }
            (NodeOp::Child(a), NodeOp::Child(b)) if a.name == b.name => Likeness::Child,
            _ => Likeness::Other,
        }
    }
}

/// A graph's recorded operations, node `i` after the nodes `deps[i]`
/// (indices into `ops`), with `topo` an order of the indices in which
/// every node comes after those it follows.
pub(crate) struct GraphSpec<'a> {
    pub(crate) ops: &'a [NodeOp],
    pub(crate) deps: &'a [smallvec::SmallVec<[u32; 4]>],
    pub(crate) topo: &'a [u32],
}
