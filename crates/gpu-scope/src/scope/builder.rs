//! A spawn with options ([`Scope::task`]): its stream's priority, its
//! name, its device.

use super::Scope;
use gpu_sched::{Priority, Result};

/// A spawn with options, from [`Scope::task`]: set what differs from
/// [`Scope::spawn`]'s defaults, then [`TaskBuilder::spawn`].
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let mut panel = gpu::Buffer::<f32>::zeros(64)?;
/// let mut trailing = gpu::Buffer::<f32>::zeros(4096)?;
/// gpu::scope(|s| {
///     // The critical path on a stream of the greatest priority: its
///     // kernels are scheduled ahead of the trailing update's waiting ones.
///     s.task()
///         .priority(gpu::Priority::High)
///         .spawn(|t| gpu_kernels::fill(t, &mut panel, 1.0));
///     s.spawn(|t| gpu_kernels::fill(t, &mut trailing, 2.0));
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
#[must_use = "a task builder does nothing until `spawn`"]
pub struct TaskBuilder<'s, 'r, 'scope> {
    pub(super) scope: &'s Scope<'r, 'scope>,
    pub(super) opts: TaskOptions,
    pub(super) device: Option<usize>,
}

/// What a [`TaskBuilder`] sets of the task itself.
#[derive(Default, Debug)]
pub(super) struct TaskOptions {
    pub(super) priority: Priority,
    pub(super) name: Option<std::sync::Arc<str>>,
}

impl std::fmt::Debug for TaskBuilder<'_, '_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskBuilder")
            .field("priority", &self.opts.priority)
            .field("name", &self.opts.name)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl<'scope> TaskBuilder<'_, '_, 'scope> {
    /// The priority of the task's stream ([`Priority`]; default
    /// [`Priority::Normal`]). On CUDA a [`Priority::High`] task runs on a
    /// stream of the greatest priority, whose kernels the device schedules
    /// ahead of other streams' waiting ones (running kernels are not
    /// preempted); the host backend runs every stream alike. The task's
    /// host code runs as any spawn's (the pool's job order is Rayon's:
    /// it has no priorities). In a scope capture or a graphed scope it has
    /// no effect (the task's work goes into the graph). Tasks it spawns
    /// have the default priority unless given one.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.opts.priority = priority;
        self
    }

    /// The task's name (`format!("system {i}")`): its failure says which
    /// task it was ([`gpu_sched::Error::InTask`], with its device), both
    /// its body's error and a library result it left to check (a
    /// factorization's), wherever the scope reports it; `e.task()` reads
    /// it back and `e.root()` reaches the failure. Tasks it spawns are
    /// unnamed unless named.
    pub fn name(mut self, name: impl Into<std::sync::Arc<str>>) -> Self {
        self.opts.name = Some(name.into());
        self
    }

    /// Places the task on device `device` of the runtime's group, as
    /// [`Scope::spawn_on`].
    pub fn device(mut self, device: usize) -> Self {
        self.device = Some(device);
        self
    }

    /// Spawns the task, as [`Scope::spawn`] with these options.
    pub fn spawn<F>(self, f: F)
    where
        F: for<'r2> FnOnce(&Scope<'r2, 'scope>) -> Result<()> + Send + 'scope,
    {
        let s = self.scope;
        let rt = match self.device {
            None => s.ctx.runtime().clone(),
            Some(d) => match s.ctx.runtime().device(d) {
                Ok(rt) => rt,
                Err(e) => return s.state.fail(e),
            },
        };
        s.spawn_in(rt, self.opts, f)
    }
}
