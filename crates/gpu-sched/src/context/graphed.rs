//! Graphed scopes (§14): a scope that becomes a CUDA graph by itself. Each
//! run records its operations as nodes (no stream capture, no driver call
//! per operation), ordered as a scope capture orders them
//! (`crate::capture`); the first run builds an executable graph through the
//! explicit graph API, and a later run whose recording has the same shape
//! (the same operations, kernels, configurations and dependencies) launches
//! that graph again, after setting in place the arguments of the kernel
//! nodes whose pointers or scalars changed. Another shape builds anew.
//!
//! # Why the stamps hold
//!
//! The recorded operations hand their buffers off to the scope's stream
//! and stamp them there as operations submitted on it would (device waits
//! included: they are queued on the stream, ahead of the launch). The graph
//! is launched on that stream, in the same epoch: nothing closes it before
//! (records, fences and synchronizes are refused in the scope; only the
//! scope's task owns the stream). Until the launch, the stamps name work
//! that is not queued: the stream is marked building, and a hand-off from
//! it by work outside the scope is refused, a free deferred (`pool.rs`),
//! until the launch.

use super::TaskContext;
use crate::capture::{Recording, ScopeCapture};
use crate::driver::{GraphSpec, Likeness, NodeOp, RawGraph, RawStream};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
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
}

/// An executable graph and the operations it was built from, in their
/// canonical order (by task key and index in the task).
struct Built {
    rt: Runtime,
    raw: RawGraph,
    ops: Vec<NodeOp>,
    deps: Deps,
    /// The graph's edges (the dependencies and the lanes').
    edges: usize,
}

impl Drop for Built {
    fn drop(&mut self) {
        // Launches still queued run to their end (CUDA frees the graph
        // then; the host backend's launches hold their operations).
        let _ = self.rt.driver().graph_destroy(self.raw);
    }
}

/// A graphed scope's state between runs: the graph its last run launched.
/// `gpu::Graphed` holds one; see [`TaskContext::graphed_scope`].
pub struct GraphCache {
    built: Option<Built>,
    stats: GraphStats,
    serial: bool,
    lanes: usize,
}

impl Default for GraphCache {
    fn default() -> Self {
        GraphCache {
            built: None,
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
}

/// Ends a graphed scope's recording on every path out, unwinding included:
/// its tasks submit nothing more, the task leaves it, the stream is no
/// longer marked building, and frees deferred meanwhile are tried again.
struct EndBuild<'a> {
    ctx: &'a TaskContext,
    cap: &'a ScopeCapture,
    sid: StreamId,
    open: bool,
}

impl EndBuild<'_> {
    /// Ends the recording (the caller launches first, if at all).
    fn end(&mut self) {
        if !self.open {
            return;
        }
        self.open = false;
        self.cap.end();
        *self.ctx.capture.borrow_mut() = None;
        self.ctx.chain.borrow_mut().clear();
        let rt = &self.ctx.rt;
        rt.core().streams.end_building(self.sid);
        rt.retry_deferred_frees();
    }
}

impl Drop for EndBuild<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

impl TaskContext {
    /// Runs `body` as a graphed scope (§14): the operations of this task
    /// and of every task begun with its [`TaskContext::capture_handle`]
    /// while `body` runs are recorded, then launched as one graph on this
    /// task's stream when `body` returns: the graph `cache` holds if the
    /// recording has its shape (after setting changed kernel arguments in
    /// place), else one built now, which `cache` keeps.
    ///
    /// Inside, only kernel launches, device copies within the device and
    /// fills of whole words go into the graph; everything a scope capture
    /// refuses is refused, and so are library calls and collectives. If
    /// `body` fails, nothing of it runs.
    ///
    /// # Errors
    ///
    /// What `body` returned; [`Error::Capturing`] on a task that is in a
    /// capture or a graphed scope, or for an operation the graph cannot
    /// take;
    /// [`Error::Unsupported`] on a stream shared with another live task;
    /// driver errors (building, updating or launching the graph).
    pub fn graphed_scope(
        &self,
        cache: &mut GraphCache,
        body: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if self.capturing() {
            return Err(Error::Capturing {
                what: "beginning a graphed scope",
            });
        }
        let (sid, raw) = self.bind()?;
        let rt = &self.rt;
        if !rt.core().streams.begin_building(sid) {
            // §9: another live task submits to this stream (the pool ran
            // out): its work would go on it before the graph, and its
            // records would close the epoch the recorded operations are
            // stamped in. (Once marked, the stream is not shared.)
            return Err(Error::Unsupported(
                "a graphed scope on a stream shared with another live task (more live tasks submit GPU work than the runtime has streams)",
            ));
        }
        let cap = Arc::new(ScopeCapture::new_build(
            rt.id(),
            self.task().clone(),
            (sid, raw),
            cache.serial,
        ));
        self.chain.borrow_mut().clear();
        self.ops.set(0);
        self.spawned.set(0);
        *self.capture.borrow_mut() = Some(cap.clone());
        let mut guard = EndBuild {
            ctx: self,
            cap: &cap,
            sid,
            open: true,
        };
        let t0 = std::time::Instant::now();
        let r = body();
        // No task of the scope records anything more (one kept past it
        // gets `CaptureEnded`).
        cap.end();
        let t1 = std::time::Instant::now();
        let launched = r
            .and_then(|()| cap.take_recording())
            .and_then(|rec| self.launch_recording(cache, rec, sid, raw));
        cache.stats.last_body = t1 - t0;
        cache.stats.last_graph = t1.elapsed();
        // After the launch: the stamps now name queued work.
        guard.end();
        launched
    }

    /// Launches `rec` on `raw`: the cached graph if `rec` has its shape,
    /// else a graph built now.
    fn launch_recording(
        &self,
        cache: &mut GraphCache,
        mut rec: Recording,
        sid: StreamId,
        raw: RawStream,
    ) -> Result<()> {
        let n = rec.len();
        if n == 0 {
            return Ok(());
        }
        // The canonical order: by task key and index in the task, the same
        // from one run to the next whatever order the tasks ran in.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&i| (rec.key(i), i));
        let mut rank = vec![0u32; n];
        for (j, &i) in order.iter().enumerate() {
            rank[i as usize] = j as u32;
        }
        // Operation `i`'s dependencies in canonical indices, sorted.
        let canonical_deps = |rec: &Recording, i: u32| {
            let mut d: smallvec::SmallVec<[u32; 4]> =
                rec.deps(i).iter().map(|&x| rank[x as usize]).collect();
            d.sort_unstable();
            d
        };
        let rt = &self.rt;
        let drv = rt.driver();
        // The cached graph, if it has this shape: the kernel nodes whose
        // arguments changed. Compared in place (no copy of the recording).
        let reuse = cache.built.as_ref().and_then(|b| {
            if b.rt.id() != rt.id() || b.ops.len() != n {
                return None;
            }
            let mut changed = Vec::new();
            for (j, &i) in order.iter().enumerate() {
                if canonical_deps(&rec, i) != b.deps[j] {
                    return None;
                }
                match rec.op(i).likeness(&b.ops[j]) {
                    Likeness::Same => {}
                    Likeness::Arguments => changed.push(j),
                    Likeness::Other => return None,
                }
            }
            Some(changed)
        });
        let graph = match reuse {
            Some(changed) => {
                let b = cache.built.as_mut().expect("checked above");
                for &j in &changed {
                    if let NodeOp::Kernel(k) = rec.op(order[j]) {
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
                            cache.built = None;
                            return Err(e);
                        }
                        b.ops[j] = rec.op(order[j]).clone();
                    }
                }
                cache.stats.replays += 1;
                if !changed.is_empty() {
                    cache.stats.updates += 1;
                    cache.stats.nodes_updated += changed.len() as u64;
                }
                b.raw
            }
            None => {
                let deps: Deps = order.iter().map(|&i| canonical_deps(&rec, i)).collect();
                let ops: Vec<NodeOp> = order.iter().map(|&i| rec.take_op(i)).collect();
                // The graph's edges: the dependencies, and the lanes'
                // (`lanes`), with nodes added in an order that follows
                // both.
                let (topo, edges) = lanes(&deps, cache.lanes);
                let spec = GraphSpec {
                    ops: &ops,
                    deps: &edges,
                    topo: &topo,
                };
                // The old graph goes first (launches still queued finish).
                cache.built = None;
                // SAFETY: each operation is one this run recorded through
                // `tracked_node` (its kernel and arguments as a launch
                // would have them, within the buffers it touches), whose
                // buffers were handed to this stream and stamped there,
                // where the graph is launched next.
                let raw_graph = unsafe { drv.graph_build(&spec) }?;
                cache.built = Some(Built {
                    rt: rt.clone(),
                    raw: raw_graph,
                    ops,
                    deps,
                    edges: edges.iter().map(|d| d.len()).sum(),
                });
                cache.stats.builds += 1;
                raw_graph
            }
        };
        // Traced as one span (`crate::trace`): its timing events are
        // recorded on the stream around the launch, not in the graph.
        let tracer = rt.tracer();
        let span = tracer.open(drv, raw);
        cache.stats.nodes = n;
        cache.stats.edges = cache.built.as_ref().map_or(0, |b| b.edges);
        // SAFETY: the graph's operations are this run's (set above), whose
        // buffers were handed to this stream and stamped in its current
        // epoch (`tracked`); the scope's body still borrows them, and a
        // free of one meanwhile was deferred (`waits_for_building`).
        let launched = unsafe { drv.graph_launch(graph, raw) };
        if launched.is_ok() && span.is_some() {
            let name = crate::trace::graph_name(n);
            tracer.close(drv, span, sid, raw, name);
        }
        launched
    }
}

/// How many lanes a graph's nodes are spread over by default (`lanes`).
/// On an H100, B13's graph (30,046 nodes) without lanes took 23 ms a
/// `cuGraphLaunch`; with 16, 64 or 256 lanes 6.3-10.6 ms, and a serial
/// replay to its end 93 ms without, 62 ms with 64 (DESIGN §16).
pub(crate) const GRAPH_LANES: usize = 64;

/// Per operation, the operations it follows (or the graph's edges into it).
type Deps = Vec<smallvec::SmallVec<[u32; 4]>>;

/// A topological order of the operations (`deps[i]` are the indices `i`
/// follows) and the graph's edges: `deps`, and with `max > 0` an edge from
/// each lane's last node to the next node put in it, so that at most
/// `max` chains run side by side, as at most `max` streams would. A node
/// goes to the lane of a dependency that is that lane's last node (no
/// edge added), else to a new lane while there are fewer than `max`, else
/// to the lane whose last node is shallowest. Both
/// depend on `deps` alone (ready nodes are taken lowest index first), so
/// a recording of the same shape gets the same graph.
fn lanes(deps: &Deps, max: usize) -> (Vec<u32>, Deps) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = deps.len();
    let mut pending: Vec<u32> = deps.iter().map(|d| d.len() as u32).collect();
    let mut next: Vec<smallvec::SmallVec<[u32; 4]>> = vec![smallvec::SmallVec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            next[p as usize].push(i as u32);
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n as u32)
        .filter(|&i| pending[i as usize] == 0)
        .map(Reverse)
        .collect();
    let mut topo = Vec::with_capacity(n);
    let mut edges = deps.clone();
    // Each lane's last node; each node's lane and depth (nodes on its
    // longest path of edges, itself included).
    let mut tails: Vec<u32> = Vec::new();
    let mut lane_of = vec![u32::MAX; n];
    let mut depth = vec![0u32; n];
    while let Some(Reverse(v)) = ready.pop() {
        topo.push(v);
        if max > 0 {
            let vi = v as usize;
            // A lane whose last node this one follows anyway: no edge.
            let own = deps[vi]
                .iter()
                .map(|&p| lane_of[p as usize] as usize)
                .find(|&l| deps[vi].contains(&tails[l]));
            let l = match own {
                Some(l) => l,
                None if tails.len() < max => {
                    tails.push(v);
                    tails.len() - 1
                }
                None => {
                    // The lane whose last node is shallowest: the edge
                    // lengthens the longest path least.
                    let l = (0..tails.len())
                        .min_by_key(|&l| (depth[tails[l] as usize], l))
                        .expect("max > 0 lanes");
                    let t = tails[l];
                    if !edges[vi].contains(&t) {
                        edges[vi].push(t);
                    }
                    l
                }
            };
            tails[l] = v;
            lane_of[vi] = l as u32;
            depth[vi] = 1 + edges[vi]
                .iter()
                .map(|&p| depth[p as usize])
                .max()
                .unwrap_or(0);
        }
        for &w in &next[v as usize] {
            pending[w as usize] -= 1;
            if pending[w as usize] == 0 {
                ready.push(Reverse(w));
            }
        }
    }
    debug_assert_eq!(topo.len(), n, "the dependencies have no cycle");
    (topo, edges)
}

#[cfg(test)]
mod test {
    use super::{lanes, Deps};

    /// A random DAG of `n` nodes: each follows up to 3 earlier ones,
    /// numbered in a shuffled order (as canonical indices are).
    fn dag(n: usize, seed: u64) -> Deps {
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // `name[i]`: the index of the i-th node in a topological order.
        let mut name: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            name.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let mut deps: Deps = vec![smallvec::SmallVec::new(); n];
        for i in 1..n {
            for _ in 0..next() % 4 {
                let p = name[(next() % i as u64) as usize];
                if !deps[name[i] as usize].contains(&p) {
                    deps[name[i] as usize].push(p);
                }
            }
        }
        deps
    }

    #[test]
    fn lanes_keep_the_dependencies_and_add_no_cycle() {
        for seed in 1..20 {
            let deps = dag(300, seed);
            for max in [0, 1, 3, 16, 1000] {
                let (topo, edges) = lanes(&deps, max);
                let mut at = vec![usize::MAX; deps.len()];
                for (k, &v) in topo.iter().enumerate() {
                    assert_eq!(at[v as usize], usize::MAX, "each node once");
                    at[v as usize] = k;
                }
                for (v, e) in edges.iter().enumerate() {
                    assert!(
                        deps[v].iter().all(|p| e.contains(p)),
                        "the dependencies kept"
                    );
                    assert!(
                        e.iter().all(|&p| at[p as usize] < at[v]),
                        "edges follow the order"
                    );
                }
                if max == 0 {
                    assert_eq!(edges, deps, "no lanes, no edges added");
                }
                if max == 1 {
                    // One lane: a total order.
                    for w in topo.windows(2) {
                        assert!(edges[w[1] as usize].contains(&w[0]), "seed {seed}");
                    }
                }
                // Deterministic.
                assert_eq!(lanes(&deps, max), (topo, edges));
            }
        }
    }

    /// With `max` lanes, no more than `max` nodes can run side by side: of
    /// any `max + 1` nodes, one is ordered after another (checked on
    /// nodes that all have no dependencies of their own).
    #[test]
    fn lanes_bound_the_width() {
        let deps: Deps = vec![smallvec::SmallVec::new(); 50];
        let (topo, edges) = lanes(&deps, 4);
        assert_eq!(topo, (0..50).collect::<Vec<u32>>());
        let roots = edges.iter().filter(|e| e.is_empty()).count();
        assert_eq!(roots, 4, "four chains");
        for (v, e) in edges.iter().enumerate().skip(4) {
            assert_eq!(e.as_slice(), [v as u32 - 4], "the shallowest lane: in turn");
        }
    }

    /// The longest path of `edges`, in nodes.
    fn longest(edges: &Deps, topo: &[u32]) -> u32 {
        let mut d = vec![0u32; edges.len()];
        for &v in topo {
            d[v as usize] = 1 + edges[v as usize]
                .iter()
                .map(|&p| d[p as usize])
                .max()
                .unwrap_or(0);
        }
        d.into_iter().max().unwrap_or(0)
    }

    /// Where no more than `max` nodes can run at once, lanes put the
    /// next node behind the shallowest lane, so the longest path does not
    /// grow (review 3's examples, which round robin lengthened).
    #[test]
    fn lanes_join_the_shallowest_lane() {
        let sv = |v: &[u32]| smallvec::SmallVec::<[u32; 4]>::from_slice(v);
        for deps in [
            vec![sv(&[1, 2]), sv(&[]), sv(&[]), sv(&[1])],
            vec![
                sv(&[]),
                sv(&[2]),
                sv(&[0]),
                sv(&[0]),
                sv(&[1, 3]),
                sv(&[1, 2]),
            ],
        ] {
            let (topo, edges) = lanes(&deps, 2);
            let (_, plain) = lanes(&deps, 0);
            assert_eq!(longest(&edges, &topo), longest(&plain, &topo), "{edges:?}");
        }
    }
}
