//! # gpu: Rayon-style task parallelism for GPU work
//!
//! (`§n` in this crate's docs refers to the design note, `docs/DESIGN.md` in
//! the repository; the rule codes R1-R14 and X1-X5 to [`rules`], which
//! states each rule and names its code and tests.)
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
//! which the same test keeps the same; see [`Kernel`] and
//! [`LoadedModule`]):
//!
//! ```
//! use gpu::{Buffer, In, Kernel, LaunchConfig, Out, Result, TaskContext};
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
//! ## Guarantees
//!
//! **Ordering.** A task's GPU work runs in program order on its own stream. A
//! spawned task is ordered after everything its spawner submitted *before* the
//! `spawn` (and everything that was ordered before that), and overlaps what the
//! spawner submits afterwards. When `scope`, `join`, a chunk iterator's
//! `for_each` (or `sum`, `collect`, ..) or `par_map` returns, the caller's later work is ordered after all GPU work of
//! the scope's tasks; this ordering is on the device (the scope returns once
//! every task's host code returned, not when the GPU is done). `&Buffer` is a
//! read and `&mut Buffer` a write: readers never wait for each other, a writer
//! is ordered after the last writer and every reader since; disjoint chunks
//! never wait for each other. `to_vec`, `copy_to_host`, `synchronize` and
//! `host_sync_ptr` return only once the data they cover is complete;
//! `host_sync_ptr` waits only for what orders that buffer plus the task's own
//! work.
//!
//! **Panics.** A task's panic is caught; the scope waits until every task
//! returned and all of the scope's GPU work finished, then re-raises the first
//! panic on the caller's thread (for `join`, `a`'s when both panic, as in
//! Rayon).
//!
//! **Errors.** Every fallible call returns `gpu::Result`; the library does not
//! panic on bad input or driver failure, and misuse is caught before anything is
//! submitted. A task's error reaches the caller like a panic: after all sibling
//! GPU work finished, the first error winning (a panic wins over an error).
//! After any error but `StickyDeviceError` nothing leaked and the runtime keeps
//! working; after a kernel fault the context is broken for good, every later
//! call returns `StickyDeviceError`, and nothing hangs.
//!
//! **Memory.** Dropping a buffer, view, event, task or scope never blocks;
//! memory is freed in stream order, after every queued operation that uses it.
//! Streams and events come from pools; `Runtime::live()` reports what exists and
//! what is in use.
//!
//! **Soundness.** Safe code, through the public API, cannot make two
//! unordered accesses to one buffer where one writes, read or free memory still
//! in use, read or write outside a buffer, or leave the runtime in a state that
//! silently drops work (design note §8; tests `sound01`-`sound17` in
//! `crates/gpu-sched/tests/soundness.rs`, on both backends, each shown to fail
//! with its fix taken out). What the runtime cannot check is `unsafe`, with its
//! contract written on the function:
//!
//! | `unsafe` call | what the caller promises |
//! |---|---|
//! | `Launch::submit` (a hand-built launch) | the kernel reads only buffers passed with `.read`/`.write` and writes only those passed with `.write`, within their lengths (scalar lengths tell the truth); pointers passed with `.raw_ptr` are valid for what the kernel does and ordered by the caller; the launch configuration is one the kernel is written for. The wrappers of `gpu-kernels` take their lengths from their buffers and are safe. |
//! | `TaskContext::block_on` | the kernel passed is a gate kernel (`gpu_kernels::gate` passes its own) |
//! | `copy_from_host_async`, `copy_to_host_async` | the host memory stays alive, and untouched by others, until the stream reached the copy |
//! | `DeviceRepr` (implementing it) | the type is plain old data |
//!
//! The rest is checked: `DeviceSlice` and `DeviceSliceMut` are sealed (no user
//! type can claim an address, length or stamps), and a read-only `View` is not
//! `DeviceSliceMut`; the runtime's ledger is read-only to users
//! (`Runtime::ledger()` answers questions and changes nothing); every pooled
//! event that the runtime records with a call the ledger does not see covers
//! nothing, and so does a new event; a split (`Buffer::split_chunks`) hands its
//! views' stamps back at `rejoin`, and a split dropped or leaked without one
//! leaves the buffer's uses unknown, so its next use (or its free) waits for
//! every stream; operations on host memory, and records (events, the fences of
//! `spawn` and `join`), are refused inside a capture before anything is
//! submitted; a capture ends when its body errs or panics; a copy from
//! page-locked memory (the runtime's own, another runtime's, or memory another
//! library pinned: the driver is asked) waits for the device; a view of bytes
//! off a word boundary is zeroed byte by byte; sizes are computed with checked
//! arithmetic. Raw handles (`raw_ptr`, `cu_stream`,
//! `cu_event`) are safe to take, and using them is the caller's `unsafe` FFI:
//! an event whose handle was taken gives no facts.
//!
//! **Hardware queues.** CUDA maps streams onto `CUDA_DEVICE_MAX_CONNECTIONS`
//! hardware queues (8 by default); with more busy streams than queues, one
//! stream's kernel can wait behind another's. The library sets it to 32 (the
//! most CUDA allows) when it starts CUDA, if the environment does not set it; a
//! value you set is kept (set it before the first CUDA call of the process).
//! The project's own gated CUDA tests set 32 whatever the environment says.
//! On the H200 with 32, 33 streams made one after another, the first blocked
//! by a gate kernel, the other 32 all ran their kernels: no two shared a queue
//! (`benches/results/investigations/2026-12-01-siblings-dip/`). What does order streams is
//! CUDA's implicit synchronization: a page-locked allocation issued between
//! two streams' commands makes the later wait for the earlier. `Gate::new`,
//! `Staging::new` and a first `par_map` of a size (its pinned buffers) make
//! one; make gates and staging buffers before the work they should run beside,
//! not while a gate kernel is pending (later work would wait behind that gate
//! until it opens or times out).
//!
//! **Not guaranteed.** The order in which sibling tasks run, on the host or the
//! device; which of several concurrent panics or errors is reported; ordering of
//! work submitted through a raw pointer or handle (`raw_ptr`, `cu_stream`,
//! `cu_event`) after the buffer moved to another task (order it yourself); that
//! the GPU has finished when `scope` returns; that a task has a stream to
//! itself when more tasks submit GPU work at once than the runtime tracks
//! streams (`max_streams`, at most 256: streams are then shared, their work
//! serialized and their facts dropped, never an error); race detection on CUDA
//! (the detector is the host backend's); bit-identical `sum` or scan results
//! across GPU runs (atomic adds).
//!
//! **Streams are a resource (§9).** A task takes a stream at its first GPU
//! operation and gives it back when it ends; a task that submits nothing (a
//! CPU-only Rayon program, any nesting) holds none, and waits on the device
//! for what it is ordered after only when it binds one. On a worker thread,
//! `join` is Rayon's own `join` (`a` here, `b` a task of its own, run here
//! unless stolen) and a scope's spawns are Rayon jobs; `join` re-raises `a`'s
//! panic when both panic, as Rayon does; `in_place_scope` takes a body that is
//! not `Send`; `ThreadPoolBuilder::num_threads(0)` is the default and
//! `stack_size` sets the workers' stacks (nesting is bounded by the stack, as
//! in Rayon); after a burst of live tasks, the streams beyond the pool's warm
//! size are destroyed once idle, so `Runtime::live()` falls back to the warm
//! size plus what is in use; a `ThreadPool` of its own
//! (`ThreadPoolBuilder::build`) runs the tasks of the `gpu` calls made inside
//! its `install`, `scope` or `join`.
//! Differences from Rayon that remain: no `join_context`, FIFO spawns,
//! broadcast or yield, no start and exit handlers, and tasks return
//! `gpu::Result`; the workers' default stack is 16 MiB (a level of `join`
//! takes more stack than Rayon's; past the stack, `Error::StackExhausted`);
//! and a scope opened outside every pool runs, at its end, the tasks no
//! worker has started on the calling thread (see [`scope`]).
//! ## Misuse and what it gives
//!
//! | misuse | error | message (what to do) |
//! |---|---|---|
//! | lengths that must agree differ (`axpy`, `copy`, `copy_from_host`, `par_map` output) | `Error::LengthMismatch` | "length mismatch: axpy's x has 4 elements, 8 expected; pass buffers (or views) of equal length" |
//! | a range outside its buffer or view (`slice`, `slice_mut`, `split_at_mut`) | `Error::OutOfRange` | "Buffer::slice: the range 5..12 is not within 0..10; ask for start <= end <= 10" |
//! | chunk size 0 (`par_chunks_mut(&mut b, 0)`, `PipelineOptions { chunk: 0, .. }`) | `Error::ZeroChunk` | "chunk size must be at least 1" |
//! | `zip` of chunk iterators with different numbers of chunks | `Error::LengthMismatch` | "length mismatch: zip's second side (its number of chunks) has 5 elements, 4 expected; ..." |
//! | a buffer, view, event, gate or graph of another runtime | `Error::WrongDevice` | "a kernel argument belongs to another device or runtime; copy it to this device first (`TaskContext::copy_peer` within a group of devices)" |
//! | wrong kernel argument count or types | `Error::BadKernelArgs` | "kernel `fill_f32`: takes 3 arguments; got 2", "argument 2 is PtrWrite; got a read buffer (&)" |
//! | a graph launch without a buffer the graph touches | `Error::BadKernelArgs` | "the graph writes 0x...; pass that buffer with .write(&mut buf)" |
//! | `host_sync_ptr` inside a capture | `Error::Capturing` | "taking a host-sync pointer is not allowed while the stream is being captured into a graph; end the capture first" |
//! | synchronizing a capturing stream | `Error::Capturing` | "synchronizing the stream is not allowed while ...; end the capture first" |
//! | any call after a kernel faulted | `Error::StickyDeviceError` | "the device context is broken by an earlier error (...); every call fails until the process restarts" |
//! | a record inside a capture (an event, or the fence of a `spawn` or `join`: another stream waiting on it would join the capture) | `Error::Capturing` | "recording an event is not allowed while the stream is being captured into a graph; end the capture first" |
//! | host memory in a capture (`copy_to_host`, `to_vec`, `copy_from_host`, staging copies, `memset_zero` of an odd byte count or offset) | `Error::Capturing` | "copying to host memory is not allowed while the stream is being captured into a graph; end the capture first" |
//! | in any capture (`TaskContext::capture`, `gpu::capture`): allocating (also a kernel's temporary, e.g. `inclusive_scan`), blocking on a gate, a nested capture | `Error::Capturing` | "allocating device memory in a capture (allocate before it) is not allowed while the stream is being captured into a graph; end the capture first" |
//! | in `gpu::capture`: `raw_ptr`, waiting outside it for a fence of its tasks | `Error::Capturing` | "taking a raw pointer in a scope capture (take it before the capture) is not allowed while ..." |
//! | `share_stream_of` a task of another runtime | `Error::WrongDevice` | "the task whose stream is shared belongs to another device or runtime; ..." |
//! | `par_map_pinned` with staging buffers of two runtimes | `Error::WrongDevice` | "par_map_pinned's output (a staging buffer of another runtime than the input's) belongs to another device or runtime; ..." |
//! | a task of a `gpu::capture`, kept and used after the capture ended | `Error::CaptureEnded` | "this task joined a scope capture that has ended, so it submits nothing more; begin a new task" |
//! | a size that does not fit in the address space (`alloc`, `zeros`, `Staging::new` of `usize::MAX / 4` elements) | `Error::TooLarge` | "N elements of 8 bytes overflow the address space while computing an allocation size; ask for fewer" |
//! | more memory than the device has | `Error::OutOfMemory` | "out of device memory: asked for N bytes while ...; free buffers no longer needed or ask for less" |
//!
//! Each is tested (`crates/gpu-scope/tests/bad_input.rs`,
//! `crates/gpu-sched/tests/errors.rs`, `crates/gpu-sched/tests/soundness.rs`,
//! `crates/gpu-sched/tests/ranges.rs`).

pub mod iter;
#[cfg(feature = "mpi")]
pub mod mpi;
mod pipeline;
mod pool;
pub mod rules;
mod scope;

pub use gpu_sched::nccl;
pub use gpu_sched::trace;
pub use gpu_sched::{
    par_copy, Access, Arg, Args, BackendChoice, BackendKind, Buffer, Builtin, BuiltinEntry,
    BuiltinModule, CounterSnapshot, DeviceRepr, DeviceSlice, DeviceSliceMut, Error, Event, Fence,
    Gate, Graph, HostFn, In, Kernel, KernelParam, LaunchConfig, LiveCounts, LoadedModule, Out,
    Reason, Result, Runtime, RuntimeOptions, Signature, Split, Staging, SyncMode, TaskContext,
    Untracked, View, ViewMut,
};
pub use iter::{par_chunks, par_chunks_mut, ParChunks, ParChunksMut};
pub use pipeline::{par_map, par_map_on, par_map_pinned, PipelineOptions};
pub use pool::{current_num_threads, install, ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};
pub use scope::{capture, capture_on, in_place_scope, join, scope, scope_on, Scope};

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
