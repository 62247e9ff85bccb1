//! Graphed scopes (DESIGN "Graphs without capture by hand"): a scope that becomes a CUDA graph by itself. Each
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
use crate::error::{Error, Result};
use crate::graph::{GraphCache, ScopeCapture};
use gpu_epoch::StreamId;
use std::sync::Arc;

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
    /// Runs `body` as a graphed scope (DESIGN "Graphs without capture by hand"): the operations of this task
    /// and of every task begun with its [`TaskHooks::capture_handle`](crate::plumbing::TaskHooks::capture_handle)
    /// while `body` runs are recorded, then launched as one graph on this
    /// task's stream when `body` returns: the graph `cache` holds if the
    /// recording has its shape (after setting changed kernel arguments in
    /// place), else one built now, which `cache` keeps.
    ///
    /// Inside, kernel launches, device copies within the device, fills of
    /// whole words, allocations (memory reused from the last run) and
    /// foreign operations declared capture-safe (library calls, as child
    /// graphs) go into the graph; everything a scope capture refuses is
    /// refused, and so are foreign operations not declared capture-safe
    /// and collectives. If `body` fails, nothing of it runs.
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
            // DESIGN "Streams are a resource": another live task submits to this stream (the pool ran
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
            cache.for_run(rt),
            cache.serial(),
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
        let launched = r.and_then(|()| cap.take_recording()).and_then(|rec| {
            cache.keep_trail(cap.take_trail());
            let merge = |members: &[&_], tag: &_, arrays, slot| {
                super::batched_node(rt, slot, members, tag, arrays)
            };
            cache.launch(rt, rec, (sid, raw), &merge)
        });
        cache.note_times(t1 - t0, t1.elapsed());
        cache.end_run();
        // After the launch: the stamps now name queued work.
        guard.end();
        launched
    }
}
