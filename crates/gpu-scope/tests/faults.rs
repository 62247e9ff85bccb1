//! Faults on the host backend: allocation failure, a launch with a bad
//! argument list, a kernel that faults on the device (a sticky error), a
//! task that fails or panics while its siblings' GPU work is still queued,
//! and buffers, views, events and scopes dropped while their work is in
//! flight.
//!
//! After each (but the sticky error) the runtime's live resources return to
//! where they were, the race detector found nothing (no memory was freed or
//! reused under queued work), and the runtime works again. Every test has
//! its own runtime, so the counts are its own; streams and events are
//! pooled, so what is compared is what is *in use* (and the memory) at a
//! quiet moment, after a `synchronize`.

mod common;

use common::{assert_no_races, host, host_with, open_later, wait_for, zeroed, FILL_SHORT, TIMEOUT};
use gpu::diag::LiveCounts;
use gpu::kernel::{LaunchConfig, Out};
use gpu::{Buffer, Error, Runtime, RuntimeOptions};
use gpu_kernels as k;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long any one test may take before it counts as hung.
const HANG: Duration = Duration::from_secs(30);

/// The live counts at a quiet moment.
fn quiet(rt: &Runtime) -> LiveCounts {
    rt.synchronize().expect("synchronize");
    rt.live()
}

/// What must return to its value: resources in use and memory.
fn in_use(c: &LiveCounts) -> [(&'static str, usize); 5] {
    [
        ("streams in use", c.streams_in_use),
        ("events in use", c.events_in_use),
        ("allocations", c.allocations),
        ("device bytes", c.device_bytes),
        ("pinned bytes", c.pinned_bytes),
    ]
}

#[track_caller]
fn assert_back(rt: &Runtime, before: &LiveCounts) {
    let now = quiet(rt);
    assert_eq!(
        in_use(&now),
        in_use(before),
        "leaked: {before:?} -> {now:?}"
    );
    assert_no_races(rt);
}

/// The runtime still works: a small scope with a child computes right.
#[track_caller]
fn assert_usable(rt: &Runtime) {
    let mut a = rt.begin_task().unwrap().from_host(&[1.0f32; 64]).unwrap();
    gpu::scope_on(rt, |s| {
        let a = &mut a;
        k::scale(s, a, 2.0)?;
        s.spawn(move |t| k::add_scalar(t, a, 3.0));
        Ok(())
    })
    .expect("the runtime works again");
    assert_eq!(a.to_vec().unwrap(), vec![5.0; 64]);
}

/// Runs `f` on another thread and fails the test if it does not return in
/// [`HANG`].
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what} hung for {HANG:?}"),
    }
}

#[test]
fn allocation_failure_is_out_of_memory_and_leaks_nothing() {
    const LIMIT: usize = 1 << 20;
    let rt = host_with(RuntimeOptions {
        host_memory_limit: LIMIT,
        ..RuntimeOptions::default()
    });
    let before = quiet(&rt);

    // Too much at once, in a scope body and in a child.
    let e = gpu::scope_on(&rt, |s| s.alloc::<f32>(LIMIT).map(drop)).unwrap_err();
    assert!(
        matches!(e, Error::OutOfMemory { requested, .. } if requested == 4 * LIMIT),
        "{e:?}"
    );
    assert!(e.to_string().contains("out of device memory"), "{e}");
    let e = gpu::scope_on(&rt, |s| {
        let kept = s.zeros::<f32>(1024)?;
        s.spawn(|t| t.alloc::<u8>(2 * LIMIT).map(drop));
        s.spawn(|t| k::spin(t, Duration::from_millis(1)));
        drop(kept);
        Ok(())
    })
    .unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");
    assert_back(&rt, &before);

    // Fill the memory, fail, free, and the memory is there again once the
    // stream-ordered frees ran.
    let t = rt.begin_task().unwrap();
    let quarter = LIMIT / 4 / 4;
    let mut held: Vec<Buffer<f32>> = (0..4).map(|_| t.zeros(quarter).unwrap()).collect();
    let e = t.alloc::<f32>(quarter).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");
    held.clear();
    rt.synchronize().unwrap();
    let again = t.zeros::<f32>(quarter).expect("freed memory is reusable");
    drop(again);
    drop(t);
    assert_back(&rt, &before);
    assert_usable(&rt);
}

/// `fill_f32` declared with signatures that disagree with its entry (and
/// [`common::FILL_SHORT`]): wrong argument lists that compile.
static MISDECLARED_F64: gpu::kernel::BuiltinModule = gpu::kernel::BuiltinModule::new(
    "misdeclared (f64)",
    k::KERNELS_PTX,
    &[gpu::kernel::BuiltinEntry::of::<(Out<f32>, f64, u64)>(
        "fill_f32",
    )],
);
/// `fill_f32` with a `double` for its `float`.
static FILL_F64_SCALAR: gpu::kernel::Builtin<(Out<f32>, f64, u64)> =
    gpu::kernel::Builtin::<(Out<f32>, f64, u64)>::new(&MISDECLARED_F64, "fill_f32", |_, _, _| {});

#[test]
fn a_launch_with_bad_arguments_is_a_typed_error_and_submits_nothing() {
    let rt = host();
    let before = quiet(&rt);
    let mut a = rt.begin_task().unwrap().from_host(&[1.0f32; 64]).unwrap();
    let cfg = LaunchConfig::for_elements(64, k::BLOCK);
    let counters = rt.counters();
    let e = gpu::scope_on(&rt, |s| {
        let a = &mut a;
        s.spawn(move |t| {
            // Missing the length.
            // SAFETY: the host implementation touches nothing, and the
            // launch is refused before anything is submitted.
            unsafe { FILL_SHORT.launch(t, cfg, (a, 7.0f32)) }
        });
        Ok(())
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BadKernelArgs {
                kernel: "fill_f32",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("takes 3 parameters; the signature declares 2"),
        "{e}"
    );
    let e = gpu::scope_on(&rt, |s| {
        // A scalar of the wrong type.
        // SAFETY: as above.
        unsafe { FILL_F64_SCALAR.launch(s, cfg, (&mut a, 7.0f64, 64usize)) }
    })
    .unwrap_err();
    assert!(matches!(e, Error::BadKernelArgs { .. }), "{e:?}");
    assert!(
        e.to_string().contains("parameter 1 is a 4-byte float"),
        "{e}"
    );
    // Nothing ran, and no hand-off was made for the refused launches.
    let d = rt.counters().since(&counters);
    assert_eq!((d.device_waits, d.host_syncs), (0, 0), "{d:?}");
    assert_eq!(a.to_vec().unwrap(), vec![1.0; 64]);
    drop(a);
    assert_back(&rt, &before);
    assert_usable(&rt);
}

/// Host-only kernels; the PTX is checked on every backend.
static FAULTY: gpu::kernel::BuiltinModule = gpu::kernel::BuiltinModule::new(
    "faulty",
    ".version 7.0\n.target sm_70\n.visible .entry faulting_kernel(.param .u64 a)\n{\n\tret;\n}\n",
    &[gpu::kernel::BuiltinEntry::of::<(u64,)>("faulting_kernel")],
);
/// A kernel that faults: on the host backend a panic in a kernel breaks
/// the context for good, as an illegal address does on a GPU.
static FAULT: gpu::kernel::Builtin<(u64,)> =
    gpu::kernel::Builtin::<(u64,)>::new(&FAULTY, "faulting_kernel", |_| {
        panic!("faulting kernel: illegal address (on purpose)")
    });

#[test]
fn a_kernel_fault_is_sticky_and_nothing_hangs() {
    within("the sticky-error test", || {
        let rt = host();
        let g = rt.gate().unwrap();
        let [mut y, mut z] = zeroed(&rt, 256);
        let faulted = AtomicBool::new(false);
        let r = std::thread::scope(|threads| {
            threads.spawn(|| {
                wait_for(&faulted, "the fault");
                std::thread::sleep(Duration::from_millis(50));
                g.open();
            });
            gpu::scope_on(&rt, |s| {
                let (y, z, g, faulted) = (&mut y, &mut z, &g, &faulted);
                // A sibling with work queued behind a gate when the fault
                // happens.
                s.spawn(move |t| {
                    k::gate(t, g, TIMEOUT)?;
                    k::add_scalar(t, y, 1.0)
                });
                s.spawn(move |t| {
                    // SAFETY: the host kernel touches no memory (it fails on purpose).
                    unsafe { FAULT.launch(t, LaunchConfig::linear(1, 1), (0u64,)) }?;
                    let r = t.synchronize();
                    faulted.store(true, SeqCst);
                    r?;
                    k::add_scalar(t, z, 1.0)
                });
                Ok(())
            })
        });
        let e = r.expect_err("the fault reaches the caller");
        assert!(e.is_sticky(), "{e:?}");
        assert!(
            e.to_string().contains("faulting kernel") && e.to_string().contains("restarts"),
            "{e}"
        );
        assert!(!g.timed_out(), "the scope waited on the gate's timeout");

        // Every later call fails the same way, and none hangs.
        let sticky = |r: gpu::Result<()>, what: &str| {
            let e = r.expect_err(what);
            assert!(
                matches!(e, Error::StickyDeviceError { .. }),
                "{what}: {e:?}"
            );
        };
        sticky(gpu::scope_on(&rt, |_| Ok(())), "a new scope");
        sticky(y.to_vec().map(drop), "to_vec");
        sticky(rt.begin_task().map(drop), "begin_task");
        sticky(
            gpu::par_chunks_mut(&mut z, 16).for_each(|t, c| k::fill(t, c, 1.0)),
            "par_chunks_mut",
        );
        sticky(rt.synchronize(), "synchronize");
        sticky(
            rt.event().and_then(|e| e.synchronize()),
            "an event synchronize",
        );
        // Dropping everything returns, and so does dropping the runtime.
        drop((y, z, g));
        drop(rt);
    });
}

/// A task that fails (an error or a panic) while a sibling's work is
/// queued behind a gate, and while its own work and a temporary buffer of
/// its own are in flight.
fn fail_with_work_in_flight(rt: &Runtime, panic: bool) -> Result<gpu::Result<()>, String> {
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let [mut y, mut w] = zeroed(rt, 1024);
    let (queued, failing) = (AtomicBool::new(false), AtomicBool::new(false));
    let r = std::thread::scope(|threads| {
        open_later(threads, &g, &failing, "the failure");
        catch_unwind(AssertUnwindSafe(|| {
            gpu::scope_on(rt, |s| {
                let (y, w, g, done, queued, failing) =
                    (&mut y, &mut w, &g, &done, &queued, &failing);
                s.spawn(move |t| {
                    let mut tmp = t.zeros::<f32>(1024)?;
                    k::gate(t, g, TIMEOUT)?;
                    k::fill(t, &mut tmp, 2.0)?;
                    k::axpy(t, 1.0, &tmp, y)?;
                    drop(tmp); // freed only after the axpy ran (X4)
                    t.record(done)?;
                    queued.store(true, SeqCst);
                    Ok(())
                });
                s.spawn(move |t| {
                    wait_for(queued, "the sibling's gated work");
                    // Own work in flight too: behind the same gate.
                    let mut tmp = t.zeros::<f32>(1024)?;
                    k::gate(t, g, TIMEOUT)?;
                    k::fill(t, &mut tmp, 3.0)?;
                    k::copy(t, &tmp, w)?;
                    failing.store(true, SeqCst);
                    if panic {
                        panic!("task panicked on purpose");
                    }
                    Err(Error::Unsupported("task failed on purpose"))
                });
                Ok(())
            })
        }))
    });
    // When the failure arrives, all GPU work of the scope has finished.
    assert!(g.is_open(), "the failure arrived before the gate opened");
    assert!(
        done.query().unwrap(),
        "the failure arrived before the sibling's work finished"
    );
    assert!(!g.timed_out());
    assert_eq!(y.to_vec().unwrap(), vec![2.0; 1024]);
    assert_eq!(w.to_vec().unwrap(), vec![3.0; 1024]);
    r.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default()
    })
}

#[test]
fn a_task_error_arrives_after_all_sibling_work_and_frees_nothing_in_use() {
    let rt = host();
    let before = quiet(&rt);
    let r = fail_with_work_in_flight(&rt, false).expect("no panic");
    assert!(
        matches!(r, Err(Error::Unsupported("task failed on purpose"))),
        "{r:?}"
    );
    assert_back(&rt, &before);
    assert_usable(&rt);
}

#[test]
fn a_task_panic_arrives_after_all_sibling_work_and_frees_nothing_in_use() {
    let rt = host();
    let before = quiet(&rt);
    let payload = fail_with_work_in_flight(&rt, true).expect_err("the panic is re-raised");
    assert_eq!(payload, "task panicked on purpose");
    assert_back(&rt, &before);
    assert_usable(&rt);
}

#[test]
fn dropping_buffers_views_events_and_scopes_in_flight_never_blocks_or_frees_early() {
    let rt = host();
    let before = quiet(&rt);
    let g = rt.gate().unwrap();
    let gated = |started: Instant| {
        assert!(!g.is_open());
        assert!(
            started.elapsed() < TIMEOUT / 2,
            "a drop waited for the gate"
        );
    };
    let started = Instant::now();

    // A buffer dropped with its work queued behind the gate.
    let t = rt.begin_task().unwrap();
    let mut b = t.zeros::<f32>(4096).unwrap();
    k::gate(&t, &g, TIMEOUT).unwrap();
    k::add_scalar(&t, &mut b, 1.0).unwrap();
    drop(b);
    // The task ends with its work in flight; its stream stays busy.
    drop(t);

    // Views: chunk tasks gated; `for_each` returns with their work queued,
    // and the buffer is dropped right away.
    let mut c = rt.begin_task().unwrap().zeros::<f32>(4096).unwrap();
    gpu::par_chunks_mut(&mut c, 1000)
        .for_each(|t, v| {
            k::gate(t, &g, TIMEOUT)?;
            k::add_scalar(t, v, 1.0)
        })
        .unwrap();
    drop(c);

    // A scope whose child is gated returns with the child's work queued;
    // the child drops a temporary it still uses, the caller a buffer the
    // child writes.
    let mut d = rt.begin_task().unwrap().zeros::<f32>(4096).unwrap();
    let e = rt.event().unwrap();
    gpu::scope_on(&rt, |s| {
        let (d, g, e) = (&mut d, &g, &e);
        s.spawn(move |t| {
            let mut tmp = t.zeros::<f32>(4096)?;
            k::gate(t, g, TIMEOUT)?;
            k::fill(t, &mut tmp, 1.0)?;
            k::axpy(t, 2.0, &tmp, d)?;
            t.record(e)
        });
        Ok(())
    })
    .unwrap();
    drop(d);

    // An event dropped while a wait on its record is queued: back in the
    // pool, recorded again elsewhere, the queued wait is unaffected.
    let waiter = rt.begin_task().unwrap();
    waiter.wait(&e).unwrap();
    let mut after = waiter.zeros::<f32>(16).unwrap();
    k::fill(&waiter, &mut after, 9.0).unwrap();
    drop(e);
    let other = rt.begin_task().unwrap();
    let reused = rt.event().unwrap();
    other.record(&reused).unwrap();
    other.synchronize().unwrap();
    assert!(reused.query().unwrap());
    gated(started);

    g.open();
    assert_eq!(waiter.to_vec(&after).unwrap(), vec![9.0; 16]);
    drop((after, waiter, other, reused, g));
    assert_back(&rt, &before);
    assert_usable(&rt);
}
