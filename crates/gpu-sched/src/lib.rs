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
//! error, kernel -> ptx, driver (cuda/, host/) -> pool, trace
//!   -> runtime (mod.rs, options.rs, group.rs) -> fence, event, graph -> buffer -> capture
//!   -> context (mod.rs, tracked.rs, memory.rs, copy.rs, host.rs, event.rs, graph.rs)
//!   -> handoff, launch, staging, typed -> gate, loader, nccl
//! ```
//!
//! `kernel` is kernels as the backends see them (modules, parameter lists,
//! a launch's arguments); `ptx` is what is checked of PTX text before a
//! backend loads it (its header and each entry's parameters); `typed` is
//! typed kernels (a signature declared once, checked against the PTX
//! entry); `loader` is users' modules (PTX or CUDA C, loaded once per
//! runtime and source).
//!
//! A type's core lives in its own module. A module above it may add an
//! `impl` block for what it alone makes or needs, and nothing else:
//! `Runtime` gets `free_ordered`/`decide` (handoff.rs: the ordered free,
//! called by buffers' drops, carries out its hand-off with the context's
//! `wait_streams`), `begin_task` (context/), `event` (event.rs), `gate`
//! (gate.rs), `load_ptx`/`compile_cuda` (loader.rs) and its page-locked
//! memory pool (staging.rs); `Buffer` gets its one-off-task conveniences
//! (context/);
//! `TaskContext` gets its operations by kind (in `context/`: `tracked.rs`,
//! the path every operation takes and its hand-offs, `memory.rs`,
//! `copy.rs`, `host.rs`, `event.rs`, `graph.rs`; outside it: launch.rs,
//! gate.rs). Everything else of a type is in its module.

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
mod launch;
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
pub use context::{
    DevicePtr, DevicePtrMut, Foreign, ForeignStream, GraphLaunch, ReadArg, Reads, TaskContext,
    TouchList, WriteArg, Writes,
};
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
pub use graph::Graph;
pub use kernel::{HostKernelFn, KernelArg, KernelDef, LaunchConfig, Module, Param};
pub use launch::{KernelRef, Launch, ScalarArg};
pub use loader::LoadedModule;
pub use runtime::{LedgerView, LiveCounts, Runtime, RuntimeOptions};
pub use staging::{par_copy, Staging};
pub use typed::{Arg, Args, HostFn, In, Kernel, KernelParam, Out, Signature};
