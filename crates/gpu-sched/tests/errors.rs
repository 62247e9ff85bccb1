//! Typed errors, on both backends: each bad call returns its variant,
//! submits nothing, leaves the runtime usable, and its message says what
//! was wrong and what to do.

mod common;

use common::{assert_no_races, backend_tests, error, same_backend, says};
use gpu_kernels as k;
use gpu_sched::raw::RawTask;
use gpu_sched::{BackendKind, Error, Runtime, RuntimeOptions, TaskContext};
use std::time::Duration;

#[track_caller]
fn assert_values(t: &TaskContext, b: &gpu_sched::Buffer<f32>, want: &[f32]) {
    assert_eq!(
        t.to_vec(b).unwrap(),
        want,
        "the failed call changed the buffer"
    );
}

/// Lengths that must agree: host copies, device copies and the kernels'
/// wrappers check before submitting anything.
fn length_mismatch(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[1.0f32; 4]).unwrap();
    let mut b = t.from_host(&[2.0f32; 3]).unwrap();

    let e = error(t.copy_from_host(&mut a, &[9.0; 3]));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                what: "the host source",
                expected: 4,
                got: 3
            }
        ),
        "{e:?}"
    );
    says(&e, &["the host source", "3 elements", "4 expected"]);

    let e = error(t.copy_to_host(&a, &mut [0.0; 5]));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 4,
                got: 5,
                ..
            }
        ),
        "{e:?}"
    );
    says(&e, &["5 elements", "4 expected"]);

    let e = error(t.copy(&b, &mut a));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 3,
                got: 4,
                ..
            }
        ),
        "{e:?}"
    );

    let e = error(k::axpy(&t, 2.0, &b, &mut a));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                what: "axpy's x",
                expected: 4,
                got: 3
            }
        ),
        "{e:?}"
    );
    says(&e, &["axpy's x", "3 elements", "4 expected"]);

    let e = error(k::copy(&t, &a, &mut b));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 3,
                got: 4,
                ..
            }
        ),
        "{e:?}"
    );
    let e = error(k::inclusive_scan(&t, &a, &mut b));
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let e = error(k::sum_atomic_into(&t, &a, &mut b));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 1,
                got: 3,
                ..
            }
        ),
        "{e:?}"
    );

    assert_values(&t, &a, &[1.0; 4]);
    assert_values(&t, &b, &[2.0; 3]);
}
backend_tests!(length_mismatch);

/// A buffer, view, event, gate or graph of another runtime.
fn wrong_device(rt: &Runtime) {
    let rt2 = same_backend(rt, RuntimeOptions::default());
    let t = rt.begin_task().unwrap();
    let t2 = rt2.begin_task().unwrap();
    let mut mine = t.from_host(&[1.0f32; 8]).unwrap();
    let mut theirs = t2.from_host(&[2.0f32; 8]).unwrap();

    let e = error(k::fill(&t, &mut theirs, 0.0));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "a kernel argument"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &[
            "a kernel argument",
            "another device",
            "copy it to this device first",
        ],
    );
    let e = error(k::axpy(&t, 1.0, &theirs, &mut mine));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");

    let e = error(t.copy_from_host(&mut theirs, &[0.0; 8]));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "the destination buffer"
            }
        ),
        "{e:?}"
    );
    let e = error(t.to_vec(&theirs));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "the source buffer"
            }
        ),
        "{e:?}"
    );
    let e = error(t.copy(&theirs, &mut mine));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = error(t.memset_zero(&mut theirs));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = error(t.raw_ptr(&mut theirs));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = error(t.host_sync_ptr(&mut theirs));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");

    let event = rt2.event().unwrap();
    let e = error(t.record(&event));
    assert!(
        matches!(e, Error::WrongDevice { what: "the event" }),
        "{e:?}"
    );
    let e = error(t.wait(&event));
    assert!(
        matches!(e, Error::WrongDevice { what: "the event" }),
        "{e:?}"
    );
    let fence = t2.fence().unwrap();
    let e = error(t.wait_fence(fence));
    assert!(
        matches!(e, Error::WrongDevice { what: "the fence" }),
        "{e:?}"
    );

    let gate = rt2.gate().unwrap();
    let e = error(k::gate(&t, &gate, Duration::from_secs(1)));
    assert!(
        matches!(e, Error::WrongDevice { what: "the gate" }),
        "{e:?}"
    );

    let graph = t2.capture(|c| k::fill(c, &mut theirs, 3.0)).unwrap();
    let e = error(t.launch_graph(&graph).write(&mut theirs).submit());
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let graph = t.capture(|c| k::fill(c, &mut mine, 3.0)).unwrap();
    let e = error(
        t.launch_graph(&graph)
            .write(&mut mine)
            .write(&mut theirs)
            .submit(),
    );
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");

    {
        let mut split = theirs.split_chunks(4).unwrap();
        let mut views = split.views();
        let e = error(k::fill(&t, &mut views[0], 0.0));
        assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
        drop(views);
        let e = error(t.rejoin(split));
        assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    }

    assert_values(&t, &mine, &[1.0; 8]);
    assert_values(&t2, &theirs, &[2.0; 8]);
    assert_no_races(&rt2);
}
backend_tests!(wrong_device);

/// Launches whose argument list does not match the kernel's parameters
/// submit nothing. For kernels (`Builtin`, `Kernel`) the compiler checks
/// the list against the signature: too few or too many arguments, a scalar
/// of another type, a read (`&`) buffer or a scalar for a written one, a
/// written buffer for a scalar do not compile (the `compile_fail` examples
/// of `gpu_sched::Builtin`); a signature that disagrees with the PTX is
/// `BadKernelArgs` when the module loads (`tasks_hand_off_and_reuse_streams.rs`, `own_kernels.rs`).
/// What is left to check at run time is a graph launch's buffers.
fn bad_kernel_args(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[1.0f32; 4]).unwrap();
    let mut b = t.from_host(&[2.0f32; 4]).unwrap();
    let before = rt.counters();

    // A graph launch must be given every buffer the graph touches.
    let graph = t.capture(|c| k::fill(c, &mut a, 3.0)).unwrap();
    let e = error(t.launch_graph(&graph).submit());
    assert!(
        matches!(
            e,
            Error::BadKernelArgs {
                kernel: "graph launch",
                ..
            }
        ),
        "{e:?}"
    );
    says(&e, &["the graph writes", ".write(&mut buf)"]);
    let e = error(t.launch_graph(&graph).read(&a).submit());
    says(&e, &[".write(&mut buf)"]);
    let e = error(t.launch_graph(&graph).write(&mut b).submit());
    says(&e, &[".write(&mut buf)"]);

    let d = rt.counters().since(&before);
    assert_eq!((d.device_waits, d.host_syncs), (0, 0), "{d:?}");
    assert_values(&t, &a, &[1.0; 4]);
    assert_values(&t, &b, &[2.0; 4]);
}
backend_tests!(bad_kernel_args);

/// A capturing stream cannot be synchronized, give a host-sync pointer or
/// begin another capture; the capture is ended and the stream works after.
fn capturing(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[1.0f32; 4]).unwrap();

    let e = error(t.capture(|c| {
        k::fill(c, &mut a, 5.0)?;
        c.synchronize()
    }));
    assert!(
        matches!(
            e,
            Error::Capturing {
                what: "synchronizing the stream"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &[
            "synchronizing the stream",
            "recorded into a graph",
            "do it before or after the recording",
        ],
    );
    assert!(!rt.ledger().is_capturing(t.stream_id()));

    let e = error(t.capture(|c| {
        k::fill(c, &mut a, 5.0)?;
        c.host_sync_ptr(&mut a).map(drop)
    }));
    assert!(
        matches!(
            e,
            Error::Capturing {
                what: "taking a host-sync pointer"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &["host-sync pointer", "do it before or after the recording"],
    );

    let e = error(t.capture(|c| {
        k::fill(c, &mut a, 5.0)?;
        c.capture(|_| Ok(())).map(drop)
    }));
    assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
    says(&e, &["do it before or after the recording"]);

    // Nothing captured ran, and the stream is usable.
    assert!(!rt.ledger().is_capturing(t.stream_id()));
    t.synchronize().unwrap();
    assert_values(&t, &a, &[1.0; 4]);
    k::fill(&t, &mut a, 6.0).unwrap();
    assert_values(&t, &a, &[6.0; 4]);
}
backend_tests!(capturing);

/// A chunk size of zero.
fn zero_chunk(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[1.0f32; 4]).unwrap();
    let e = error(a.split_chunks(0).map(|split| split.len()));
    assert!(matches!(e, Error::ZeroChunk), "{e:?}");
    says(&e, &["chunk size must be at least 1"]);
    let mut split = a.split_chunks(3).unwrap();
    assert_eq!(split.views().len(), 2);
    t.rejoin(split).unwrap();
    assert_values(&t, &a, &[1.0; 4]);
}
backend_tests!(zero_chunk);

/// Asking for more memory than the device has (a 1 MiB limit on the host
/// backend) is a typed error that leaks nothing; the runtime goes on.
fn out_of_memory(rt: &Runtime) {
    let small = same_backend(
        rt,
        RuntimeOptions {
            host_memory_limit: 1 << 20,
            ..RuntimeOptions::default()
        },
    );
    let t = small.begin_task().unwrap();
    // The task's stream is bound at its first operation: bind it before
    // counting, so that the count sees only what the allocation leaves.
    let _ = t.stream_id();
    let live = small.live();
    let too_much = small.total_memory() * 2;
    let e = error(t.alloc::<u8>(too_much));
    assert!(
        matches!(e, Error::OutOfMemory { requested, .. } if requested == too_much),
        "{e:?}"
    );
    says(
        &e,
        &[
            "out of device memory",
            &too_much.to_string(),
            "free buffers",
        ],
    );
    assert_eq!(small.live(), live, "a failed allocation leaks nothing");

    if small.backend() == BackendKind::Host {
        // The limit counts live allocations.
        let half = t.alloc::<u8>(1 << 19).unwrap();
        let other_half = t.alloc::<u8>(1 << 19).unwrap();
        let e = error(t.alloc::<u8>(1024));
        assert!(
            matches!(
                e,
                Error::OutOfMemory {
                    requested: 1024,
                    ..
                }
            ),
            "{e:?}"
        );
        drop(half);
        small.synchronize().unwrap(); // the stream-ordered free ran
        drop(t.alloc::<u8>(1024).unwrap());
        drop(other_half);
    }

    let e = error(t.alloc::<f64>(usize::MAX));
    assert!(
        matches!(
            e,
            Error::TooLarge {
                elements: usize::MAX,
                element_bytes: 8,
                ..
            }
        ),
        "{e:?}"
    );

    let mut a = t.from_host(&[1.0f32; 16]).unwrap();
    k::add_scalar(&t, &mut a, 1.0).unwrap();
    assert_values(&t, &a, &[2.0; 16]);
}
backend_tests!(out_of_memory);
