//! A graphed scope's graph between runs (DESIGN "Graphs without capture
//! by hand"): the executable graph its last run launched, and the
//! compare-or-build that decides, from a run's recording, whether that
//! graph is launched again (its changed kernel arguments set in place) or
//! a graph of the new shape is built.

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

/// An executable graph and the operations it was built from, in their
/// canonical order (by task key and index in the task).
struct Built {
    rt: Runtime,
    raw: RawGraph,
    ops: Vec<NodeOp>,
    deps: Deps,
    /// The graph's edges (the dependencies and the lanes').
    edges: usize,
    /// The last recording that matched it, as recorded (its operations'
    /// keys and dependencies in the order the tasks submitted them), and
    /// its canonical order (`order[j]`: the operation that is node `j`).
    /// A run that records the same keys and dependencies in the same
    /// order (a serial scope always does) has the same canonical order:
    /// no sort, no renumbering.
    last: Vec<(OpKey, smallvec::SmallVec<[u32; 4]>)>,
    order: Vec<u32>,
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
    stats: GraphStats,
    serial: bool,
    lanes: usize,
}

impl Default for GraphCache {
    fn default() -> Self {
        GraphCache {
            built: None,
            memory: None,
            children: Arc::default(),
            spare: Vec::new(),
            stats: GraphStats::default(),
            serial: false,
            lanes: GRAPH_LANES,
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

    /// Whether a graphed scope of its runs records tasks that run at their
    /// spawn ([`GraphCache::set_serial`]).
    pub(crate) fn serial(&self) -> bool {
        self.serial
    }

    /// The memory the allocations of a run on `rt` reuse (new if the
    /// last run was on another runtime), the captures its foreign
    /// operations may reuse, and the storage its recording may fill.
    pub(crate) fn for_run(
        &mut self,
        rt: &Runtime,
    ) -> (Arc<GraphMemory>, Arc<ChildCache>, Vec<Recorded>) {
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
        )
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
    pub(crate) fn launch(
        &mut self,
        rt: &Runtime,
        mut rec: Recording,
        sid: StreamId,
        raw: RawStream,
    ) -> Result<()> {
        let n = rec.len();
        if n == 0 {
            return Ok(());
        }
        // The canonical order: by task key and index in the task, the same
        // from one run to the next whatever order the tasks ran in. The
        // last matching run's if this one recorded the same keys and
        // dependencies in the same order (then its canonical dependencies
        // are the same too).
        let same_order = self.built.as_ref().is_some_and(|b| {
            b.rt.id() == rt.id()
                && b.last.len() == n
                && b.last.iter().enumerate().all(|(i, (key, deps))| {
                    rec.key(i as u32) == *key && rec.deps(i as u32) == &deps[..]
                })
        });
        let order: Vec<u32> = if same_order {
            let b = self.built.as_mut().expect("checked above");
            std::mem::take(&mut b.order)
        } else {
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_unstable_by_key(|&i| (rec.key(i), i));
            order
        };
        // Renumbering from recorded to canonical indices (not needed where
        // the order is the last run's).
        let rank = if same_order {
            Vec::new()
        } else {
            ranks(&order)
        };
        let drv = rt.driver();
        // The cached graph, if it has this shape: the kernel nodes whose
        // arguments changed. Compared in place (no copy of the recording).
        let reuse = self.built.as_ref().and_then(|b| {
            if b.rt.id() != rt.id() || b.ops.len() != n {
                return None;
            }
            let mut changed = Vec::new();
            for (j, &i) in order.iter().enumerate() {
                if !same_order && canonical_deps(&rec, &rank, i) != b.deps[j] {
                    return None;
                }
                match rec.op(i).likeness(&b.ops[j]) {
                    Likeness::Same => {}
                    Likeness::Arguments | Likeness::Child => changed.push(j),
                    Likeness::Other => return None,
                }
            }
            Some(changed)
        });
        // Child nodes first: the driver refuses a child graph of another
        // topology (a library that chose another algorithm), changing
        // nothing; the graph is then built anew.
        let reuse = reuse.filter(|changed| {
            let b = self.built.as_ref().expect("checked above");
            changed.iter().all(|&j| match rec.op(order[j]) {
                // SAFETY: node `j` of the graph is a child node of a
                // foreign operation of the same name (`Likeness::Child`);
                // the new child graph is this run's capture of it, whose
                // buffers it handed to this stream and stamped
                // (`tracked_recorded`), where the graph is launched next.
                NodeOp::Child(c) => unsafe { drv.graph_set_child(b.raw, j, c) }.is_ok(),
                _ => true,
            })
        });
        // The recording as recorded, for the next run's comparison (kept
        // unless this run's was the same).
        let last = |rec: &Recording| {
            (0..n as u32)
                .map(|i| (rec.key(i), rec.deps(i).iter().copied().collect()))
                .collect()
        };
        let graph = match reuse {
            Some(changed) => {
                let b = self.built.as_mut().expect("checked above");
                if !same_order {
                    b.last = last(&rec);
                }
                b.order = order;
                for &j in &changed {
                    let i = b.order[j];
                    if let NodeOp::Child(_) = rec.op(i) {
                        b.ops[j] = rec.op(i).clone();
                    } else if let NodeOp::Kernel(k) = rec.op(i) {
                        // SAFETY: node `j` of the graph is a launch of the
                        // same kernel with the same configuration
                        // (`Likeness::Arguments`); the new arguments are
                        // this run's recorded launch's, whose buffers it
                        // handed to this stream and stamped (`tracked`),
                        // where the graph is launched next.
                        if let Err(e) = unsafe { drv.graph_set_kernel(b.raw, j, k) } {
                            // Some nodes may hold this run's arguments and
                            // the cache would not say so: a later run with
                            // the old ones would launch them unset. Built
                            // anew next time.
                            self.built = None;
                            return Err(e);
                        }
                        b.ops[j] = rec.op(i).clone();
                    }
                }
                self.stats.replays += 1;
                if !changed.is_empty() {
                    self.stats.updates += 1;
                    self.stats.nodes_updated += changed.len() as u64;
                }
                b.raw
            }
            None => {
                let rank = if same_order { ranks(&order) } else { rank };
                let deps: Deps = order
                    .iter()
                    .map(|&i| canonical_deps(&rec, &rank, i))
                    .collect();
                let last = last(&rec);
                let ops: Vec<NodeOp> = order.iter().map(|&i| rec.take_op(i)).collect();
                // The graph's edges: the dependencies, and the lanes'
                // (`lanes`), with nodes added in an order that follows
                // both.
                let (topo, edges) = lanes(&deps, self.lanes);
                let spec = GraphSpec {
                    ops: &ops,
                    deps: &edges,
                    topo: &topo,
                };
                // The old graph goes first (launches still queued finish).
                self.built = None;
                // SAFETY: each operation is one this run recorded through
                // `tracked_node` (its kernel and arguments as a launch
                // would have them, within the buffers it touches), whose
                // buffers were handed to this stream and stamped there,
                // where the graph is launched next.
                let raw_graph = unsafe { drv.graph_build(&spec) }?;
                self.built = Some(Built {
                    rt: rt.clone(),
                    raw: raw_graph,
                    ops,
                    deps,
                    edges: edges.iter().map(|d| d.len()).sum(),
                    last,
                    order,
                });
                self.stats.builds += 1;
                raw_graph
            }
        };
        // Traced as one span (`crate::trace`): its timing events are
        // recorded on the stream around the launch, not in the graph.
        let tracer = rt.tracer();
        let t0 = std::time::Instant::now();
        let span = tracer.open(drv, raw);
        self.stats.nodes = n;
        self.stats.edges = self.built.as_ref().map_or(0, |b| b.edges);
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
