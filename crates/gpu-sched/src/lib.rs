//! # gpu-sched: the runtime
//!
//! A citation such as `DESIGN "Soundness"` in this crate names a
//! section of the design note, `docs/DESIGN.md` at the repository's root.
//!
//! Backends (CUDA through cudarc; a host backend that runs streams as CPU
//! threads with a race detector), the stream and event pools, tracked
//! buffers and operations. Every operation asks the [`gpu_epoch::Ledger`]
//! whether a cross-stream wait is needed and does what it says.
//!
//! # Layout (for readers of the source)
//!
//! Every module, in layers from the bottom (the driver, and the pools and
//! runtime that use the ledger) to the top (users' modules, collectives,
//! futures); a folder ends in `/`, and its files are its row's. A module
//! of a folder may have a row of its own, `folder/module` (its file and
//! the files under `folder/module/`), which its folder's row then leaves
//! out: so a wing kept in one folder may span layers. The kernel wing does
//! (`kernel/`: the driver takes its types, typed kernels take a task), and
//! its `mod.rs` only declares the modules in rows of their own.
//!
//! A module names (`use crate::..`, a `crate::..` path, the crate root's
//! re-exports included, or a path relative to its file: `super::..`,
//! `self::..`, a child module's) only modules of layers below its own,
//! never one beside it, but for the exceptions below.
//! `xtask/tests/layers.rs` reads this table and checks every such path
//! under `src/` against it, and that it lists each module once:
//!
//! ```text
//!  0  error, kernel/: typed errors; kernels as the backends see them
//!     (parameter lists, a launch's configuration, built-in modules)
//!  1  kernel/ptx, driver/: what is checked of PTX text before a backend
//!     loads it; the one trait a backend implements (driver/cuda/,
//!     driver/host/)
//!  2  kernel/modules, pool, trace: the kernel modules a runtime loaded
//!     (built-in and from text, each once), which it holds; stream and
//!     event pools; timelines
//!  3  runtime/: the runtime of one device (state, options, the device
//!     group, libraries' extensions and status words, what its reclaim
//!     path keeps: deferred frees and checks)
//!  4  handoff: the ledger's hand-off decisions and the ordered free
//!  5  buffer, event, graph/, fence/: device buffers and views; user
//!     events; graphs (a capture into one graph, a graphed scope's
//!     recording, the graph kept between its runs, lanes); fences, and
//!     the library results they carry (fence/checks.rs)
//!  6  gate: an operation that blocks its stream until a test opens it
//!  7  context/: `TaskContext`, a task on its stream, and its operations
//!     by kind (tracked.rs: the path every operation takes)
//!  8  kernel/typed: typed kernels (a signature declared once, checked
//!     against the PTX entry: users' `Kernel`s and the `Builtin` statics),
//!     and blocking a stream on a gate (the gate kernel is one)
//!  9  kernel/loader, staging, nccl/, future, plumbing: users' modules
//!     (PTX or CUDA C, loaded once per runtime and source); pinned staging
//!     memory; collectives; completion as futures; the hooks gpu-scope
//!     builds on
//! ```
//!
//! The vendor libraries (cuBLAS, cuSOLVER, cuSPARSE, cuFFT, cuRAND) are
//! not here: they are the crate `gpu-libs`, built on this crate's public
//! API only ([`TaskContext::foreign`], [`Runtime::extension`] for their
//! per-stream handles, [`TaskContext::check_status_later`] for their
//! status words), as any other library can be.
//!
//! **No import circle.** The last one, `context` and `kernel/typed`, went
//! with its one edge against the table: blocking a stream on a gate
//! launches the gate kernel, a `Builtin` whose launch takes a
//! `TaskContext`, so `TaskContext::block_on` lives with the typed kernels
//! (kernel/typed/gate.rs), not in `context/`.
//!
//! One exception, in test builds only: `pool/test.rs` -> `runtime`
//! (the pool's unit tests open a whole runtime, which holds pools: a
//! circle of `pool` and `runtime` that no build of the library has).
//!
//! The checks of library results that dropped tasks and fences leave are
//! kept by the runtime and concluded on its reclaim path (the ordered
//! free, `Runtime::synchronize`), but are the fence's (`fence/checks.rs`):
//! the runtime keeps them as trait objects (`DeferredCheck`,
//! runtime/deferred.rs) and calls up through them, by design, naming
//! nothing above it.
//!
//! A type's core lives in its own module. A module above it may add an
//! `impl` block for what it alone makes or needs, and nothing else:
//! `Runtime` gets `free_ordered`, `decide` and `wait_past_errors`
//! (handoff.rs), `begin_task` (context/), `event` (event.rs), `gate`
//! (gate.rs), `cu_function` (kernel/typed.rs), `load_ptx`/`compile_cuda`
//! (kernel/loader.rs) and its page-locked memory pool (staging.rs); `Buffer`
//! gets its one-off-task conveniences (context/) and its futures
//! (future.rs); `Fence` its futures (future.rs); `TaskContext` gets its
//! operations by kind, in `context/` (its futures, future.rs; `block_on`,
//! kernel/typed/gate.rs). Such a
//! method can be called from below the module that defines it, which an
//! import check cannot see. Everything else of a type is in its module.

mod buffer;
mod context;
mod driver;
mod error;
mod event;
mod fence;
mod future;
mod gate;
mod graph;
mod handoff;
mod kernel;
pub mod nccl;
#[doc(hidden)]
pub mod plumbing;
mod pool;
mod runtime;
mod staging;
pub mod trace;

pub use buffer::{Buffer, DeviceRepr, DeviceSlice, DeviceSliceMut, Split, View, ViewMut};
pub use context::{
    BatchCall, BatchFn, DevicePtr, DevicePtrMut, Foreign, ForeignStream, GraphLaunch, ReadArg,
    Reads, StreamSlot, TaskContext, TouchList, Unchecked, WriteArg, Writes,
};
/// The cudarc these types take and give (`CudaSlice`, `CudaStream`,
/// `CudaContext`), for matching versions.
pub use cudarc;
pub use driver::{BackendChoice, BackendKind, Priority, SyncMode, WaitAudit};
#[doc(hidden)]
pub use driver::{FaultInjector, FaultKind};
pub use error::{Error, Result, ResultExt};
pub use event::Event;
pub use fence::Fence;
pub use future::{FenceFuture, ToVecFuture};
pub use gate::Gate;
pub use gpu_epoch::{
    Access, Binding, CounterSnapshot, Generation, Reason, StreamEpoch, StreamId, TaskId, Uses,
};
pub use graph::{CaptureHandle, Graph, GraphCache, GraphStats};
/// The `half` crate, whose `f16` and `bf16` are kernel scalars and device
/// elements here (the same version, for a crate that names them).
pub use half;
pub use kernel::loader::LoadedModule;
pub use kernel::typed::{
    Arg, Args, Builtin, HostFn, In, Kernel, KernelParam, Out, Signature, Untracked, Value,
};
pub use kernel::{BuiltinEntry, BuiltinModule, CKind, LaunchConfig};
pub use runtime::{
    Extension, LedgerView, LiveCounts, Runtime, RuntimeOptions, StatusJudge, StatusWord,
};
pub use staging::{par_copy, Staging};

/// The low level, imported on purpose: a task's escape hatches
/// ([`RawTask`](raw::RawTask): its raw stream, raw device pointers, sharing
/// another task's stream), and the form kernel parameters and arguments
/// lower to ([`KernelArg`](raw::KernelArg), [`Param`](raw::Param), named by
/// the hidden items of the typed path's sealed traits; not needed to
/// declare or launch a kernel, see [`Kernel`] and [`Builtin`]).
pub mod raw {
    pub use crate::context::RawTask;
    pub use crate::kernel::{KernelArg, Param, ValueBytes};
}
