//! # gpu-libs: the vendor libraries as tracked operations
//!
//! cuBLAS ([`blas`]), cuSOLVER ([`solver`]), cuSPARSE ([`sparse`]),
//! cuFFT ([`fft`]) and cuRAND ([`random`]) on a [`gpu_sched`] task's
//! stream, each call a tracked operation over the buffers it names, with a
//! host twin for the host backend. `gpu` re-exports them as `gpu::blas`,
//! `gpu::solver`, ... (a citation such as `DESIGN "Soundness"`
//! names a section of `docs/DESIGN.md` at the repository's root.)
//!
//! This crate uses gpu-sched's public API only, what any other library
//! (cuDNN, cuTENSOR, a user's own) can use the same way:
//! - [`TaskContext::foreign`](gpu_sched::TaskContext::foreign): each call
//!   is a foreign operation over its declared buffers, with a host twin;
//! - [`Runtime::extension`](gpu_sched::Runtime::extension): each library's
//!   handles (plans, generators) per stream slot
//!   ([`ForeignStream::slot`](gpu_sched::ForeignStream::slot)), destroyed
//!   in the runtime's teardown while its context is current;
//! - [`TaskContext::status_word`](gpu_sched::TaskContext::status_word) and
//!   [`TaskContext::check_status_later`](gpu_sched::TaskContext::check_status_later):
//!   cuSOLVER's `info`, read at the task's next wait.
//!
//! # Features
//!
//! One a library, all on by default: `cublas`, `cusolver`, `cusparse`,
//! `cufft`, `curand`. Each turns on its module and cudarc's bindings of
//! that library; `cusolver` and `cusparse` turn on `cublas` (they use its
//! element types and flags). No CUDA version of cudarc's is chosen here:
//! gpu-sched's features choose it (cargo unifies the two cudarcs).
//!
//! # Layout (for readers of the source)
//!
//! Each library is a folder with the same core files: `mod.rs` (its types
//! and operations, or their entry points beside it: `gemm.rs`, `ops.rs`,
//! `plan.rs`, ...), `cuda.rs` (its `Library` implementation and
//! its calls), `host.rs` (the host twins), and `sealed.rs` where it has
//! per-type tables. `shared/` holds what they share: the `Library` trait,
//! the one-time probe of a library, its status as the typed error, and the
//! per-stream-slot pools of its objects.

#[cfg(feature = "cublas")]
pub mod blas;
#[cfg(feature = "cufft")]
pub mod fft;
#[cfg(feature = "curand")]
pub mod random;
#[cfg(any(
    feature = "cublas",
    feature = "cusolver",
    feature = "cusparse",
    feature = "cufft",
    feature = "curand"
))]
mod shared;
#[cfg(feature = "cusolver")]
pub mod solver;
#[cfg(feature = "cusparse")]
pub mod sparse;
