//! # gpu-sched: the runtime
//!
//! `§n` and `DESIGN §n` in this crate refer to the design note,
//! `docs/DESIGN.md` at the repository's root.
//!
//! Backends (CUDA through cudarc; a host backend that runs streams as CPU
//! threads with a race detector), the stream and event pools, tracked
//! buffers and operations. Every operation asks the [`gpu_epoch::Ledger`]
//! whether a cross-stream wait is needed and does what it says.
//!
//! # Layout (for readers of the source)
//!
//! Modules import only modules before them in this order, so there is no
//! import circle:
//!
//! ```text
//! error, kernel -> driver (cuda/, host/) -> pool, trace -> runtime
//!   -> handoff, fence -> buffer -> capture -> context -> event, typed, graph, gate, staging,
//!   nccl
//! ```
//!
//! but for `context/gate.rs` (a task blocking on a gate, with the gate
//! kernel), which names `gate` and `typed`.
//!
//! A type's core lives in its own module. A module above it may add an
//! `impl` block for what it alone makes or needs, and nothing else:
//! `Runtime` gets `free_ordered`/`decide` (handoff.rs), `begin_task`
//! (context/), `event` (event.rs), `gate` (gate.rs) and its page-locked
//! memory pool (staging.rs); `Buffer` gets its one-off-task conveniences
//! (context/); `TaskContext` gets its operations by kind (in `context/`:
//! `tracked.rs`, the path every operation takes, `memory.rs`, `copy.rs`,
//! `host.rs`, `launch.rs`, `gate.rs`; outside it: event.rs, graph.rs).
//! Everything else of a type is in its module.

mod buffer;
mod capture;
mod context;
mod driver;
mod error;
mod event;
mod fence;
mod gate;
mod graph;
mod handoff;
mod kernel;
mod loader;
pub mod nccl;
mod pool;
mod ptx;
mod runtime;
mod staging;
pub mod trace;
mod typed;

pub use buffer::{Buffer, DeviceRepr, DeviceSlice, DeviceSliceMut, Split, View, ViewMut};
pub use capture::CaptureHandle;
pub use context::TaskContext;
pub use driver::{BackendChoice, BackendKind, SyncMode};
#[doc(hidden)]
pub use driver::{FaultInjector, FaultKind};
pub use error::{Error, Result};
pub use event::Event;
pub use fence::Fence;
pub use gate::Gate;
pub use gpu_epoch::{
    Access, Binding, CounterSnapshot, Generation, Reason, StreamEpoch, StreamId, TaskId, Uses,
};
pub use graph::{Graph, GraphLaunch};
pub use kernel::{BuiltinEntry, BuiltinModule, LaunchConfig};
pub use loader::LoadedModule;
pub use runtime::{LedgerView, LiveCounts, Runtime, RuntimeOptions};
pub use staging::{par_copy, Staging};
pub use typed::{Arg, Args, Builtin, HostFn, In, Kernel, KernelParam, Out, Signature, Untracked};

/// The low-level form of kernel parameters and arguments: what a
/// [`Signature`] lowers to and what the backends launch with. Not needed to
/// declare or launch a kernel ([`Kernel`], [`Builtin`]); named by the
/// hidden items of the typed path's sealed traits.
pub mod raw {
    pub use crate::kernel::{KernelArg, Param};
}
