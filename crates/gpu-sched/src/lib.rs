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
//!   -> context (mod.rs, tracked.rs, launch.rs, memory.rs, copy.rs, host.rs, event.rs,
//!      graph.rs, foreign.rs) -> handoff, staging, typed -> gate, loader, nccl
//!   -> future
//! ```
//!
//! but for `context/launch.rs` and `context/gate.rs` (the one launch path
//! and a task blocking on a gate, with the gate kernel), which name `typed`
//! and `gate`. `kernel` is kernels as the backends see them (parameter
//! lists, a launch's configuration, built-in modules); `ptx` is what is
//! checked of PTX text before a backend loads it (its header and each
//! entry's parameters); `typed` is typed kernels (a signature declared
//! once, checked against the PTX entry: users' `Kernel`s and the
//! `Builtin` statics); `loader` is users' modules (PTX or CUDA C, loaded
//! once per runtime and source).
//!
//! A type's core lives in its own module. A module above it may add an
//! `impl` block for what it alone makes or needs, and nothing else:
//! `Runtime` gets `free_ordered`/`decide` (handoff.rs: the ordered free,
//! called by buffers' drops, carries out its hand-off with the context's
//! `wait_streams`), `begin_task` (context/), `event` (event.rs), `gate`
//! (gate.rs), `load_ptx`/`compile_cuda` (loader.rs) and its page-locked
//! memory pool (staging.rs); `Buffer` gets its one-off-task conveniences
//! (context/); `TaskContext` gets its operations by kind, all in
//! `context/`: `tracked.rs` (the path every operation takes and its
//! hand-offs), `launch.rs`, `memory.rs`, `copy.rs`, `host.rs`, `event.rs`,
//! `graph.rs`, `gate.rs`, `foreign.rs`. Everything else of a type is in its
//! module.

pub mod blas;
mod buffer;
mod capture;
mod context;
mod driver;
mod error;
mod event;
mod fence;
pub mod fft;
mod future;
mod gate;
mod graph;
mod handoff;
mod kernel;
mod libs;
mod loader;
pub mod nccl;
mod pool;
mod ptx;
pub mod random;
mod runtime;
pub mod solver;
pub mod sparse;
mod staging;
pub mod trace;
mod typed;

pub use buffer::{Buffer, DeviceRepr, DeviceSlice, DeviceSliceMut, Split, View, ViewMut};
pub use capture::CaptureHandle;
pub use context::{
    DevicePtr, DevicePtrMut, Foreign, ForeignStream, GraphCache, GraphLaunch, GraphStats, ReadArg,
    Reads, TaskContext, TouchList, Unchecked, WriteArg, Writes,
};
/// The cudarc these types take and give (`CudaSlice`, `CudaStream`,
/// `CudaContext`), for matching versions.
pub use cudarc;
pub use driver::{BackendChoice, BackendKind, SyncMode};
#[doc(hidden)]
pub use driver::{FaultInjector, FaultKind};
pub use error::{Error, Result};
pub use event::Event;
pub use fence::Fence;
pub use future::{FenceFuture, ToVecFuture};
pub use gate::Gate;
pub use gpu_epoch::{
    Access, Binding, CounterSnapshot, Generation, Reason, StreamEpoch, StreamId, TaskId, Uses,
};
pub use graph::Graph;
pub use kernel::{BuiltinEntry, BuiltinModule, LaunchConfig};
pub use loader::LoadedModule;
pub use runtime::{LedgerView, LiveCounts, Runtime, RuntimeOptions};
pub use staging::{par_copy, Staging};
pub use typed::{Arg, Args, Builtin, HostFn, In, Kernel, KernelParam, Out, Signature, Untracked};

/// The low level, imported on purpose: a task's escape hatches
/// ([`RawTask`](raw::RawTask): its raw stream, raw device pointers, sharing
/// another task's stream), and the form kernel parameters and arguments
/// lower to ([`KernelArg`](raw::KernelArg), [`Param`](raw::Param), named by
/// the hidden items of the typed path's sealed traits; not needed to
/// declare or launch a kernel, see [`Kernel`] and [`Builtin`]).
pub mod raw {
    pub use crate::context::RawTask;
    pub use crate::kernel::{KernelArg, Param};
}
