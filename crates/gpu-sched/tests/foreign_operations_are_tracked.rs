//! Foreign operations (DESIGN "Numerical libraries and foreign work", `TaskContext::foreign`): a library call or any
//! work queued by hand, over declared buffers, is ordered as a kernel
//! launch is (a hand-off before, stamps after), on both backends: on CUDA
//! the device closure is a raw `cuMemcpyDtoDAsync` on the stream it is
//! given; on the host backend the host twin is queued and runs in stream
//! order (or, `host_sync`, runs while the caller waits). A queued twin's
//! failure is reported at the task's next wait; a waited one's by `run`.
//! Misuse gives typed errors and queues nothing.

mod common;

use common::{assert_no_races, backend_tests, error, same_backend, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_sched::{
    BackendKind, DevicePtr, DevicePtrMut, Error, ForeignStream, Result, Runtime, RuntimeOptions,
    TaskContext,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

const N: usize = 4096;

/// Queues `y = x` on `s` with a raw `cuMemcpyDtoDAsync`.
///
/// # Safety
///
/// `x` and `y` are a foreign operation's pointers, of equal lengths, and
/// `s` its stream.
unsafe fn queue_copy(s: &ForeignStream<'_>, x: DevicePtr<f32>, y: DevicePtrMut<f32>) -> Result<()> {
    assert_eq!(x.len(), y.len());
    let bytes = x.len() * std::mem::size_of::<f32>();
    // SAFETY: both addresses are live device allocations of `bytes` bytes
    // (the declared buffers); `s` is the task's live stream.
    unsafe {
        cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
            y.raw(),
            x.raw(),
            bytes,
            s.raw() as usize as cudarc::driver::sys::CUstream,
        )
    }
    .result()?;
    Ok(())
}

/// `y = x` through the foreign path: a raw device-to-device copy on the
/// stream the operation is given, or the host twin.
fn foreign_copy(
    t: &TaskContext,
    x: &gpu_sched::Buffer<f32>,
    y: &mut gpu_sched::Buffer<f32>,
) -> Result<()> {
    let op =
        t.foreign("cuMemcpyDtoDAsync", (x,), (y,))
            .host(|(x,): (&[f32],), (y,): (&mut [f32],)| {
                y.copy_from_slice(x);
                Ok(())
            });
    // SAFETY: the closure queues one copy of `x.len()` elements (the two
    // buffers' common length, checked by the caller) from `x` into `y`,
    // on the stream it is given, and returns once it is queued.
    unsafe { op.run(|s, (x,), (y,)| queue_copy(s, x, y)) }
}

/// The copy reads `x` while its writer (another task) is still behind a
/// gate: the hand-off orders it after the writer, so `y` gets the written
/// values, and the gate opened in time (nothing waited for it to time out).
fn a_foreign_read_waits_for_the_writer(rt: &Runtime) {
    let w = rt.begin_task().unwrap();
    let mut x = w.zeros::<f32>(N).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut x, 3.0).unwrap();
    let r = rt.begin_task().unwrap();
    let mut y = r.zeros::<f32>(N).unwrap();
    let before = rt.counters();
    std::thread::scope(|sc| {
        // The copy is queued behind the writer (on the host backend the
        // twin too: `run` does not wait for it); the gate opens meanwhile.
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        foreign_copy(&r, &x, &mut y).unwrap();
    });
    let got = r.to_vec(&y).unwrap();
    assert!(got.iter().all(|&v| v == 3.0), "y[0] = {}", got[0]);
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert!(d.device_waits >= 1, "no wait for the writer: {d:?}");
    assert_no_races(rt);
}
backend_tests!(a_foreign_read_waits_for_the_writer);

/// A later reader of what the operation wrote is ordered after it: a
/// kernel on another task's stream reads `y` after the copy.
fn a_later_reader_waits_for_the_foreign_write(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&vec![2.0f32; N]).unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    foreign_copy(&t, &x, &mut y).unwrap();
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(N).unwrap();
    k::axpy(&u, 1.0, &y, &mut z).unwrap();
    assert!(u.to_vec(&z).unwrap().iter().all(|&v| v == 2.0));
    assert_no_races(rt);
}
backend_tests!(a_later_reader_waits_for_the_foreign_write);

/// Without a host twin, the host backend refuses the operation (and the
/// CUDA backend runs the device closure).
fn without_a_twin_the_host_backend_refuses(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    let mut ran = false;
    // SAFETY: the closure queues nothing.
    let r = unsafe {
        t.foreign("nothing", (), (&mut y,)).run(|_, (), (_y,)| {
            ran = true;
            Ok(())
        })
    };
    match rt.backend() {
        BackendKind::Host => {
            assert!(
                matches!(r, Err(Error::NoHostImplementation { ref kernel }) if kernel == "nothing"),
                "{r:?}"
            );
            assert!(!ran);
        }
        BackendKind::Cuda => {
            r.unwrap();
            assert!(ran);
        }
    }
}
backend_tests!(without_a_twin_the_host_backend_refuses);

/// In a capture, an operation not declared capture-safe is refused, as is
/// a host twin on the host backend; a capture-safe one is captured on CUDA
/// and runs at each launch of the graph.
fn captures_take_only_capture_safe_operations(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&vec![5.0f32; N]).unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    let e = error(t.capture(|c| foreign_copy(c, &x, &mut y)));
    assert!(matches!(e, Error::Capturing { .. }), "{e}");
    let safe = t.capture(|c| {
        let op = c
            .foreign("cuMemcpyDtoDAsync", (&x,), (&mut y,))
            .host(|(x,): (&[f32],), (y,): (&mut [f32],)| {
                y.copy_from_slice(x);
                Ok(())
            })
            .capture_safe();
        // SAFETY: as in `foreign_copy`; an async copy between device
        // buffers is recorded by stream capture.
        unsafe { op.run(|s, (x,), (y,)| queue_copy(s, x, y)) }
    });
    match rt.backend() {
        BackendKind::Host => {
            let e = error(safe);
            assert!(matches!(e, Error::Capturing { .. }), "{e}");
            assert!(t.to_vec(&y).unwrap().iter().all(|&v| v == 0.0));
        }
        BackendKind::Cuda => {
            let graph = safe.unwrap();
            assert!(t.to_vec(&y).unwrap().iter().all(|&v| v == 0.0));
            t.launch_graph(&graph)
                .read(&x)
                .write(&mut y)
                .submit()
                .unwrap();
            assert!(t.to_vec(&y).unwrap().iter().all(|&v| v == 5.0));
        }
    }
}
backend_tests!(captures_take_only_capture_safe_operations);

/// A buffer of another runtime is refused before anything is queued.
fn a_buffer_of_another_runtime_is_refused(rt: &Runtime) {
    let other = same_backend(rt, RuntimeOptions::default());
    let t = rt.begin_task().unwrap();
    let o = other.begin_task().unwrap();
    let x = o.zeros::<f32>(N).unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    let e = error(foreign_copy(&t, &x, &mut y));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
}
backend_tests!(a_buffer_of_another_runtime_is_refused);

/// A twin run while the caller waits (`host_sync`): its error is the
/// operation's, and its panic reaches the caller after the stream drained;
/// the runtime goes on working.
#[test]
fn a_waited_twins_error_and_panic_reach_the_caller() {
    let rt = common::runtime(BackendKind::Host);
    let t = rt.begin_task().unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    // SAFETY: the device closure queues nothing (and the host backend
    // never calls it).
    let r: Result<()> = unsafe {
        t.foreign("failing", (), (&mut y,))
            .host_sync(|(), (_y,): (&mut [f32],)| {
                Err(Error::external(
                    "a library",
                    std::io::Error::other("it said no"),
                ))
            })
            .run(|_, (), _| Ok(()))
    };
    let e = error(r);
    assert!(
        matches!(&e, Error::External { during, .. } if *during == "a library"),
        "{e}"
    );
    assert!(e.to_string().contains("it said no"), "{e}");
    let caught = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as above.
        unsafe {
            t.foreign("panicking", (), (&mut y,))
                .host_sync(|(), (_y,): (&mut [f32],)| -> Result<()> { panic!("twin panicked") })
                .run(|_, (), _| Ok(()))
        }
    }));
    let payload = caught.expect_err("the panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"twin panicked"));
    k::fill(&t, &mut y, 1.0).unwrap();
    assert!(t.to_vec(&y).unwrap().iter().all(|&v| v == 1.0));
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}

/// A `host_sync` twin may borrow the caller's data and return a value:
/// `run` gives it back once the twin ran.
#[test]
fn a_waited_twin_borrows_and_returns_a_value() {
    let rt = common::runtime(BackendKind::Host);
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut seen = Vec::new();
    // SAFETY: the device closure queues nothing.
    let sum = unsafe {
        t.foreign("sum", (&x,), ())
            .host_sync(|(x,): (&[f32],), ()| {
                seen.extend_from_slice(x);
                Ok(x.iter().sum::<f32>())
            })
            .run(|_, _, ()| Ok(0.0))
    }
    .unwrap();
    assert_eq!(sum, 6.0);
    assert_eq!(seen, [1.0, 2.0, 3.0]);
}

/// A queued twin (`host`) that fails: `run` returned once it was queued,
/// so the failure is the device's, as a faulting kernel's: the task's next
/// wait reports it (a sticky error naming the operation and the twin's
/// error), and so does every later call on the runtime.
#[test]
fn a_queued_twins_error_reaches_the_next_wait() {
    let rt = common::runtime(BackendKind::Host);
    let t = rt.begin_task().unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    // SAFETY: the device closure queues nothing (and the host backend
    // never calls it).
    unsafe {
        t.foreign("failing", (), (&mut y,))
            .host(|(), (_y,): (&mut [f32],)| {
                Err(Error::external(
                    "a library",
                    std::io::Error::other("it said no"),
                ))
            })
            .run(|_, (), _| Ok(()))
    }
    .expect("queued: the twin has not failed yet");
    let e = error(t.synchronize());
    assert!(e.is_sticky(), "{e}");
    common::says(&e, &["failing", "it said no"]);
    let e = error(t.to_vec(&y));
    assert!(e.is_sticky(), "{e}");
}

/// A queued twin that panics: the panic stays on the stream (the caller's
/// `run` returned), and the task's next wait reports it as a fault naming
/// the operation and the panic's message.
#[test]
fn a_queued_twins_panic_reaches_the_next_wait() {
    let rt = common::runtime(BackendKind::Host);
    let t = rt.begin_task().unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    // SAFETY: as above.
    unsafe {
        t.foreign("panicking", (), (&mut y,))
            .host(|(), (_y,): (&mut [f32],)| -> Result<()> { panic!("twin panicked") })
            .run(|_, (), _| Ok(()))
    }
    .expect("queued: the twin has not run yet");
    let e = error(t.synchronize());
    assert!(e.is_sticky(), "{e}");
    common::says(&e, &["panicking", "twin panicked"]);
}

/// `?` on a cudarc driver error gives `Error::Driver`, named without
/// loading the driver (this runs where there is none).
#[test]
fn question_mark_on_a_cudarc_error_is_a_driver_error() {
    fn f() -> Result<()> {
        Err(cudarc::driver::DriverError(
            cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE,
        ))?;
        Ok(())
    }
    let e = f().unwrap_err();
    assert!(matches!(e, Error::Driver { code: 1, .. }), "{e}");
    assert!(e.to_string().contains("CUDA_ERROR_INVALID_VALUE"), "{e}");
}

/// Inside the device closure the stream is cudarc's too: the same
/// `CUstream`, of the runtime's context, and work queued through it is
/// ordered by the declared buffers (a later reader on another task sees
/// it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_closures_stream_is_a_borrowed_cudarc_stream() {
    let rt = common::runtime(BackendKind::Cuda);
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&vec![4.0f32; N]).unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    let op = t.foreign("cudarc memcpy_dtod_async", (&x,), (&mut y,));
    // SAFETY: one copy of `N` elements from `x` into `y` (both `N` long),
    // queued on the task's stream through cudarc's wrapper of it.
    unsafe {
        op.run(|s, (x,), (y,)| {
            let cs = s.cudarc()?;
            assert_eq!(cs.cu_stream() as usize as u64, s.raw());
            assert!(std::sync::Arc::ptr_eq(cs.context(), &rt.cuda_context()?));
            cudarc::driver::result::memcpy_dtod_async(y.raw(), x.raw(), N * 4, cs.cu_stream())?;
            Ok(())
        })
    }
    .unwrap();
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(N).unwrap();
    k::axpy(&u, 1.0, &y, &mut z).unwrap();
    assert!(u.to_vec(&z).unwrap().iter().all(|&v| v == 4.0));
    assert_no_races(&rt);
}
