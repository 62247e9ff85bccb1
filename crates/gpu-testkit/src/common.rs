//! What the integration tests share: the runtimes they start, the checks
//! they end with, the flags and gates they coordinate with, and a kernel
//! declared wrong on purpose (`gpu-scope/tests` use it as `common::*`).

use gpu::sync::Gate;
use gpu::{BackendChoice, Buffer, Runtime, RuntimeOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a gate may stay closed, or a flag unset; never reached when
/// the code is right.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A runtime with the default options: the GPU on the GPU machine
/// (`GPU_BACKEND=cuda`), the host backend in CI.
pub fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).unwrap()
}

/// A runtime on the host backend, `opts` otherwise.
pub fn host_with(opts: RuntimeOptions) -> Runtime {
    Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        ..opts
    })
    .expect("the host backend starts")
}

/// A runtime on the host backend with the default options.
pub fn host() -> Runtime {
    host_with(RuntimeOptions::default())
}

/// `K` buffers of `n` zeros whose zeroing has finished: nothing of the
/// setup is left in flight, so every hand-off a test counts is its own.
pub fn zeroed<const K: usize>(rt: &Runtime, n: usize) -> [Buffer<f32>; K] {
    let setup = rt.begin_task().unwrap();
    let bufs = std::array::from_fn(|_| setup.zeros::<f32>(n).unwrap());
    setup.synchronize().unwrap();
    bufs
}

/// Waits until `flag` is set; fails the test after [`TIMEOUT`].
#[track_caller]
pub fn wait_for(flag: &AtomicBool, what: &str) {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        assert!(start.elapsed() < TIMEOUT, "{what} never happened");
        std::thread::yield_now();
    }
}

/// Opens `g` from another thread once `after` is set (`what`) and 100 ms
/// more have passed.
pub fn open_later<'s>(
    threads: &'s std::thread::Scope<'s, '_>,
    g: &'s Gate,
    after: &'s AtomicBool,
    what: &'s str,
) {
    threads.spawn(move || {
        wait_for(after, what);
        std::thread::sleep(Duration::from_millis(100));
        g.open();
    });
}

/// The host backend's race detector found nothing (always true on CUDA,
/// which has no detector).
#[track_caller]
pub fn assert_no_races(rt: &Runtime) {
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}

/// Every task's stream, event and allocation is back: only the runtime's
/// reclaim stream is held.
#[track_caller]
pub fn assert_nothing_held(rt: &Runtime) {
    let live = rt.live();
    assert_eq!(
        (live.streams_in_use, live.events_in_use, live.allocations),
        (1, 0, 0),
        "{live:?}"
    );
}

/// Device 0 of a two-device group on `backend` (the host backend simulates
/// two devices on one driver and one race detector).
pub fn two_devices(backend: BackendChoice) -> Runtime {
    let rt = Runtime::new(RuntimeOptions {
        backend,
        host_devices: 2,
        ..RuntimeOptions::default()
    })
    .expect("the runtime starts");
    assert!(
        rt.device_count() >= 2,
        "these tests need two devices; the {} backend has {}",
        rt.backend(),
        rt.device_count()
    );
    rt
}

/// `fill_f32` of the built-in PTX, declared with a signature that disagrees
/// with its entry: a wrong argument list that compiles (a launch's list is
/// checked against the signature by the compiler, the signature against the
/// PTX when the module loads). For the tests of that refusal.
static MISDECLARED: gpu::kernel::BuiltinModule = gpu::kernel::BuiltinModule::new(
    "misdeclared",
    gpu_kernels::KERNELS_PTX,
    &[gpu::kernel::BuiltinEntry::of::<(gpu::kernel::Out<f32>, f32)>("fill_f32")],
);

/// `fill_f32` without its length.
pub static FILL_SHORT: gpu::kernel::Builtin<(gpu::kernel::Out<f32>, f32)> =
    gpu::kernel::Builtin::<(gpu::kernel::Out<f32>, f32)>::new(&MISDECLARED, "fill_f32", |_, _| {});
