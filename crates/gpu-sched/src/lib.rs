//! # gpu-sched: the runtime
//!
//! `§n` and `DESIGN §n` in this crate refer to the design note,
//! `docs/DESIGN.md` at the repository's root.
//!
//! Backends (CUDA through cudarc; a host backend that runs streams as CPU
//! threads with a race detector), the stream and event pools, tracked
//! buffers and operations. Every operation asks the [`gpu_epoch::Ledger`]
//! whether a cross-stream wait is needed and does what it says.

mod buffer;
mod context;
mod driver;
mod error;
mod event;
mod gate;
mod graph;
mod kernel;
mod launch;
mod pool;
mod runtime;
mod staging;
pub mod trace;

pub use buffer::{Buffer, DeviceRepr, DeviceSlice, Split, ViewMut};
pub use context::TaskContext;
pub use driver::{BackendChoice, BackendKind, SyncMode};
pub use error::{Error, Result};
pub use event::{Event, Fence};
pub use gate::Gate;
pub use gpu_epoch::{
    Access, Binding, CounterSnapshot, Generation, Reason, StreamEpoch, StreamId, TaskId, Uses,
};
pub use graph::{Graph, GraphLaunch};
pub use kernel::{HostKernelFn, KernelArg, KernelDef, LaunchConfig, Module, Param};
pub use launch::{KernelRef, Launch, ScalarArg};
pub use runtime::{LedgerView, LiveCounts, Runtime, RuntimeOptions};
pub use staging::Staging;
