//! cudarc both ways (DESIGN "Numerical libraries and foreign work"): the runtime's context is cudarc's, a buffer
//! given to cudarc is ordered after the ledger's last use of it, and an
//! adopted `CudaSlice` is ordered after cudarc's pending work on it, each
//! across two streams held back by a gate, with one wait each way. On the
//! host backend (no CUDA objects exist) every entry is a typed refusal.

mod common;

use common::{assert_no_races, backend_tests, runtime, OPENED_BY_TEST};
use cudarc::driver::{sys, CudaStream, DevicePtrMut};
use gpu_kernels as k;
use gpu_sched::raw::RawTask;
use gpu_sched::{BackendKind, Error, Runtime};
use std::sync::Arc;
use std::time::Duration;

const N: usize = 1 << 20;

/// Opens `g` after 50 ms on another thread, while `f` runs.
fn open_later<R>(g: &gpu_sched::Gate, f: impl FnOnce() -> R) -> R {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        f()
    })
}

/// A cudarc stream of `rt`'s context, made before any gate closes (cudarc's
/// first stream of a context synchronizes the device).
fn cudarc_stream(rt: &Runtime) -> Arc<CudaStream> {
    rt.cuda_context().unwrap().new_stream().unwrap()
}

/// The context is the device's primary context, made once per runtime;
/// the host backend has none and says so.
fn the_runtimes_context_is_cudarcs_primary_context(rt: &Runtime) {
    if rt.backend() == BackendKind::Host {
        let e = rt.cuda_context().unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e}");
        return;
    }
    let a = rt.cuda_context().unwrap();
    let b = rt.cuda_context().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.ordinal(), rt.ordinal());
    let mut primary: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a retain of the primary context of a device the runtime
    // holds open, released right after.
    unsafe {
        let mut dev = 0;
        sys::cuDeviceGet(&mut dev, rt.ordinal() as i32)
            .result()
            .unwrap();
        sys::cuDevicePrimaryCtxRetain(&mut primary, dev)
            .result()
            .unwrap();
        sys::cuDevicePrimaryCtxRelease_v2(dev).result().unwrap();
    }
    assert_eq!(a.cu_ctx(), primary);
}
backend_tests!(the_runtimes_context_is_cudarcs_primary_context);

/// `into_cudarc` while the buffer's writer (another task's stream) is held
/// by a gate: cudarc's copy of the slice sees the written values, the gate
/// opened in time (nothing waited on the host), and the ledger waited once.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_buffer_given_to_cudarc_is_ordered_after_its_last_use() {
    let rt = runtime(BackendKind::Cuda);
    let s = cudarc_stream(&rt);
    let w = rt.begin_task().unwrap();
    let mut x = w.zeros::<f32>(N).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut x, 3.0).unwrap();
    let r = rt.begin_task().unwrap();
    let live = rt.live().allocations;
    let before = rt.counters();
    let got = open_later(&g, || {
        let slice = r.into_cudarc(x, &s).unwrap();
        let mut out = s.alloc_zeros::<f32>(N).unwrap();
        s.memcpy_dtod(&slice, &mut out).unwrap();
        s.clone_dtoh(&out).unwrap()
    });
    assert!(got.iter().all(|&v| v == 3.0), "got[0] = {}", got[0]);
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 1, "one wait for the writer: {d:?}");
    assert_eq!(rt.live().allocations, live - 1, "the buffer is cudarc's");
    rt.synchronize().unwrap();
    assert_no_races(&rt);
}

/// `adopt_cudarc` of a slice whose cudarc stream is held (behind a gate on
/// a task's stream) with its fill still queued: the task's kernel reads the
/// filled values, and the ledger itself adds no wait (the one event wait
/// of the adoption covers it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_adopted_slice_is_ordered_after_cudarcs_pending_work() {
    let rt = runtime(BackendKind::Cuda);
    let s = cudarc_stream(&rt);
    let ctx = rt.cuda_context().unwrap();
    let w = rt.begin_task().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    // SAFETY: `w`'s live stream of this context, borrowed for one join.
    let held = unsafe { ctx.wrap_borrowed_stream(w.cu_stream() as usize as sys::CUstream) };
    s.join(&held).unwrap();
    let mut slice = s.alloc_zeros::<f32>(N).unwrap();
    {
        let (p, _record) = slice.device_ptr_mut(&s);
        // SAFETY: `p` is the slice's live allocation of `N` 4-byte words,
        // written on its stream `s` (cudarc records the write on drop).
        unsafe { sys::cuMemsetD32Async(p, 5.0f32.to_bits(), N, s.cu_stream()) }
            .result()
            .unwrap();
    }
    let r = rt.begin_task().unwrap();
    let live = rt.live().allocations;
    let before = rt.counters();
    let (got, b) = open_later(&g, || {
        let b = r.adopt_cudarc(slice).unwrap();
        let mut z = r.zeros::<f32>(N).unwrap();
        k::axpy(&r, 1.0, &b, &mut z).unwrap();
        (r.to_vec(&z).unwrap(), b)
    });
    assert!(got.iter().all(|&v| v == 5.0), "got[0] = {}", got[0]);
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "the ledger waited again: {d:?}");
    assert_eq!(
        rt.live().allocations,
        live + 1,
        "the slice is the runtime's"
    );
    drop(b);
    assert_eq!(rt.live().allocations, live, "the runtime freed it");
    drop(w);
    assert_no_races(&rt);
}

/// Misuse is refused before anything is queued: a buffer of another
/// runtime, a slice given back and adopted again round-trips its values.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_round_trip_keeps_the_values_and_refuses_another_runtimes_buffer() {
    let rt = runtime(BackendKind::Cuda);
    let other = runtime(BackendKind::Cuda);
    let s = cudarc_stream(&rt);
    let t = rt.begin_task().unwrap();
    let o = other.begin_task().unwrap();
    let foreign = o.from_host(&[1.0f32; 8]).unwrap();
    let e = t.into_cudarc(foreign, &s).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
    let x = t.from_host(&[7.0f32; 8]).unwrap();
    let slice = t.into_cudarc(x, &s).unwrap();
    let back = t.adopt_cudarc(slice).unwrap();
    assert_eq!(t.to_vec(&back).unwrap(), vec![7.0f32; 8]);
    assert_no_races(&rt);
}
