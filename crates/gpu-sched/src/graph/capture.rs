//! Capturing a whole scope into one graph (R12, DESIGN "Benchmarks added").
//!
//! [`crate::TaskContext::capture_scope`] begins a capture on its task's
//! stream and runs a body in which every task begun with the capture's
//! [`CaptureHandle`] (`gpu::capture`'s spawns and joins, which pass it from
//! each task to the tasks it starts) *joins* it: the task submits to the
//! capturing stream, as the capture's ledger task, instead of taking a
//! stream of its own. One stream would make the graph a chain; so before
//! each operation the capture sets the node's dependencies itself
//! (`cuStreamUpdateCaptureDependencies`), to what the runtime would have
//! made it wait for on separate streams:
//!
//! - the task's previous operation (its stream order: a task's operations
//!   run in program order, raw pointers and all);
//! - the fences it waits for (spawn and join: the spawner's operations
//!   before the spawn, the joined tasks' last ones);
//! - every earlier operation whose memory conflicts with its own: the last
//!   writer of each range it reads, and the last writer and the readers
//!   since of each range it writes (the ledger's rule, on address ranges).
//!
//! The operations of unrelated tasks become parallel branches: replayed, the
//! graph overlaps what the tasks would have overlapped on their streams,
//! with no launch cost per operation. The graph's launch is one tracked
//! operation that touches every range the capture touched (`Graph`'s
//! launch checks that the caller passes each buffer with its access).
//!
//! Operations are submitted one at a time under the capture's lock (one
//! stream takes them in some order anyway); the lock is the capture's own,
//! not the ledger's (R14).

use super::recording::{Recorded, Recording, Shards};
use super::ChildCache;
use crate::driver::{Driver, MemAccess, NodeOp, Nodes, RawNode, RawStream};
use crate::error::{Error, Result};
use crate::runtime::GraphMemory;
use gpu_epoch::{Access, StreamId, Task};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A scope capture in progress: its stream, its ledger task, and what its
/// operations touched so far.
pub(crate) struct ScopeCapture {
    /// This capture among all of the process's (its fences name it).
    pub(crate) id: u64,
    /// The runtime whose stream captures.
    pub(crate) rt_id: u64,
    /// The ledger task every joined task submits as (the capturing task's):
    /// the stream keeps one owner, so it is not shared (R3).
    pub(crate) task: Task,
    /// The capturing stream.
    pub(crate) slot: (StreamId, RawStream),
    /// Set when the capture ends: a task of it that outlived it (sent
    /// away and kept) submits nothing more.
    ended: AtomicBool,
    /// A graphed scope's (DESIGN "Graphs without capture by hand"): operations are recorded as nodes
    /// ([`ScopeCapture::record`]), not captured from a stream.
    build: bool,
    /// A serial graphed scope's: its tasks run at their spawn, on the
    /// spawning thread (`gpu::Graphed::serial`).
    pub(crate) serial: bool,
    state: Mutex<Deps>,
    /// A graphed scope's recorded operations.
    shards: Shards,
    /// A graphed scope's memory, which its allocations reuse from run to
    /// run, and its foreign operations' captures kept from the last run.
    memory: Option<(Arc<GraphMemory>, Arc<ChildCache>)>,
}

impl std::fmt::Debug for ScopeCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeCapture")
            .field("stream", &self.slot.0)
            .field("ended", &self.ended.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The nodes that last wrote one address range, and those that read it
/// since.
#[derive(Default)]
struct RangeUses {
    writer: Nodes,
    readers: Vec<RawNode>,
    /// Whether an operation of the capture wrote it.
    written: bool,
}

/// Per address range (start, bytes) touched in the capture: its uses.
#[derive(Default)]
struct Deps {
    /// The uses of each range, in the order first touched.
    uses: Vec<RangeUses>,
    /// Each range's place in `uses`, found by its exact (start, bytes)...
    exact: FxHashMap<(u64, u64), u32>,
    /// ... and in address order, to find the ranges that overlap one.
    ordered: BTreeMap<(u64, u64), u32>,
    /// The longest range, to find the ranges that overlap a new one.
    longest: u64,
    /// Whether two ranges touched overlap (are not the same range): until
    /// then, the only range that overlaps one touched before is itself,
    /// found at once in `exact` (buffers touched whole, or in the same
    /// parts, the common case).
    overlapping: bool,
    /// A graphed scope's operations recorded so far (the next one's
    /// index).
    recorded: u32,
    /// A serial graphed scope's last run ([`Trail`]), followed while each
    /// operation is the one of the same index there: its dependencies are
    /// then taken from it, and the maps above stay empty until the first
    /// operation that differs, where they catch up.
    guide: Option<Arc<Trail>>,
    /// Where the first operation that differs from the guide came (`None`
    /// while every one so far was its guide's, or with no guide).
    diverged: Option<u32>,
    /// This run's steps from there on (a guided run's only).
    trail: Vec<Step>,
}

/// What a graphed scope's run starts from ([`GraphCache::for_run`]): the
/// memory its allocations reuse, the captures its foreign operations may
/// reuse, the storage its recording may fill, and the last run's trail.
///
/// [`GraphCache::for_run`]: super::GraphCache::for_run
pub(crate) type RunParts = (
    Arc<GraphMemory>,
    Arc<ChildCache>,
    Vec<Recorded>,
    Option<Arc<Trail>>,
);

/// What a graphed scope's run recorded, step by step: the operations'
/// keys, what each followed (its task's chain) and touched, and the
/// dependencies it got. The dependencies are a function of the steps
/// before and its own (`Deps::of` and `Deps::record` read nothing else),
/// so a later run whose operations are the same up to one gets the same
/// dependencies for it: the next run's guide.
#[derive(Default)]
pub(crate) struct Trail {
    steps: Vec<Step>,
}

#[derive(Clone)]
struct Step {
    key: (u64, u32),
    chain: Nodes,
    mem: smallvec::SmallVec<[MemAccess; 4]>,
    deps: smallvec::SmallVec<[u32; 4]>,
}

impl Deps {
    /// The places in `uses` of the ranges that overlap `m`'s.
    fn overlaps(&self, m: &MemAccess) -> smallvec::SmallVec<[u32; 4]> {
        let key = (m.ptr, m.bytes as u64);
        if !self.overlapping {
            if let Some(&u) = self.exact.get(&key) {
                return smallvec::smallvec![u];
            }
        }
        let (lo, hi) = (m.ptr, m.ptr + m.bytes as u64);
        let from = (lo.saturating_sub(self.longest), 0);
        self.ordered
            .range(from..(hi, 0))
            .filter(|(&(p, n), _)| p + n > lo)
            .map(|(_, &u)| u)
            .collect()
    }

    /// The next recorded operation (keyed `key`, after `chain`, touching
    /// `mem`): its index, and the earlier operations it follows (from the
    /// guide while the run follows it).
    fn next(
        &mut self,
        key: (u64, u32),
        chain: &Nodes,
        mem: &[MemAccess],
    ) -> (u32, smallvec::SmallVec<[u32; 4]>) {
        let i = self.recorded;
        self.recorded += 1;
        if let Some(deps) = self.follow(i, key, chain, mem) {
            return (i, deps);
        }
        let deps = self.of(chain, mem);
        // Node ids are indices plus one (0 is no node).
        self.record(mem, &smallvec::smallvec![RawNode(u64::from(i) + 1)]);
        let deps: smallvec::SmallVec<[u32; 4]> = deps.iter().map(|n| (n.0 - 1) as u32).collect();
        if self.guide.is_some() {
            self.trail.push(Step {
                key,
                chain: chain.clone(),
                mem: mem.into(),
                deps: deps.clone(),
            });
        }
        (i, deps)
    }

    /// Operation `i`'s dependencies from the guide, if it and every one
    /// before it are the guide's (the same key, chain and memory); at the
    /// first that is not, the maps catch up with the operations before it
    /// (each the guide's, touching the same memory), and `None` from then
    /// on.
    fn follow(
        &mut self,
        i: u32,
        key: (u64, u32),
        chain: &[RawNode],
        mem: &[MemAccess],
    ) -> Option<smallvec::SmallVec<[u32; 4]>> {
        if self.diverged.is_some() {
            return None;
        }
        let guide = self.guide.as_ref()?;
        if let Some(s) = guide.steps.get(i as usize) {
            if s.key == key && s.chain[..] == *chain && s.mem[..] == *mem {
                return Some(s.deps.clone());
            }
        }
        let guide = guide.clone();
        self.diverged = Some(i);
        for (k, s) in guide.steps[..i as usize].iter().enumerate() {
            self.record(&s.mem, &smallvec::smallvec![RawNode(k as u64 + 1)]);
        }
        None
    }

    /// This run's trail, for the next run's guide; `None` unless guided.
    fn take_trail(&mut self) -> Option<Arc<Trail>> {
        let guide = self.guide.take()?;
        let Some(diverged) = self.diverged else {
            // Every operation was the guide's: the guide says it all (its
            // steps past this run's last hold for the same operations).
            return Some(guide);
        };
        let mut steps = guide.steps[..diverged as usize].to_vec();
        steps.append(&mut self.trail);
        Some(Arc::new(Trail { steps }))
    }

    /// Whether the run follows a guide, every operation so far its.
    #[cfg(test)]
    fn following(&self) -> bool {
        self.guide.is_some() && self.diverged.is_none()
    }

    /// The nodes an operation touching `mem` must follow, besides `chain`.
    fn of(&self, chain: &[RawNode], mem: &[MemAccess]) -> smallvec::SmallVec<[RawNode; 8]> {
        let mut d: smallvec::SmallVec<[RawNode; 8]> = chain.iter().copied().collect();
        for m in mem.iter().filter(|m| m.bytes > 0) {
            for u in self.overlaps(m) {
                let u = &self.uses[u as usize];
                d.extend_from_slice(&u.writer);
                if m.access == Access::Write {
                    d.extend_from_slice(&u.readers);
                }
            }
        }
        d.sort_unstable_by_key(|n| n.0);
        d.dedup();
        d
    }

    /// `nodes` touched `mem`.
    fn record(&mut self, mem: &[MemAccess], nodes: &Nodes) {
        for m in mem.iter().filter(|m| m.bytes > 0) {
            let key = (m.ptr, m.bytes as u64);
            let u = match self.exact.get(&key) {
                Some(&u) => u,
                None => {
                    if !self.overlapping && !self.overlaps(m).is_empty() {
                        self.overlapping = true;
                    }
                    let u = self.uses.len() as u32;
                    self.uses.push(RangeUses::default());
                    self.exact.insert(key, u);
                    self.ordered.insert(key, u);
                    self.longest = self.longest.max(key.1);
                    u
                }
            };
            let u = &mut self.uses[u as usize];
            match m.access {
                Access::Write => {
                    u.writer = nodes.clone();
                    u.readers.clear();
                    u.written = true;
                }
                Access::Read => u.readers.extend_from_slice(nodes),
            }
        }
    }
}

impl ScopeCapture {
    pub(crate) fn new(rt_id: u64, task: Task, slot: (StreamId, RawStream)) -> Self {
        Self::with_mode(rt_id, task, slot, None, false)
    }

    /// A graphed scope's (DESIGN "Graphs without capture by hand"): its operations are recorded, to be built
    /// into a graph launched on `slot`'s stream, which is not captured;
    /// with `serial`, its tasks run at their spawn ([`CaptureHandle::serial`]);
    /// its allocations take `memory`'s blocks, its foreign operations
    /// `children`'s captures where they may, and its recording the
    /// storage `spare` (the last run's, emptied); a serial one follows
    /// `guide` (the last run's [`Trail`]; an empty one for the first run)
    /// while its operations are the same.
    pub(crate) fn new_build(
        rt_id: u64,
        task: Task,
        slot: (StreamId, RawStream),
        run: RunParts,
        serial: bool,
    ) -> Self {
        Self::with_mode(rt_id, task, slot, Some(run), serial)
    }

    fn with_mode(
        rt_id: u64,
        task: Task,
        slot: (StreamId, RawStream),
        run: Option<RunParts>,
        serial: bool,
    ) -> Self {
        let build = run.is_some();
        let (memory, spare, guide) = match run {
            // `guide` is a serial scope's only (`GraphCache::for_run`).
            Some((m, c, spare, guide)) => (Some((m, c)), spare, guide),
            None => (None, Vec::new(), None),
        };
        let deps = Deps {
            guide,
            ..Deps::default()
        };
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        ScopeCapture {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            rt_id,
            task,
            slot,
            ended: AtomicBool::new(false),
            build,
            serial,
            state: Mutex::new(deps),
            shards: Shards::with_spare(spare),
            memory,
        }
    }

    /// A graphed scope's memory (`None` for a stream capture).
    pub(crate) fn memory(&self) -> Option<&Arc<GraphMemory>> {
        self.memory.as_ref().map(|m| &m.0)
    }

    /// A graphed scope's captures kept from the last run (`None` for a
    /// stream capture).
    pub(crate) fn children(&self) -> Option<&Arc<ChildCache>> {
        self.memory.as_ref().map(|m| &m.1)
    }

    /// Whether this is a graphed scope's recording rather than a stream
    /// capture.
    #[inline]
    pub(crate) fn is_build(&self) -> bool {
        self.build
    }

    /// Records one operation of a joined task of a graphed scope: `op`,
    /// keyed `key`, after its task's `chain` and the conflicts of `mem`
    /// (as [`ScopeCapture::submit`] orders a captured one); `chain`
    /// becomes its node.
    pub(crate) fn record(
        &self,
        chain: &RefCell<Nodes>,
        key: (u64, u32),
        mem: &[MemAccess],
        op: NodeOp,
    ) -> Result<()> {
        // Under the lock only what orders the operation: its index and
        // the nodes it follows.
        let (i, deps) = {
            let mut st = self.state.lock();
            self.check_open()?;
            st.next(key, &chain.borrow(), mem)
        };
        *chain.borrow_mut() = smallvec::smallvec![RawNode(u64::from(i) + 1)];
        self.shards.push(Recorded { i, key, op, deps });
        Ok(())
    }

    /// The recording so far, taken (once the capture ended).
    ///
    /// # Errors
    ///
    /// [`Error::CaptureEnded`] if an operation is missing: a task of the
    /// scope kept past it (sent away) was recording one as the scope
    /// ended; nothing of the recording may run then.
    pub(crate) fn take_recording(&self) -> Result<Recording> {
        let n = self.state.lock().recorded as usize;
        self.shards.take(n)
    }

    /// A serial graphed scope's trail of this run, the next run's guide
    /// (once the capture ended; `None` for other captures).
    pub(crate) fn take_trail(&self) -> Option<Arc<Trail>> {
        self.state.lock().take_trail()
    }

    /// Errs once the capture ended.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.ended.load(Ordering::Acquire) {
            return Err(Error::CaptureEnded);
        }
        Ok(())
    }

    /// Marks the capture ended, under its lock: an operation in flight in
    /// [`ScopeCapture::submit`] finishes first (it is in the graph), and
    /// every later one fails (it never runs unstamped on the stream).
    pub(crate) fn end(&self) {
        let _st = self.state.lock();
        self.ended.store(true, Ordering::Release);
    }

    /// Submits one operation of a joined task: `enqueue` puts it on the
    /// capturing stream, which first takes its dependencies (the task's
    /// `chain`, the conflicts of `mem`); `chain` becomes its nodes.
    pub(crate) fn submit<R>(
        &self,
        drv: &dyn Driver,
        chain: &RefCell<Nodes>,
        mem: &[MemAccess],
        enqueue: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let raw = self.slot.1;
        let mut st = self.state.lock();
        // Under the lock, which `end` takes: checked here, the capture lasts
        // until this operation is in.
        self.check_open()?;
        let deps = st.of(&chain.borrow(), mem);
        drv.capture_set_deps(raw, &deps)?;
        let r = enqueue()?;
        // The nodes the operation added (its dependencies again if it added
        // none: then it stands for them, which orders as much).
        let added = drv.capture_tail(raw)?;
        st.record(mem, &added);
        *chain.borrow_mut() = added;
        Ok(r)
    }

    /// Every range the capture's operations touched, once each, written if
    /// any operation wrote it.
    pub(crate) fn touches(&self) -> Vec<MemAccess> {
        let st = self.state.lock();
        let mut out: Vec<MemAccess> = Vec::with_capacity(st.uses.len());
        for (&(ptr, bytes), &u) in &st.ordered {
            let u = &st.uses[u as usize];
            let access = if u.written {
                Access::Write
            } else {
                Access::Read
            };
            out.push(MemAccess {
                ptr,
                bytes: bytes as usize,
                access,
            });
        }
        out
    }
}

/// The scope capture (if any) that a task's spawned jobs join: `gpu`'s pool
/// takes one from the spawning task ([`TaskHooks::capture_handle`](crate::plumbing::TaskHooks::capture_handle))
/// and begins each job's task with it ([`RuntimeHooks::begin_task_in`](crate::plumbing::RuntimeHooks::begin_task_in)).
/// Passed explicitly, never ambient: a job that a thread runs while a
/// captured task waits there (Rayon runs other jobs in its waits) begins
/// its tasks as it would anywhere. Not for direct use.
#[doc(hidden)]
#[derive(Clone, Default, Debug)]
pub struct CaptureHandle(pub(crate) Option<Arc<ScopeCapture>>, pub(crate) u64);

impl CaptureHandle {
    /// Whether the tasks begun with this handle belong to a serial graphed
    /// scope (`gpu::Graphed::serial`): `gpu`'s pool runs them at their
    /// spawn, on the spawning thread, rather than as jobs.
    pub fn serial(&self) -> bool {
        self.0.as_ref().is_some_and(|c| c.serial)
    }
}

#[cfg(test)]
mod test;
