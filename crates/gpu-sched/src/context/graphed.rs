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
    deps: Vec<smallvec::SmallVec<[u32; 4]>>,
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
#[derive(Default)]
pub struct GraphCache {
    built: Option<Built>,
    stats: GraphStats,
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
            .and_then(|rec| self.launch_recording(cache, rec, raw));
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
        rec: Recording,
        raw: RawStream,
    ) -> Result<()> {
        let n = rec.ops.len();
        if n == 0 {
            return Ok(());
        }
        // The canonical order: by task key and index in the task, the same
        // from one run to the next whatever order the tasks ran in.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&i| (rec.keys[i as usize], i));
        let mut rank = vec![0u32; n];
        for (j, &i) in order.iter().enumerate() {
            rank[i as usize] = j as u32;
        }
        let mut slots: Vec<Option<NodeOp>> = rec.ops.into_iter().map(Some).collect();
        let ops: Vec<NodeOp> = order
            .iter()
            .map(|&i| slots[i as usize].take().expect("each index once"))
            .collect();
        let deps: Vec<smallvec::SmallVec<[u32; 4]>> = order
            .iter()
            .map(|&i| {
                let mut d: smallvec::SmallVec<[u32; 4]> = rec.deps[i as usize]
                    .iter()
                    .map(|&x| rank[x as usize])
                    .collect();
                d.sort_unstable();
                d
            })
            .collect();
        let rt = &self.rt;
        let drv = rt.driver();
        // The cached graph, if it has this shape: the kernel nodes whose
        // arguments changed.
        let reuse = cache.built.as_ref().and_then(|b| {
            if b.rt.id() != rt.id() || b.ops.len() != n || b.deps != deps {
                return None;
            }
            let mut changed = Vec::new();
            for (j, (new, old)) in ops.iter().zip(&b.ops).enumerate() {
                match new.likeness(old) {
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
                    if let NodeOp::Kernel(k) = &ops[j] {
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
                        b.ops[j] = ops[j].clone();
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
                // Nodes are added in the order the operations were
                // submitted, which follows their dependencies.
                let topo: Vec<u32> = rank.clone();
                let spec = GraphSpec {
                    ops: &ops,
                    deps: &deps,
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
                });
                cache.stats.builds += 1;
                raw_graph
            }
        };
        cache.stats.nodes = n;
        // SAFETY: the graph's operations are this run's (set above), whose
        // buffers were handed to this stream and stamped in its current
        // epoch (`tracked`); the scope's body still borrows them, and a
        // free of one meanwhile was deferred (`waits_for_building`).
        unsafe { drv.graph_launch(graph, raw) }
    }
}
