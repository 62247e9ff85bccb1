//! # gpu: Rayon-style task parallelism for GPU work
//!
//! (A citation such as `DESIGN "Soundness"` in this crate's docs names a
//! section of the design note, `docs/DESIGN.md` in the repository; the
//! rule codes R1-R14 and X1-X5 refer to [`rules`], which states each rule
//! and names its code and tests.)
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
//! until it ends (a task that submits none holds no stream, DESIGN "Streams are a resource"). Spawning
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
//!
//! What a host run tests: the scheduling (the ledger's waits, the race
//! detector's view of every operation) and each operation's **Rust twin**,
//! not its CUDA C or the vendor library. A kernel's host twin, a library
//! wrapper's twin (`faer`, `matrixmultiply`, `rustfft`, loops, a ChaCha
//! generator whose numbers differ from cuRAND's) stands in for the device
//! code; a kernel's CUDA C is compiled only where NVRTC is installed, and a
//! library's calls run only on a GPU.
//!
//! ## Parallel iterators over chunks
//!
//! Rayon's `par_chunks` for device buffers (the README's third program,
//! kept the same by the same test; see [`iter`] for every adaptor and
//! terminal method): each chunk is a task with a stream of its own, and
//! the values a `map` returns are combined on the host in chunk order.
//!
//! ```
//! use gpu_kernels as k;
//!
//! fn main() -> gpu::Result<()> {
//!     let n = 1 << 20;
//!     let x = gpu::Buffer::from_host(&vec![1.0f32; n])?;
//!     let mut y = gpu::Buffer::<f32>::zeros(n)?;
//!     // y = 2 x + 1: a task, on a stream of its own, per chunk of 2^16 elements
//!     gpu::par_chunks(&x, 1 << 16)
//!         .zip(gpu::par_chunks_mut(&mut y, 1 << 16))
//!         .for_each(|t, (x, mut y)| {
//!             k::scale_into(t, &x, &mut y, 2.0)?;
//!             k::add_scalar(t, &mut y, 1.0)
//!         })?;
//!     // each chunk's sum: a device reduction (f64 accumulator), then the
//!     // chunks' sums added on the host in chunk order
//!     let total: f64 = gpu::par_chunks(&y, 1 << 16)
//!         .map(|t, chunk| k::reduce::sum_f64(t, &chunk))
//!         .sum()?;
//!     assert_eq!(total, 3.0 * n as f64);
//!     Ok(())
//! }
//! ```
//!
//! ## Bring your own kernel
//!
//! A kernel of your own, in CUDA C compiled at run time or in PTX, with a
//! host implementation for the host backend (the README's second program,
//! which the same test keeps the same; see [`kernel::Kernel`] and
//! [`kernel::LoadedModule`]):
//!
//! ```
//! use gpu::{kernel::{In, Kernel, LaunchConfig, Out}, Buffer, Result, TaskContext};
//!
//! const SRC: &str = r#"extern "C" __global__ void axpy(float* y, const float* x, float a, size_t n) {
//!     for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
//!         y[i] += a * x[i];
//! }"#;
//! type Axpy = Kernel<(Out<f32>, In<f32>, f32, u64)>; // the parameters, in order
//!
//! fn axpy(t: &TaskContext, k: &Axpy, a: f32, x: &Buffer<f32>, y: &mut Buffer<f32>) -> Result<()> {
//!     let n = y.len();
//!     assert_eq!(x.len(), n, "x and y of one length");
//!     // SAFETY: the kernel touches x[i] and y[i] for i < n only, and both hold n elements.
//!     unsafe { k.launch(t, LaunchConfig::for_elements(n, 256), (y, x, a, n)) }
//! }
//!
//! fn main() -> Result<()> {
//!     let k: Axpy = gpu::runtime()?.compile_cuda(SRC, &[])?.kernel("axpy")?
//!         .with_host(|y: &mut [f32], x: &[f32], a: f32, _n: u64| {
//!             y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x)
//!         });
//!     let (x, mut y) = (Buffer::from_host(&[1.0f32; 1000])?, Buffer::from_host(&[2.0f32; 1000])?);
//!     gpu::scope(|s| axpy(s, &k, 3.0, &x, &mut y))?;
//!     assert!(y.to_vec()?.iter().all(|&v| v == 5.0));
//!     Ok(())
//! }
//! ```
//!
//! ## MPI (the `mpi` cargo feature)
//!
//! `gpu::mpi` hands buffers to MPI through rsmpi (`send`, `recv`,
//! `sendrecv`, `all_reduce_sum`): a transfer waits for the buffer's
//! producers and its task's own work, not for the rest of the device, so a
//! rank's interior work runs on while its boundary is exchanged. Device
//! pointers go to MPI directly where it is CUDA-aware (checked at run
//! time), through pinned host memory otherwise. `examples/10-mpi.rs` runs
//! it under `mpirun`.
//!
//! ## Capturing a scope into a graph
//!
//! A scope captured once and replayed (the README's, kept the same; see
//! [`capture`]):
//!
//! ```
//! use gpu_kernels as k;
//!
//! fn main() -> gpu::Result<()> {
//!     let mut a = gpu::Buffer::<f32>::zeros(1 << 20)?;
//!     let mut b = gpu::Buffer::<f32>::zeros(1 << 20)?;
//!     let graph = gpu::capture(|s| {
//!         s.spawn(|t| k::fill(t, &mut a, 1.0)); // two branches of the graph
//!         s.spawn(|t| k::scale(t, &mut b, 2.0));
//!         Ok(())
//!     })?; // nothing ran yet
//!     for _ in 0..3 {
//!         // Every buffer the graph touches (`&` where it only reads): one
//!         // operation, ordered with the rest through those buffers.
//!         gpu::with_task(|t| t.launch_graph(&graph).write(&mut a).write(&mut b).submit())?;
//!     }
//!     assert!(a.to_vec()?.iter().all(|&x| x == 1.0));
//!     Ok(())
//! }
//! ```
//!
//! ## Repeated scopes become graphs
//!
//! A scope run again and again, with no capture by hand (see [`Graphed`]):
//!
//! ```
//! use gpu_kernels as k;
//!
//! fn main() -> gpu::Result<()> {
//!     let mut u = gpu::Buffer::<f32>::zeros(1 << 20)?;
//!     let mut v = gpu::Buffer::<f32>::zeros(1 << 20)?;
//!     let mut step = gpu::Graphed::new()?;
//!     for _ in 0..100 {
//!         step.scope(|s| {
//!             s.spawn(|t| k::scale(t, &mut u, 0.5)); // two branches of one graph
//!             s.spawn(|t| k::fill(t, &mut v, 1.0));
//!             Ok(())
//!         })?; // launched as one graph, built at the first run
//!     }
//!     assert_eq!(step.stats().builds, 1);
//!     assert!(v.to_vec()?.iter().all(|&x| x == 1.0));
//!     Ok(())
//! }
//! ```
//!
//! ## Guarantees
//!
//! Each entry point states what it guarantees in a `# Guarantees` section of
//! its own, as Rayon does on `join` and `scope`: [`scope`] (ordering at its
//! end, panics, errors, memory, soundness and the `unsafe` calls' contracts,
//! what is not guaranteed, and the misuse table: what each misuse gives),
//! [`Scope::spawn`] (what a spawned task is ordered after, streams, hardware
//! queues), [`join`] (Rayon's `join` on a worker; `a`'s panic first) and
//! [`capture`] (what a capture refuses). In short: safe code cannot race,
//! read freed memory or go out of bounds (DESIGN "Soundness"), and bad input or a driver
//! failure is a typed `Error`, never a panic, abort or hang.

pub mod iter;
mod join;
#[cfg(feature = "mpi")]
pub mod mpi;
mod pipeline;
mod registry;
pub mod rules;
mod scope;
mod thread_pool;

pub use gpu_sched::{
    BackendChoice, BackendKind, Buffer, Error, Priority, Result, ResultExt, Runtime,
    RuntimeOptions, Split, TaskContext, View, ViewMut, WaitAudit,
};
pub use iter::{par_chunks, par_chunks_mut};
pub use join::join;
pub use pipeline::par_map;
pub use registry::{current_num_threads, install};
pub use scope::{
    capture, capture_on, in_place_scope, scope, scope_on, Graphed, Scope, TaskBuilder,
};
pub use scope::{scope_async, scope_on_async};
pub use thread_pool::{ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};

pub use gpu_sched::nccl;
pub use gpu_sched::trace;

pub mod prelude {
    //! What nearly every program uses, in one import:
    //! `use gpu::prelude::*;`. The buffer types and their views, the scope
    //! and task handles, the crate's `Result` and `Error`, the traits that
    //! a function generic over buffers and views names
    //! ([`DeviceSlice`], [`DeviceSliceMut`], [`DeviceRepr`]), and the
    //! parallel iterators' entry points ([`par_chunks`],
    //! [`par_chunks_mut`]; their methods need no import).
    //!
    //! `Result` is this crate's, `Result<T, E = Error>`: it takes the place
    //! of the standard prelude's, and `Result<T, OtherError>` still names
    //! any other. The escape hatches ([`crate::raw::RawTask`]) and the
    //! library modules ([`crate::blas`], [`crate::fft`], ...) stay out:
    //! import them where they are used.
    //!
    //! ```
    //! use gpu::prelude::*;
    //! use gpu_kernels as k;
    //!
    //! /// `y = 2 x`, for buffers and views alike.
    //! fn twice(
    //!     t: &TaskContext,
    //!     x: &(impl DeviceSlice<f32> + ?Sized),
    //!     y: &mut (impl DeviceSliceMut<f32> + ?Sized),
    //! ) -> Result<()> {
    //!     k::scale_into(t, x, y, 2.0)
    //! }
    //!
    //! fn main() -> Result<()> {
    //!     let x = Buffer::from_host(&[1.0f32; 1000])?;
    //!     let mut y = Buffer::<f32>::zeros(1000)?;
    //!     par_chunks(&x, 256)
    //!         .zip(par_chunks_mut(&mut y, 256))
    //!         .for_each(|t, (x, mut y)| twice(t, &x, &mut y))?;
    //!     gpu::scope(|s: &Scope<'_, '_>| twice(s, &x, &mut y))?;
    //!     assert!(y.to_vec()?.iter().all(|&v| v == 2.0));
    //!     Ok(())
    //! }
    //! ```
    pub use crate::memory::{DeviceRepr, DeviceSlice, DeviceSliceMut};
    pub use crate::{
        par_chunks, par_chunks_mut, Buffer, Error, Result, ResultExt, Scope, TaskContext, View,
        ViewMut,
    };
}

pub mod kernel {
    //! Kernels: your own, declared once with a typed signature and loaded
    //! from PTX or CUDA C ([`Kernel`], [`LoadedModule`], from
    //! `Runtime::load_ptx` and `Runtime::compile_cuda`), and the built-in
    //! ones' form ([`Builtin`], the statics of `gpu-kernels`); launch
    //! configurations; the traits behind signatures and arguments. A kernel
    //! that is one expression per element needs no CUDA C and no twin of
    //! your own: `gpu_kernels::Elementwise` writes both from it.
    /// The half-precision types kernels take as scalars and buffer
    /// elements (`__half`, `__nv_bfloat16`): the `half` crate's.
    pub use gpu_sched::half::{bf16, f16};
    pub use gpu_sched::{
        Arg, Args, Builtin, BuiltinEntry, BuiltinModule, HostFn, In, Kernel, KernelParam,
        LaunchConfig, LoadedModule, Out, Signature, Untracked, Value,
    };
}

pub mod memory {
    //! Device memory beyond [`Buffer`](crate::Buffer) and its views: the
    //! traits every buffer and view implements, page-locked host memory
    //! ([`Staging`]) and its parallel copy, and the access kinds the ledger
    //! stamps.
    pub use gpu_sched::{
        par_copy, Access, CKind, DeviceRepr, DeviceSlice, DeviceSliceMut, Staging,
    };
}

pub mod sync {
    //! Ordering by hand, where the scope's own does not reach: events,
    //! fences, gates (a stream blocked until the host opens it), graphs
    //! and their launches, and how host waits spin or yield.
    pub use gpu_sched::{Event, Fence, Gate, Graph, GraphLaunch, GraphStats, SyncMode};
    /// Completion as futures (`fence.await`, `to_vec_async`).
    pub use gpu_sched::{FenceFuture, ToVecFuture};
}

pub mod diag {
    //! What the runtime decided and holds, for tests and tuning: the
    //! ledger's counters and reasons, a read-only view of it, stream and
    //! task ids, live resource counts, the scope capture a task joined.
    pub use gpu_sched::{
        Binding, CaptureHandle, CounterSnapshot, Generation, LedgerView, LiveCounts, Reason,
        StreamEpoch, StreamId, TaskId, Uses,
    };
}

pub mod foreign {
    //! Foreign work (DESIGN "Numerical libraries and foreign work"): a library call, or any work queued on a task's
    //! stream by hand, as a tracked operation over the buffers it declares
    //! ([`TaskContext::foreign`](crate::TaskContext::foreign)), and cudarc
    //! both ways: the runtime's context as cudarc's
    //! ([`Runtime::cuda_context`](crate::Runtime::cuda_context)), a
    //! `CudaSlice` adopted as a buffer
    //! ([`TaskContext::adopt_cudarc`](crate::TaskContext::adopt_cudarc)) and
    //! a buffer given back as one
    //! ([`TaskContext::into_cudarc`](crate::TaskContext::into_cudarc)), the
    //! task's stream as cudarc's inside a foreign operation
    //! ([`ForeignStream::cudarc`]). [`cudarc`] is the version these take.
    //!
    //! What a library built this way keeps (how `gpu-libs`, the crate of
    //! [`crate::blas`], [`crate::solver`], ..., is built): its per-stream
    //! handles as a runtime's [`Extension`]
    //! ([`Runtime::extension`](crate::Runtime::extension), keyed by
    //! [`ForeignStream::slot`]), and a result the device writes as a
    //! [`StatusWord`] checked at the task's next wait
    //! ([`TaskContext::check_status_later`](crate::TaskContext::check_status_later)).
    //! A call that has a batched form declares it
    //! ([`Foreign::batchable`], a [`BatchFn`] given a [`BatchCall`]), and
    //! a graphed scope merges sibling calls into one.
    pub use gpu_sched::cudarc;
    pub use gpu_sched::{
        BatchCall, BatchFn, DevicePtr, DevicePtrMut, Extension, Foreign, ForeignStream, ReadArg,
        Reads, StatusJudge, StatusWord, StreamSlot, WriteArg, Writes,
    };
}

#[cfg(feature = "blas")]
pub mod blas {
    //! Dense linear algebra on a task's stream: cuBLAS on the CUDA backend,
    //! `matrixmultiply` on the host backend, each operation tracked like a
    //! launch and its shapes checked before anything is queued
    //! ([`gpu_libs::blas`]; feature `blas`, on by default).
    pub use gpu_libs::blas::*;
}

#[cfg(feature = "solver")]
pub mod solver {
    //! Dense factorizations and solves on a task's stream: cuSOLVER on the
    //! CUDA backend, `faer` on the host backend; a factorization's `info`
    //! is checked at the task's next wait ([`gpu_libs::solver`]; feature
    //! `solver`, on by default).
    pub use gpu_libs::solver::*;
}

#[cfg(feature = "sparse")]
pub mod sparse {
    //! Sparse matrices (CSR) and their products on a task's stream:
    //! cuSPARSE on the CUDA backend, loops on the host backend
    //! ([`gpu_libs::sparse`]; feature `sparse`, on by default).
    pub use gpu_libs::sparse::*;
}

#[cfg(feature = "fft")]
pub mod fft {
    //! Fast Fourier transforms on a task's stream: cuFFT on the CUDA
    //! backend, `rustfft` on the host backend ([`gpu_libs::fft`]; feature
    //! `fft`, on by default).
    pub use gpu_libs::fft::*;
}

#[cfg(feature = "rand")]
pub mod rand {
    //! Random fills of buffers on a task's stream: cuRAND on the CUDA
    //! backend, a seeded ChaCha generator on the host backend
    //! ([`gpu_libs::random`]; feature `rand`, on by default).
    pub use gpu_libs::random::*;
}

pub mod raw {
    //! The escape hatches, imported on purpose: a task's raw stream, raw
    //! device pointers of its buffers, sharing another task's stream
    //! ([`RawTask`]: `use gpu::raw::RawTask;` puts its methods on every
    //! task and scope); the low-level form of kernel arguments.
    pub use gpu_sched::raw::{KernelArg, Param, RawTask};
}

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
    let r = f(&ctx);
    // Library results nobody waited for (a factorization's info).
    scope::end_top_level(&ctx, r)
}
