//! Shared by the integration tests: a runtime per backend, and
//! [`backend_tests!`], which turns one test body into a host test (run in
//! CI) and a CUDA test (ignored, run on the GPU machine with `--ignored`).
//!
//! The CUDA variant starts the CUDA backend explicitly and panics when there
//! is no device: it never passes on a machine without a GPU.

#![allow(dead_code)] // each test file uses a part of this module

use gpu_sched::{BackendChoice, BackendKind, Runtime, RuntimeOptions};
use std::time::Duration;

/// Timeout of a gate the test opens itself. A test whose code under test
/// wrongly waits for the gated work cannot go on until this passes; it then
/// sees the gate's `timed_out` flag. Never reached when the code is right.
pub(crate) const OPENED_BY_TEST: Duration = Duration::from_secs(20);

/// Timeout of a *probe* gate, which the test never opens: a host call that
/// returns only after such a gate gave up (`timed_out()` is true once it
/// returned) waited for the gated stream. Short, since every passing
/// still-wait test sits through it once.
pub(crate) const PROBE: Duration = Duration::from_millis(200);

/// A runtime on `backend` with `opts` otherwise.
///
/// # Panics
///
/// If the backend cannot start: for CUDA, when there is no usable device.
pub(crate) fn runtime_with(backend: BackendKind, opts: RuntimeOptions) -> Runtime {
    let choice = match backend {
        BackendKind::Host => BackendChoice::Host,
        BackendKind::Cuda => {
            force_max_connections();
            BackendChoice::Cuda
        }
    };
    let rt = Runtime::new(RuntimeOptions {
        backend: choice,
        ..opts
    })
    .unwrap_or_else(|e| match backend {
        BackendKind::Cuda => panic!(
            "this test needs a CUDA GPU and could not start the CUDA backend: {e}; \
             run the `::cuda` tests only on a machine with a GPU"
        ),
        BackendKind::Host => panic!("the host backend did not start: {e}"),
    });
    assert_eq!(
        rt.backend(),
        backend,
        "asked for {backend}, got {}",
        rt.backend()
    );
    // Load the kernels now: a module loaded by a first launch inside a
    // stream capture is not what these tests are about.
    rt.cu_function(&gpu_kernels::FILL_F32)
        .unwrap_or_else(|e| panic!("loading the kernels failed: {e}"));
    rt
}

/// Gated tests use up to a dozen busy streams: with fewer hardware queues
/// than that (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default, or what the
/// machine's environment says) a kernel can wait behind another stream's
/// gate, hiding a missing wait or deadlocking. The tests set the most the
/// driver allows, whatever the environment says, before the first CUDA
/// runtime of the process starts.
pub(crate) fn force_max_connections() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", "32"));
}

/// A runtime on `backend` with default options.
pub(crate) fn runtime(backend: BackendKind) -> Runtime {
    runtime_with(backend, RuntimeOptions::default())
}

/// Another runtime on the same backend as `rt`, with `opts`.
pub(crate) fn same_backend(rt: &Runtime, opts: RuntimeOptions) -> Runtime {
    runtime_with(rt.backend(), opts)
}

/// Asserts that the host backend's race detector found nothing (always true
/// on CUDA, which has no detector).
#[track_caller]
pub(crate) fn assert_no_races(rt: &Runtime) {
    let races = rt.races();
    assert!(
        races.is_empty(),
        "{} race(s):\n{}",
        races.len(),
        races.join("\n")
    );
}

/// Runs `body` on a fresh runtime of `backend`, waits for everything it
/// left queued (stream-ordered frees included), then checks for races.
pub(crate) fn run_on(backend: BackendKind, body: fn(&Runtime)) {
    let rt = runtime(backend);
    body(&rt);
    rt.synchronize().unwrap();
    assert_no_races(&rt);
}

/// `backend_tests!(body);` makes a module `body` of two tests of
/// `fn body(rt: &Runtime)`: `body::host` on the host backend, and
/// `body::cuda`, ignored unless asked for (`cargo test -- --ignored`), on
/// the CUDA backend, which fails when there is no GPU.
macro_rules! backend_tests {
    ($($body:ident),+ $(,)?) => {$(
        mod $body {
            #[test]
            fn host() {
                $crate::common::run_on(gpu_sched::BackendKind::Host, super::$body);
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn cuda() {
                $crate::common::run_on(gpu_sched::BackendKind::Cuda, super::$body);
            }
        }
    )+};
}
pub(crate) use backend_tests;

/// The error of `r`, which must have failed.
#[track_caller]
pub(crate) fn error<T: std::fmt::Debug>(r: gpu_sched::Result<T>) -> gpu_sched::Error {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e,
    }
}

/// `e`'s message contains every one of `parts`.
#[track_caller]
pub(crate) fn says(e: &gpu_sched::Error, parts: &[&str]) {
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "the message {msg:?} does not say {p:?}");
    }
}

/// `M M^T + n I` (`n x n`, column-major, leading dimension `ld`, the
/// padding rows 7.0) for `M` of [`values`] from `seed`: symmetric positive
/// definite and well conditioned, for the solvers' tests.
pub(crate) fn spd(n: usize, ld: usize, seed: u64) -> Vec<f64> {
    let m = values(n * n, seed);
    let mut a = vec![7.0; ld * n];
    for j in 0..n {
        for i in 0..n {
            let s: f64 = (0..n).map(|p| m[i + p * n] * m[j + p * n]).sum();
            a[i + j * ld] = s + if i == j { n as f64 } else { 0.0 };
        }
    }
    a
}

/// Deterministic test values in `[-1, 1)` (xorshift from `seed`).
pub(crate) fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}
