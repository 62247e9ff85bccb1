//! The hooks `gpu` (gpu-scope) builds its scopes, joins and captures on,
//! and nothing else needs: sealed traits, so that a `gpu::Scope`, which
//! derefs to its [`TaskContext`], offers its users only their own methods
//! (rayon's `iter::plumbing`). Not for direct use: the contracts are
//! gpu-scope's. The list of what gpu-scope needs from the runtime beyond
//! the public API is this file.

use crate::error::Result;
use crate::fence::Fence;
use crate::graph::CaptureHandle;
use crate::runtime::Runtime;
use crate::{TaskContext, Unchecked};

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::TaskContext {}
    impl Sealed for crate::Runtime {}
}

/// What `gpu` needs of a [`Runtime`].
pub trait RuntimeHooks: sealed::Sealed {
    /// Starts a task that joins the scope capture of `capture` (from a
    /// task's [`TaskHooks::capture_handle`]), or a plain task outside one:
    /// `gpu`'s pool starts spawned and joined tasks this way.
    ///
    /// # Errors
    ///
    /// As [`Runtime::begin_task`]; [`crate::Error::Unsupported`] for a
    /// task of another device than the capture's;
    /// [`crate::Error::CaptureEnded`].
    fn begin_task_in(&self, capture: &CaptureHandle) -> Result<TaskContext>;
}

impl RuntimeHooks for Runtime {
    fn begin_task_in(&self, capture: &CaptureHandle) -> Result<TaskContext> {
        Runtime::begin_task_in(self, capture)
    }
}

/// What `gpu` needs of a [`TaskContext`].
pub trait TaskHooks: sealed::Sealed {
    /// Whether this task records for a serial graphed scope
    /// (`gpu::Graphed::serial`): `gpu` runs its spawns and joins at once,
    /// on this thread. Unlike [`TaskHooks::capture_handle`], names no
    /// child.
    fn records_serially(&self) -> bool;

    /// The scope capture this task's next spawned job joins (none outside
    /// one), naming that child: call once per child, in program order.
    fn capture_handle(&self) -> CaptureHandle;

    /// The fence a task ends with, for its joiner: the task's results not
    /// checked yet travel with it (DESIGN "Where a failure goes").
    ///
    /// # Errors
    ///
    /// Driver errors from recording the fence.
    fn final_fence(&self) -> Result<Fence>;

    /// Takes over the unchecked results `fence` carries: this task checks
    /// them at its next wait, or hands them on with its own final fence.
    fn take_results_of(&self, fence: &Fence);

    /// This task's results not checked yet, taken out (for a task that
    /// submitted no GPU work: they travel with its joiner's state).
    fn take_unchecked(&self) -> Unchecked;

    /// Results taken from other tasks ([`TaskHooks::take_unchecked`]),
    /// checked at this task's next wait.
    fn adopt_unchecked(&self, results: Unchecked);
}

impl TaskHooks for TaskContext {
    fn records_serially(&self) -> bool {
        TaskContext::records_serially(self)
    }

    fn capture_handle(&self) -> CaptureHandle {
        TaskContext::capture_handle(self)
    }

    fn final_fence(&self) -> Result<Fence> {
        TaskContext::final_fence(self)
    }

    fn take_results_of(&self, fence: &Fence) {
        TaskContext::take_results_of(self, fence)
    }

    fn take_unchecked(&self) -> Unchecked {
        TaskContext::take_unchecked(self)
    }

    fn adopt_unchecked(&self, results: Unchecked) {
        TaskContext::adopt_unchecked(self, results)
    }
}
