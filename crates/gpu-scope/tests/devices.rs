//! Several devices in one process (DESIGN "Beyond one GPU"): one ledger across them, tasks
//! placed with `spawn_on`, peer copies as tracked operations, and a buffer
//! of another device refused by a kernel. Each case runs on the host
//! backend simulating two devices (one race detector over both, so a
//! missing cross-device wait is a reported race) and, ignored unless asked
//! for, on two CUDA GPUs.

use gpu::{BackendChoice, Error, Runtime, RuntimeOptions};
use gpu_kernels as ops;
use std::time::Duration;

mod common;
use common::two_device_tests;

two_device_tests!(
    "needs two CUDA GPUs":
    group_has_every_device_once,
    peer_copy_waits_for_the_producer_on_the_other_device,
    spawn_on_orders_a_chain_across_devices,
    kernel_refuses_a_buffer_of_another_device,
    a_buffer_freed_after_a_peer_read_waits_for_it,
    a_device_runtime_dropped_and_opened_again_works,
    copy_from_another_devices_staging_waits_for_the_copy,
);

const N: usize = 1 << 16;
/// Long enough that a copy not ordered after the kernel would read early.
const SPIN: Duration = Duration::from_millis(30);

fn group_has_every_device_once(rt: &Runtime) {
    assert_eq!(rt.ordinal(), 0);
    let d1 = rt.device(1).unwrap();
    assert_eq!(d1.ordinal(), 1);
    assert!(d1.same_group(rt) && !d1.same(rt));
    // The same runtime while a handle lives.
    assert!(rt.device(1).unwrap().same(&d1));
    assert!(d1.device(0).unwrap().same(rt));
    let n = rt.device_count();
    match rt.device(n) {
        Err(Error::NoDevice(msg)) => assert!(msg.contains(&n.to_string()), "{msg}"),
        other => panic!("device {n} of {n}: {other:?}"),
    }
    // Another group is another ledger: its runtimes are not this one's.
    let other = Runtime::new(RuntimeOptions {
        backend: if rt.backend() == gpu::BackendKind::Host {
            BackendChoice::Host
        } else {
            BackendChoice::Cuda
        },
        host_devices: 2,
        ..RuntimeOptions::default()
    })
    .unwrap();
    assert!(!other.same_group(rt));
}

fn peer_copy_waits_for_the_producer_on_the_other_device(rt: &Runtime) {
    let d1 = rt.device(1).unwrap();
    let t0 = rt.begin_task().unwrap();
    let mut a = t0.zeros::<f32>(N).unwrap();
    t0.synchronize().unwrap();
    // A long write on device 0, then a copy of it to device 1 by a task on
    // device 1: the copy must wait for the write on the device.
    ops::spin_touch(&t0, &mut a, SPIN).unwrap();
    let before = rt.counters();
    let t1 = d1.begin_task().unwrap();
    let mut b = t1.zeros::<f32>(N).unwrap();
    t1.copy_peer(&a, &mut b).unwrap();
    let waits = rt.counters().since(&before).device_waits;
    assert!(
        waits >= 1,
        "the copy on device 1 waited for device 0's kernel: {waits} device waits"
    );
    assert!(t1.to_vec(&b).unwrap().iter().all(|&v| v == 1.0));
    // Back again, through a task on device 0 this time.
    let mut c = t0.zeros::<f32>(N).unwrap();
    ops::scale(&t1, &mut b, 3.0f32).unwrap();
    t0.copy_peer(&b, &mut c).unwrap();
    assert!(t0.to_vec(&c).unwrap().iter().all(|&v| v == 3.0));
    // Lengths are checked.
    let mut short = t1.zeros::<f32>(N - 1).unwrap();
    assert!(matches!(
        t1.copy_peer(&a, &mut short),
        Err(Error::LengthMismatch { .. })
    ));
}

fn spawn_on_orders_a_chain_across_devices(rt: &Runtime) {
    let mut a = rt.begin_task().unwrap().zeros::<f32>(N).unwrap();
    let d1 = rt.device(1).unwrap();
    let mut b = d1.begin_task().unwrap().zeros::<f32>(N).unwrap();
    let mut c = rt.begin_task().unwrap().zeros::<f32>(N).unwrap();
    gpu::scope_on(rt, |s| {
        assert_eq!(s.device(), 0);
        assert_eq!(s.device_count(), rt.device_count());
        ops::spin_touch(s, &mut a, SPIN)?; // a = 1, slowly, on device 0
        let (a, b, c) = (&a, &mut b, &mut c);
        s.spawn_on(1, move |s| {
            assert_eq!(s.device(), 1);
            s.copy_peer(a, b)?; // after the parent's write: spawn order
            ops::add_scalar(s, b, 1.0f32)?; // b = 2 on device 1
                                            // A child of a task on device 1 stays there, unless placed.
            s.spawn(move |s| {
                assert_eq!(s.device(), 1);
                ops::scale(s, b, 2.0f32) // b = 4
            });
            s.spawn_on(0, move |s| {
                assert_eq!(s.device(), 0);
                ops::fill(s, c, 7.0f32) // c = 7, on device 0
            });
            Ok(())
        });
        Ok(())
    })
    .unwrap();
    // The scope's end orders the caller after every device's work.
    let t = rt.begin_task().unwrap();
    assert!(t.to_vec(&c).unwrap().iter().all(|&v| v == 7.0));
    let mut back = t.zeros::<f32>(N).unwrap();
    t.copy_peer(&b, &mut back).unwrap();
    assert!(t.to_vec(&back).unwrap().iter().all(|&v| v == 4.0));
}

fn kernel_refuses_a_buffer_of_another_device(rt: &Runtime) {
    let d1 = rt.device(1).unwrap();
    let mut b = d1.begin_task().unwrap().from_host(&[1.0f32; 8]).unwrap();
    let t0 = rt.begin_task().unwrap();
    let e = ops::scale(&t0, &mut b, 2.0f32).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    assert!(e.to_string().contains("copy_peer"), "{e}");
    // Nothing ran: the buffer is as it was.
    assert_eq!(d1.begin_task().unwrap().to_vec(&b).unwrap(), vec![1.0; 8]);
}

fn a_buffer_freed_after_a_peer_read_waits_for_it(rt: &Runtime) {
    let d1 = rt.device(1).unwrap();
    let t1 = d1.begin_task().unwrap();
    let mut dst = t1.zeros::<f32>(N).unwrap();
    for _ in 0..4 {
        let t0 = rt.begin_task().unwrap();
        let mut src = t0.zeros::<f32>(N).unwrap();
        ops::spin_touch(&t0, &mut src, SPIN / 4).unwrap();
        t1.copy_peer(&src, &mut dst).unwrap();
        // Freed on device 0 after device 1's read (X4 across devices).
        drop(src);
    }
    assert!(t1.to_vec(&dst).unwrap().iter().all(|&v| v == 1.0));
}

fn a_device_runtime_dropped_and_opened_again_works(rt: &Runtime) {
    let t0 = rt.begin_task().unwrap();
    let mut a = t0.zeros::<f32>(N).unwrap();
    ops::spin_touch(&t0, &mut a, SPIN / 4).unwrap();
    for round in 0..3 {
        // Each round a new runtime of device 1 over the same core (the old
        // one dropped with its buffer: freed after the copy that read `a`).
        let d1 = rt.device(1).unwrap();
        let t1 = d1.begin_task().unwrap();
        let mut b = t1.zeros::<f32>(N).unwrap();
        t1.copy_peer(&a, &mut b).unwrap();
        let v = t1.to_vec(&b).unwrap();
        assert!(v.iter().all(|&x| x == 1.0), "round {round}: {}", v[0]);
        drop((b, t1, d1));
    }
    assert_eq!(rt.device(1).unwrap().ordinal(), 1);
}

/// Review 3 (issue 23), defect 2 (unsound on the host backend): a
/// `copy_from_host` from device 1's `Staging` slice into a device-0 buffer
/// returned before the copy ran: the runtime asked only device 0's pinned
/// table and the driver, which on the host backend said "pageable" while
/// its shared copy read the source late. The host write after the return
/// then reached the device. Failed before the fix at the values (2, not 1).
fn copy_from_another_devices_staging_waits_for_the_copy(rt: &Runtime) {
    let d1 = rt.device(1).unwrap();
    let mut pinned = gpu::memory::Staging::<f32>::new(&d1, N).unwrap();
    pinned.as_mut_slice().unwrap().fill(1.0);
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    let g = rt.gate().unwrap();
    ops::gate(&t, &g, Duration::from_secs(20)).unwrap();
    std::thread::scope(|scope| {
        let g = &g;
        scope.spawn(move || {
            // Not a threshold: the copy must not have run when the host
            // writes below, whichever comes first.
            std::thread::sleep(Duration::from_millis(100));
            g.open();
        });
        t.copy_from_host(&mut a, pinned.as_slice().unwrap())
            .unwrap();
        // `copy_from_host` returned: the source may change.
        pinned.as_mut_slice().unwrap().fill(2.0);
    });
    assert!(t.to_vec(&a).unwrap().iter().all(|&x| x == 1.0));
    assert!(!g.timed_out());
}
