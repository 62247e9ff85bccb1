//! A graphed scope's graph between runs (DESIGN "Graphs without capture
//! by hand"): the executable graph its last run launched, and the
//! compare-or-build that decides, from a run's recording, whether that
//! graph is launched again (its changed kernel arguments set in place) or
//! a graph of the new shape is built.

use super::batch::{array_words, plan, Merge, Plan, PointerArrays};
use super::capture::{RunParts, Trail};
use super::child::ChildCache;
use super::lanes::{lanes, Deps, GRAPH_LANES};
use super::recording::{Recorded, Recording};
use crate::driver::{GraphSpec, Likeness, NodeOp, RawGraph, RawStream};
use crate::error::Result;
use crate::runtime::{GraphMemory, Runtime};
use gpu_epoch::StreamId;
use std::sync::Arc;

/// What a graphed scope's runs did so far (see [`GraphCache::stats`]).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct GraphStats {
    /// Runs that built and instantiated a graph (the first, and each whose
    /// shape changed).
    pub builds: u64,
    /// Runs that launched the graph built before.
    pub replays: u64,
    /// Of those, runs that first set some kernel nodes' arguments in place.
    pub updates: u64,
    /// Kernel nodes whose arguments were set in place, over all runs.
    pub nodes_updated: u64,
    /// Nodes in the graph last launched.
    pub nodes: usize,
    /// Of its operations, those merged into batched calls (sibling
    /// library calls, `Foreign::batchable`; 0 with batching off).
    pub batched: usize,
    /// Dependencies (edges) in the graph last launched.
    pub edges: usize,
    /// The last run's body (its host code and the recording), to its end.
    pub last_body: std::time::Duration,
    /// The last run's graph: building and instantiating it, or comparing
    /// and updating the cached one, and the launch.
    pub last_graph: std::time::Duration,
    /// Of `last_graph`, the launch (`cuGraphLaunch`, and the trace span's
    /// records if tracing).
    pub last_launch: std::time::Duration,
}

/// An operation's key: its task's key and its index in the task.
type OpKey = (u64, u32);

/// An executable graph and the operations it was built from: node `i` is
/// the `i`-th operation its build run recorded.
struct Built {
    rt: Runtime,
    raw: RawGraph,
    /// Each node's operation (the last run's, once set in place).
    ops: Vec<NodeOp>,
    /// Each node's key and the nodes it follows, as the build run recorded
    /// them. A run that records the same keys and dependencies in the
    /// same order (a serial scope always does) is compared node by node,
    /// in that order: no sort, no renumbering.
    keys: Vec<OpKey>,
    deps: Deps,
    /// The canonical order (by task key and index in the task, the same
    /// whatever order the tasks ran in): `canon[j]` is the `j`-th node;
    /// and its dependencies as canonical places, sorted. What a run
    /// recorded in another order is compared with.
    canon: Vec<u32>,
    canon_deps: Deps,
    /// The graph's edges (the dependencies and the lanes').
    edges: usize,
    /// Where batching merged operations: `slots[i]` is operation `i`'s
    /// node, with [`BATCHED`] set where it is a member of a batched call.
    /// `None`: node `i` is operation `i`.
    slots: Option<Box<[u32]>>,
    /// The graph's nodes.
    nodes: usize,
    /// Operations merged into batched calls.
    batched: usize,
    /// The batched calls' pointer arrays (freed after the graph, in
    /// stream order: dropped after `drop` destroyed it).
    arrays: Option<PointerArrays>,
}

impl Built {
    /// `raw`, of `nodes` nodes and `edges` edges, with no recording yet.
    fn new(rt: &Runtime, raw: RawGraph, nodes: usize, edges: usize) -> Self {
        Built {
            rt: rt.clone(),
            raw,
            ops: Vec::new(),
            keys: Vec::new(),
            deps: Vec::new(),
            canon: Vec::new(),
            canon_deps: Vec::new(),
            edges,
            slots: None,
            nodes,
            batched: 0,
            arrays: None,
        }
    }
}

/// In [`Built::slots`]: a member of a batched call, which a run can
/// launch again only as it is.
const BATCHED: u32 = 1 << 31;

impl Built {
    /// Operation `i`'s node, or `None` if it is part of a batched call.
    fn node(&self, i: usize) -> Option<usize> {
        match &self.slots {
            None => Some(i),
            Some(s) if s[i] & BATCHED != 0 => None,
            Some(s) => Some(s[i] as usize),
        }
    }
}

impl Drop for Built {
    fn drop(&mut self) {
        // Launches still queued run to their end (CUDA frees the graph
        // then; the host backend's launches hold their operations).
        let _ = self.rt.driver().graph_destroy(self.raw);
    }
}

/// A graphed scope's state between runs: the graph its last run launched.
/// `gpu::Graphed` holds one; see [`crate::TaskContext::graphed_scope`].
pub struct GraphCache {
    built: Option<Built>,
    /// The memory its runs' allocations reuse.
    memory: Option<Arc<GraphMemory>>,
    /// Its foreign operations' captures kept from the last run.
    children: Arc<ChildCache>,
    /// The last run's recording's storage, emptied, for the next one.
    spare: Vec<Recorded>,
    /// The last run's trail, which the next run follows while its
    /// operations are the same (serial scopes).
    trail: Option<Arc<Trail>>,
    stats: GraphStats,
    serial: bool,
    lanes: usize,
    batching: bool,
}

impl Default for GraphCache {
    fn default() -> Self {
        GraphCache {
            built: None,
            memory: None,
            children: Arc::default(),
            spare: Vec::new(),
            trail: None,
            stats: GraphStats::default(),
            serial: false,
            lanes: GRAPH_LANES,
            batching: true,
        }
    }
}

impl std::fmt::Debug for GraphCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphCache")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl GraphCache {
    /// What its runs did so far.
    pub fn stats(&self) -> GraphStats {
        self.stats
    }

    /// Whether the tasks of later runs run at their spawn, on the spawning
    /// thread (`gpu::Graphed::serial`; [`crate::CaptureHandle::serial`]
    /// tells the pool).
    pub fn set_serial(&mut self, serial: bool) {
        self.serial = serial;
    }

    /// At most `lanes` chains of nodes side by side in graphs built from
    /// now on (0: no limit; 64 by default): each node also
    /// follows the last node of the lane it is put in, as work on one of
    /// `lanes` streams would. Fewer lanes launch faster; more let more
    /// independent kernels run at once.
    pub fn set_lanes(&mut self, lanes: usize) {
        self.lanes = lanes;
    }

    /// Whether graphs built from now on merge sibling foreign operations
    /// that declared a batched form (`Foreign::batchable`) into one call
    /// each (on by default). Batched calls may round differently from the
    /// separate ones where the vendor uses other kernels for them.
    pub fn set_batching(&mut self, batching: bool) {
        self.batching = batching;
    }

    /// Whether a graphed scope of its runs records tasks that run at their
    /// spawn ([`GraphCache::set_serial`]).
    pub(crate) fn serial(&self) -> bool {
        self.serial
    }

    /// The memory the allocations of a run on `rt` reuse (new if the
    /// last run was on another runtime), the captures its foreign
    /// operations may reuse, the storage its recording may fill, and for
    /// a serial scope the last run's trail (an empty one at first).
    pub(crate) fn for_run(&mut self, rt: &Runtime) -> RunParts {
        let memory = match &self.memory {
            Some(m) if m.runtime().id() == rt.id() => m.clone(),
            _ => {
                self.children = Arc::default();
                self.memory.insert(GraphMemory::new(rt)).clone()
            }
        };
        (
            memory,
            self.children.clone(),
            std::mem::take(&mut self.spare),
            // Only a serial scope follows a trail (`capture::Trail`).
            self.serial.then(|| self.trail.take().unwrap_or_default()),
        )
    }

    /// Keeps a run's trail for the next run to follow (a serial scope's:
    /// `capture::Trail`).
    pub(crate) fn keep_trail(&mut self, trail: Option<Arc<Trail>>) {
        self.trail = trail;
    }

    /// A run ended: the captures it did not use are dropped.
    pub(crate) fn end_run(&self) {
        self.children.end_run();
    }

    /// Notes the last run's times: its body, and its graph (the compare
    /// or build, and the launch).
    pub(crate) fn note_times(&mut self, body: std::time::Duration, graph: std::time::Duration) {
        self.stats.last_body = body;
        self.stats.last_graph = graph;
    }

    /// Launches `rec` on `raw`: the cached graph if `rec` has its shape,
    /// else a graph built now.
    ///
    /// `merge` makes the node of a group of sibling calls that batching
    /// merges (`batch::Merge`).
    pub(crate) fn launch(
        &mut self,
        rt: &Runtime,
        mut rec: Recording,
        (sid, raw): (StreamId, RawStream),
        merge: Merge<'_>,
    ) -> Result<()> {
        let n = rec.len();
        if n == 0 {
            return Ok(());
        }
        let drv = rt.driver();
        // The cached graph, if it has this shape: the nodes whose
        // arguments changed, each with the operation that replaces it.
        // Compared in place (no copy of the recording).
        let reuse = self.built.as_ref().and_then(|b| {
            if b.rt.id() != rt.id() || b.ops.len() != n {
                return None;
            }
            let mut changed: Vec<(usize, u32)> = Vec::new();
            let like = |changed: &mut Vec<(usize, u32)>, node: usize, i: u32| match rec
                .op(i)
                .likeness(&b.ops[node])
            {
                Likeness::Same => true,
                // A batched call's member is launched again only as it
                // is (its pointers are in the call's arrays).
                Likeness::Arguments | Likeness::Child if b.node(node).is_some() => {
                    changed.push((node, i));
                    true
                }
                Likeness::Arguments | Likeness::Child | Likeness::Other => false,
            };
            // One pass in memory order while the run recorded the build's
            // keys and dependencies in its order: node `i` is operation
            // `i`. (An operation of another kind ends the comparison
            // either way: keys name one operation, so the canonical order
            // would pair the same two.)
            let mut same_order = true;
            for i in 0..n {
                let j = i as u32;
                if rec.key(j) != b.keys[i] || rec.deps(j) != &b.deps[i][..] {
                    same_order = false;
                    break;
                }
                if !like(&mut changed, i, j) {
                    return None;
                }
            }
            if !same_order {
                changed.clear();
                let order = canonical_order(&rec);
                let rank = ranks(&order);
                for (j, &i) in order.iter().enumerate() {
                    if canonical_deps(&rec, &rank, i) != b.canon_deps[j]
                        || !like(&mut changed, b.canon[j] as usize, i)
                    {
                        return None;
                    }
                }
            }
            Some(changed)
        });
        // Child nodes first: the driver refuses a child graph of another
        // topology (a library that chose another algorithm), changing
        // nothing; the graph is then built anew.
        let reuse = reuse.filter(|changed| {
            let b = self.built.as_ref().expect("checked above");
            changed.iter().all(|&(op, i)| match rec.op(i) {
                NodeOp::Child(c) => {
                    let node = b.node(op).expect("not batched (`like`)");
                    // SAFETY: `node` is a child node of a foreign
                    // operation of the same name (`Likeness::Child`); the
                    // new child graph is this run's capture of it, whose
                    // buffers it handed to this stream and stamped
                    // (`tracked_recorded`), where the graph is launched
                    // next.
                    unsafe { drv.graph_set_child(b.raw, node, c) }.is_ok()
                }
                _ => true,
            })
        });
        let graph = match reuse {
            Some(changed) => {
                let b = self.built.as_mut().expect("checked above");
                for &(op, i) in &changed {
                    if let NodeOp::Kernel(k) = rec.op(i) {
                        let node = b.node(op).expect("not batched (`like`)");
                        // SAFETY: `node` is a launch of the same kernel
                        // with the same configuration
                        // (`Likeness::Arguments`); the new arguments are
                        // this run's recorded launch's, whose buffers it
                        // handed to this stream and stamped (`tracked`),
                        // where the graph is launched next.
                        if let Err(e) = unsafe { drv.graph_set_kernel(b.raw, node, k) } {
                            // Some nodes may hold this run's arguments and
                            // the cache would not say so: a later run with
                            // the old ones would launch them unset. Built
                            // anew next time.
                            self.built = None;
                            return Err(e);
                        }
                    }
                    b.ops[op] = rec.op(i).clone();
                }
                self.stats.replays += 1;
                if !changed.is_empty() {
                    self.stats.updates += 1;
                    self.stats.nodes_updated += changed.len() as u64;
                }
                b.raw
            }
            None => {
                // Node `i` is operation `i`: its dependencies are earlier
                // nodes, as recorded.
                let keys: Vec<OpKey> = (0..n as u32).map(|i| rec.key(i)).collect();
                let deps: Deps = (0..n as u32).map(|i| rec.deps(i).into()).collect();
                let canon = canonical_order(&rec);
                let rank = ranks(&canon);
                let canon_deps: Deps = canon
                    .iter()
                    .map(|&i| canonical_deps(&rec, &rank, i))
                    .collect();
                let plan = if self.batching {
                    plan(&rec, &canon)
                } else {
                    None
                };
                let ops: Vec<NodeOp> = (0..n as u32).map(|i| rec.take_op(i)).collect();
                // The old graph goes first (launches still queued finish).
                self.built = None;
                let mut built = match plan {
                    None => build(rt, &ops, &canon, &canon_deps, self.lanes)?,
                    Some(p) => {
                        let order = (&ops[..], &canon[..], &canon_deps);
                        build_batched(rt, (sid, raw), order, &p, self.lanes, merge)?
                    }
                };
                built.ops = ops;
                built.keys = keys;
                built.deps = deps;
                built.canon = canon;
                built.canon_deps = canon_deps;
                self.stats.builds += 1;
                self.built.insert(built).raw
            }
        };
        // Traced as one span (`crate::trace`): its timing events are
        // recorded on the stream around the launch, not in the graph.
        let tracer = rt.tracer();
        let t0 = std::time::Instant::now();
        let span = tracer.open(drv, raw);
        let b = self.built.as_mut().expect("launched");
        if let Some(a) = &mut b.arrays {
            a.stamp(sid);
        }
        self.stats.nodes = b.nodes;
        self.stats.batched = b.batched;
        self.stats.edges = b.edges;
        // SAFETY: the graph's operations are this run's (set above), whose
        // buffers were handed to this stream and stamped in its current
        // epoch (`tracked`); the scope's body still borrows them, and a
        // free of one meanwhile was deferred (`waits_for_building`).
        let launched = unsafe { drv.graph_launch(graph, raw) };
        if launched.is_ok() && span.is_some() {
            let name = crate::trace::graph_name(n);
            tracer.close(drv, span, sid, raw, name);
        }
        self.stats.last_launch = t0.elapsed();
        // Its storage for the next run (after the launch: emptying it
        // drops this run's operations).
        self.spare = rec.into_spare();
        launched
    }
}

/// The canonical order of `rec`'s operations: by task key and index in
/// the task, the same from one run to the next whatever order the tasks
/// ran in.
fn canonical_order(rec: &Recording) -> Vec<u32> {
    let mut order: Vec<u32> = (0..rec.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (rec.key(i), i));
    order
}

/// `rank[i]`: the place of recorded operation `i` in `order`.
fn ranks(order: &[u32]) -> Vec<u32> {
    let mut rank = vec![0u32; order.len()];
    for (j, &i) in order.iter().enumerate() {
        rank[i as usize] = j as u32;
    }
    rank
}

/// Recorded operation `i`'s dependencies in canonical indices (`rank`),
/// sorted.
fn canonical_deps(rec: &Recording, rank: &[u32], i: u32) -> smallvec::SmallVec<[u32; 4]> {
    let mut d: smallvec::SmallVec<[u32; 4]> =
        rec.deps(i).iter().map(|&x| rank[x as usize]).collect();
    d.sort_unstable();
    d
}

/// The graph of `ops` (by recorded index; `canon` their canonical order,
/// `canon_deps` its dependencies), node `i` operation `i`, its lanes
/// (`lanes`). The returned graph's recording fields are the caller's to
/// fill.
fn build(
    rt: &Runtime,
    ops: &[NodeOp],
    canon: &[u32],
    canon_deps: &Deps,
    lanes_max: usize,
) -> Result<Built> {
    let n = ops.len();
    // The graph's edges: the dependencies, and the lanes' (`lanes`), with
    // nodes added in an order that follows both; laid in canonical order,
    // so that the graph is the same whatever order the tasks ran in, then
    // renumbered.
    let (topo, canon_edges) = lanes(canon_deps, lanes_max);
    let topo: Vec<u32> = topo.iter().map(|&j| canon[j as usize]).collect();
    let mut edges: Deps = vec![smallvec::SmallVec::new(); n];
    for (j, e) in canon_edges.iter().enumerate() {
        edges[canon[j] as usize] = e.iter().map(|&k| canon[k as usize]).collect();
    }
    let spec = GraphSpec {
        ops,
        deps: &edges,
        topo: &topo,
    };
    // SAFETY: each operation is one this run recorded through
    // `tracked_node` (its kernel and arguments as a launch would have
    // them, within the buffers it touches), whose buffers were handed to
    // this stream and stamped there, where the graph is launched next.
    let raw = unsafe { rt.driver().graph_build(&spec) }?;
    Ok(Built::new(rt, raw, n, edges.iter().map(|d| d.len()).sum()))
}

/// [`build`] with `plan`'s groups of two or more operations merged into
/// one batched call each (`super::batch`, made by `merge`): node `g` is
/// the plan's `g`-th,
/// laid in canonical order. On CUDA the calls' pointer arrays are written
/// on `raw` (the stream `sid` the graph is launched on) first.
fn build_batched(
    rt: &Runtime,
    (sid, raw): (StreamId, RawStream),
    (ops, canon, canon_deps): (&[NodeOp], &[u32], &Deps),
    plan: &Plan,
    lanes_max: usize,
    merge: Merge<'_>,
) -> Result<Built> {
    let deps = plan.deps(canon_deps);
    let (topo, edges) = lanes(&deps, lanes_max);
    // Each batched call's arrays, one after the other (`BatchCall`).
    let mut words = Vec::new();
    let mut at = vec![0usize; plan.members.len()];
    if rt.backend() == crate::BackendKind::Cuda {
        for (g, members) in plan.batched() {
            at[g] = words.len();
            array_words(&Plan::children(ops, canon, members).0, &mut words);
        }
    }
    let arrays = match words.is_empty() {
        true => None,
        false => Some(PointerArrays::new(rt, &words, sid, raw)?),
    };
    let base = arrays.as_ref().map_or(0, |a| a.ptr());
    let mut nodes = Vec::with_capacity(plan.members.len());
    let mut slots = vec![0u32; ops.len()];
    let mut batched = 0;
    for (g, members) in plan.members.iter().enumerate() {
        let flag = if members.len() > 1 { BATCHED } else { 0 };
        for &j in members {
            slots[canon[j as usize] as usize] = g as u32 | flag;
        }
        if let [one] = members[..] {
            nodes.push(ops[canon[one as usize] as usize].clone());
            continue;
        }
        batched += members.len();
        let (children, tag) = Plan::children(ops, canon, members);
        let arrays = base + 8 * at[g] as u64;
        nodes.push(merge(&children, tag, arrays, sid.index())?);
    }
    let spec = GraphSpec {
        ops: &nodes,
        deps: &edges,
        topo: &topo,
    };
    // SAFETY: as `build`'s: each node is an operation this run recorded,
    // or one batched call capturing the work of recorded foreign
    // operations over their buffers (`Foreign::batchable`'s contract),
    // which were handed to this stream and stamped there, and of the
    // pointer arrays, written on this stream above; the graph is launched
    // there next.
    let graph = unsafe { rt.driver().graph_build(&spec) }?;
    let mut built = Built::new(rt, graph, nodes.len(), edges.iter().map(|d| d.len()).sum());
    built.slots = Some(slots.into());
    built.batched = batched;
    built.arrays = arrays;
    Ok(built)
}
