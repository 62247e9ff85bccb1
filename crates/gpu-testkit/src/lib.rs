//! Internal (`publish = false`): what the tests, the stress and soak
//! programs and the benchmarks of `gpu` share, as tokio's and rayon's
//! workspaces keep theirs.
//!
//! - [`dag`]: random task DAGs over buffers, events, captures, splits and
//!   collectives, with a sequential model that gives every buffer's expected
//!   value, run under `gpu::scope` (`gpu-scope/tests/stress.rs`, and the
//!   binaries below);
//! - [`common`]: the runtimes the tests start, the checks they end with,
//!   the flags and gates they coordinate with;
//! - [`b13`]: B13's graph of 10,000 small tasks (the benchmark and the
//!   capture tests run it);
//! - binaries `stress` (one large random DAG; `cargo xtask stress`) and
//!   `soak` (DAGs in a loop, watching live counts; `cargo xtask soak`).

// Internal (`publish = false`): the DAG operations' fields are named for
// what they hold and documented at their enums and variants, not one by one.
#![allow(missing_docs)]

pub mod b13;
pub mod common;
pub mod dag;
