//! # gpu: Rayon-style task parallelism for GPU work
//!
//! (`§n` in this crate's docs refers to the design note, `docs/DESIGN.md` in
//! the repository.)
//!
//! ## Getting started
//!
//! The first program (the README's, which a test keeps the same):
//!
//! ```
//! use gpu_kernels as k;
//!
//! fn main() -> gpu::Result<()> {
//!     let n = 1 << 20;
//!     let mut a = gpu::Buffer::from_host(&vec![1.0f32; n])?;
//!     let mut b = gpu::Buffer::<f32>::zeros(n)?;
//!     gpu::scope(|s| {
//!         k::fill(s, &mut b, 2.0)?; // the parent's work, on its stream
//!         s.spawn(|t| k::scale(t, &mut a, 3.0)); // a child: its own stream
//!         Ok(())
//!     })?; // later uses of a and b are ordered after both tasks
//!     gpu::scope(|s| k::axpy(s, 1.0, &a, &mut b))?; // b += a
//!     assert!(b.to_vec()?.iter().all(|&x| x == 5.0));
//!     println!("ran on the {} backend", gpu::backend()?);
//!     Ok(())
//! }
//! ```
//!
//! Tasks run on a pool of worker threads (Rayon's); a task that submits GPU
//! work owns a CUDA stream from a recyclable pool from its first operation
//! until it ends (a task that submits none holds no stream, §9). Spawning
//! records an event on the parent's stream that the child's stream waits
//! for, so a child is ordered after what its parent submitted *before the
//! spawn* only; the end of a scope orders the parent after every task
//! spawned in it. Buffers carry
//! stamps, and the epoch ledger (`gpu-epoch`) inserts every cross-stream
//! wait that correctness needs and none that it does not.
//!
//! The backend is CUDA when a device is present and the host backend
//! (streams as CPU threads) otherwise; `GPU_BACKEND=host` or `=cuda` forces
//! one, and [`backend`] says which runs.

mod pipeline;
mod pool;
mod scope;

pub use gpu_sched::trace;
pub use gpu_sched::{
    Access, Arg, Args, BackendChoice, BackendKind, Buffer, CounterSnapshot, DeviceRepr,
    DeviceSlice, Error, Event, Fence, Gate, Graph, HostFn, In, Kernel, KernelArg, KernelDef,
    KernelParam, KernelRef, LaunchConfig, LiveCounts, LoadedModule, Module, Out, Param, Reason,
    Result, Runtime, RuntimeOptions, Signature, Split, Staging, SyncMode, TaskContext, ViewMut,
};
pub use pipeline::{par_map, par_map_on, par_map_pinned, PipelineOptions};
pub use pool::{current_num_threads, install, ThreadPool, ThreadPoolBuilder};
pub use scope::{in_place_scope, join, par_chunks_mut, scope, scope_on, ParChunksMut, Scope};

/// The global runtime's backend.
///
/// # Errors
///
/// The runtime's start error (e.g. `GPU_BACKEND=cuda` without a device).
pub fn backend() -> Result<BackendKind> {
    Ok(Runtime::global()?.backend())
}

/// Waits on the host until all GPU work of the global runtime finished.
///
/// # Errors
///
/// Driver errors; the runtime's start error.
pub fn synchronize() -> Result<()> {
    Runtime::global()?.synchronize()
}

/// The global runtime.
///
/// # Errors
///
/// The runtime's start error.
pub fn runtime() -> Result<&'static Runtime> {
    Runtime::global()
}

/// Runs `f` as a one-off task on the global runtime (a stream from the
/// pool), outside any scope.
///
/// # Errors
///
/// What `f` returns; the runtime's errors.
pub fn with_task<R>(f: impl FnOnce(&TaskContext) -> Result<R>) -> Result<R> {
    let ctx = Runtime::global()?.begin_task()?;
    f(&ctx)
}
