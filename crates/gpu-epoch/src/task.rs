//! Task identity and liveness.

use crate::primitive::{Arc, AtomicBool};
use crate::TaskId;
use std::sync::atomic::Ordering::{Acquire, Release};

/// A task known to a [`Ledger`](crate::Ledger): an id and whether its body is
/// still running. Cheap to clone; the ledger keeps a clone in each stream the
/// task owns, to tell a finished owner (whose stream may be taken over, R3,
/// R13) from a live one (whose stream becomes shared).
#[derive(Clone, Debug)]
pub struct Task {
    inner: Arc<TaskState>,
}

#[derive(Debug)]
struct TaskState {
    id: TaskId,
    /// Stored `false` `Release` by `finish`; loaded `Acquire` by `is_live`
    /// (a take-over, under the stream's `owner` mutex): the taker comes
    /// after the finished task's last submission and close.
    live: AtomicBool,
}

impl Task {
    pub(crate) fn new(id: TaskId) -> Self {
        Task {
            inner: Arc::new(TaskState {
                id,
                live: AtomicBool::new(true),
            }),
        }
    }

    /// The task's id.
    #[inline]
    pub fn id(&self) -> TaskId {
        self.inner.id
    }

    /// Whether the task's body is still running.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.inner.live.load(Acquire)
    }

    pub(crate) fn finish(&self) {
        self.inner.live.store(false, Release);
    }
}
