//! The host backend's captures and graphs: the operations a capture
//! records, with their dependencies, and the orders a graph's launch
//! replays them in; graphs built from recorded operations (DESIGN "Graphs without capture by hand") and the
//! host bodies of a launch, a device copy and a fill, which streams and
//! graphs share.

use super::stream::{Body, Op, OpKind};
use super::Shared;
use crate::driver::{ChildNode, GraphSpec, HostCall, KernelNode, MemAccess, NodeOp, RawGraph};
use crate::error::{Error, Result};
use crate::kernel::KernelArg;
use gpu_epoch::Access;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// `Driver::graph_build` on the host backend: a graph of the operations'
/// host bodies, replayed as captured ones are.
///
/// # Safety
///
/// As `Driver::graph_build`.
pub(super) unsafe fn build_graph(shared: &Shared, spec: &GraphSpec<'_>) -> Result<RawGraph> {
    let clock = shared.host_clock.lock().clone();
    let mut ops = Vec::with_capacity(spec.ops.len());
    for op in spec.ops {
        // SAFETY: this function's contract: each operation's memory is
        // live and ordered with the graph's launches.
        let (body, accesses) = unsafe { node_body(shared, op) }?;
        ops.push(Op {
            kind: OpKind::Run(body),
            accesses,
            host_clock: clock.clone(),
        });
    }
    let graph = HostGraph {
        ops,
        deps: spec
            .deps
            .iter()
            .map(|d| d.iter().map(|&i| i as usize).collect())
            .collect(),
        launches: AtomicU64::new(0),
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    shared.graphs.lock().insert(id, Arc::new(graph));
    Ok(RawGraph(id))
}

/// `Driver::graph_set_kernel` on the host backend: later launches take a
/// graph with node `i` replaced.
///
/// # Safety
///
/// As `Driver::graph_set_kernel`.
pub(super) unsafe fn set_kernel(
    shared: &Shared,
    g: RawGraph,
    i: usize,
    node: &KernelNode,
) -> Result<()> {
    // SAFETY: this function's contract, passed on.
    let body = unsafe { kernel_body(&node.host.call(), &node.args, &node.lens) }?;
    replace_node(shared, g, i, body, node.mem.to_vec())
}

/// `Driver::graph_set_child` on the host backend: later launches take a
/// graph with node `i` running the new child's operations.
///
/// # Safety
///
/// As `Driver::graph_set_child`.
pub(super) unsafe fn set_child(
    shared: &Shared,
    g: RawGraph,
    i: usize,
    node: &ChildNode,
) -> Result<()> {
    let body = child_body(shared, node)?;
    replace_node(shared, g, i, body, node.mem.to_vec())
}

/// Makes later launches of `g` take a graph whose node `i` runs `body`
/// over `accesses`.
fn replace_node(
    shared: &Shared,
    g: RawGraph,
    i: usize,
    body: Body,
    accesses: Vec<MemAccess>,
) -> Result<()> {
    let mut graphs = shared.graphs.lock();
    let old = graphs
        .get(&g.0)
        .filter(|gr| i < gr.ops.len())
        .ok_or(Error::Driver {
            code: 400,
            name: "CUDA_ERROR_INVALID_HANDLE".into(),
            during: "setting a node of an unknown graph",
        })?;
    // Launches already queued keep the old graph (their operations were
    // submitted); later ones take this one, as on CUDA.
    let mut ops: Vec<Op> = old
        .ops
        .iter()
        .map(|op| Op {
            kind: op.kind.clone(),
            accesses: op.accesses.clone(),
            host_clock: op.host_clock.clone(),
        })
        .collect();
    ops[i].kind = OpKind::Run(body);
    ops[i].accesses = accesses;
    let new = HostGraph {
        ops,
        deps: old.deps.clone(),
        launches: AtomicU64::new(old.launches.load(Ordering::Relaxed)),
    };
    graphs.insert(g.0, Arc::new(new));
    Ok(())
}

/// A kernel launch's host implementation over its arguments.
///
/// # Safety
///
/// As `Driver::launch`, when the body runs: the arguments match the
/// kernel's signature, with `lens` its buffers' lengths, and it touches
/// only live, ordered memory.
pub(super) unsafe fn kernel_body(
    host: &HostCall<'_>,
    args: &[KernelArg],
    lens: &[usize],
) -> Result<Body> {
    let args: Arc<[KernelArg]> = args.into();
    let lens: Arc<[usize]> = lens.into();
    Ok(match *host {
        HostCall::Builtin(f) => Arc::new(move || {
            // SAFETY: this function's contract.
            unsafe { f.call(&args, &lens) }
        }),
        HostCall::User(f) => {
            let f = f.clone();
            Arc::new(move || f(&args, &lens))
        }
        HostCall::None => {
            return Err(Error::Unsupported(
                "a kernel without a host implementation on the host backend",
            ))
        }
    })
}

/// A device copy's body and accesses.
///
/// # Safety
///
/// As `Driver::copy_dtod`, when the body runs.
pub(super) unsafe fn copy_body(dst: u64, src: u64, bytes: usize) -> (Body, Vec<MemAccess>) {
    let body: Body = Arc::new(move || {
        // SAFETY: this function's contract: both are live and ordered for
        // `bytes`; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) }
    });
    let acc = vec![
        MemAccess {
            ptr: src,
            bytes,
            access: Access::Read,
        },
        MemAccess {
            ptr: dst,
            bytes,
            access: Access::Write,
        },
    ];
    (body, acc)
}

/// A word fill's body and accesses.
///
/// # Safety
///
/// As `Driver::memset_u32`, when the body runs.
pub(super) unsafe fn memset_body(dst: u64, value: u32, count: usize) -> (Body, Vec<MemAccess>) {
    let body: Body = Arc::new(move || {
        // SAFETY: this function's contract: `dst` is 4-aligned, live and
        // ordered for `count` words.
        let words = unsafe { std::slice::from_raw_parts_mut(dst as *mut u32, count) };
        words.fill(value);
    });
    let acc = vec![MemAccess {
        ptr: dst,
        bytes: count * 4,
        access: Access::Write,
    }];
    (body, acc)
}

/// A child node's body: its graph's operations, one after the other in
/// an order its dependencies allow, on the thread that runs the node.
/// Only operations that run code (a foreign operation's queued host twin)
/// can be in one.
fn child_body(shared: &Shared, node: &ChildNode) -> Result<Body> {
    let child = shared
        .graphs
        .lock()
        .get(&node.graph.raw)
        .cloned()
        .ok_or(Error::Driver {
            code: 400,
            name: "CUDA_ERROR_INVALID_HANDLE".into(),
            during: "adding an unknown child graph",
        })?;
    let mut bodies = Vec::with_capacity(child.ops.len());
    for i in child.replay_order(0) {
        match &child.ops[i].kind {
            OpKind::Run(b) => bodies.push(b.clone()),
            _ => {
                return Err(Error::Unsupported(
                    "a child graph with waits, records or frees on the host backend (only operations that run code)",
                ))
            }
        }
    }
    Ok(Arc::new(move || bodies.iter().for_each(|b| b())))
}

/// `Driver::child_join` on the host backend: the children's operations
/// in a chain, each child's in an order its dependencies allow, the
/// children one after the other.
pub(super) fn join_children(shared: &Shared, children: &[u64]) -> Result<HostGraph> {
    let graphs = shared.graphs.lock();
    let mut ops = Vec::new();
    let mut deps: Vec<Vec<usize>> = Vec::new();
    for g in children {
        let child = graphs.get(g).ok_or(Error::Driver {
            code: 400,
            name: "CUDA_ERROR_INVALID_HANDLE".into(),
            during: "joining an unknown child graph",
        })?;
        for i in child.replay_order(0) {
            deps.push(ops.len().checked_sub(1).into_iter().collect());
            ops.push(child.ops[i].clone());
        }
    }
    Ok(HostGraph {
        ops,
        deps,
        launches: AtomicU64::new(0),
    })
}

/// A recorded operation's body and accesses.
///
/// # Safety
///
/// As `Driver::graph_build`, when the body runs.
unsafe fn node_body(shared: &Shared, op: &NodeOp) -> Result<(Body, Vec<MemAccess>)> {
    // SAFETY: this function's contract, passed on to each.
    unsafe {
        Ok(match *op {
            NodeOp::Kernel(ref k) => (
                kernel_body(&k.host.call(), &k.args, &k.lens)?,
                k.mem.to_vec(),
            ),
            NodeOp::Copy { dst, src, bytes } => copy_body(dst, src, bytes),
            NodeOp::Memset { dst, value, count } => memset_body(dst, value, count),
            NodeOp::Child(ref c) => (child_body(shared, c)?, c.mem.to_vec()),
        })
    }
}
