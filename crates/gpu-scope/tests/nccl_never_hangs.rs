//! Hangs of the collectives (DESIGN "Soundness": bad use gives a typed error or works,
//! never a hang) that a review of the safe API found, each shown by a test
//! that hung before its fix; a watchdog fails the test instead:
//!
//! 1. A communicator called from a task joined inside its own `group`'s
//!    closure waited for the group, which waited for the task (the group
//!    held the communicator's lock while its closure ran, and refused a
//!    call from its own thread only).
//! 2. Two communicators over two devices, their tasks sharing streams (a
//!    small `max_streams`), called from two threads: each call's parts
//!    could queue in one order on one device and in the other on the
//!    other, and the host rendezvous waited for good.
//! 3. A rank whose part never came left the others waiting for good at the
//!    host rendezvous; now they give up after the communicator's timeout
//!    and the backend breaks (a typed error from then on).

mod common;

use common::{two_device_tests, TIMEOUT};
use gpu::nccl::{Communicator, ReduceOp};
use gpu::{BackendChoice, Buffer, Error, Runtime, RuntimeOptions};
use gpu_kernels as ops;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Duration, Instant};

two_device_tests!(
    "needs two CUDA GPUs and NCCL":
    the_communicator_inside_its_own_group_from_joined_tasks,
);

/// Runs `f` on another thread and fails the test if it does not return
/// within [`TIMEOUT`] (the thread is left hanging: a failed test).
fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what} hung for {TIMEOUT:?}"),
    }
}

/// Buffers of `len` elements, one per device of `comm`, device `d`'s
/// filled with `value(d)`.
fn per_device(comm: &Communicator, len: usize, value: impl Fn(usize) -> f32) -> Vec<Buffer<f32>> {
    (0..comm.local_ranks())
        .map(|d| {
            let t = comm.device(d).unwrap().begin_task().unwrap();
            t.from_host(&vec![value(d); len]).unwrap()
        })
        .collect()
}

/// 256 elements of `value` on device `d` of `rt`'s group.
fn buffer(rt: &Runtime, d: usize, value: f32) -> Buffer<f32> {
    let t = rt.device(d).unwrap().begin_task().unwrap();
    let b = t.from_host(&[value; 256]).unwrap();
    // Idle when its task ends: a stream still busy is passed over for a
    // new one while there is room, and the second communicator of the
    // few-streams test would find none (seen on a 16-core machine).
    t.synchronize().unwrap();
    b
}

fn all_mut<B>(bufs: &mut [B]) -> Vec<&mut B> {
    bufs.iter_mut().collect()
}

/// Hang 1: inside the group's closure, two joined tasks (on the pool's
/// workers, not this thread) and this thread call the communicator. Each
/// call is its own, queued before the group's transfers; all of them run.
fn the_communicator_inside_its_own_group_from_joined_tasks(rt: &Runtime) {
    let rt = rt.clone();
    within(
        "a group whose closure joins tasks calling its communicator",
        move || {
            let comm = Communicator::all_devices(&rt).unwrap();
            let n = comm.local_ranks() as f32;
            let mut x = per_device(&comm, 64, |d| d as f32 + 1.0);
            let mut y = per_device(&comm, 64, |d| 10.0 * (d as f32 + 1.0));
            let mut z = per_device(&comm, 64, |d| 100.0 + d as f32);
            let sent = per_device(&comm, 64, |_| 5.0);
            let mut got = per_device(&comm, 64, |_| 0.0);
            let r = comm.group(|g| {
                g.send(0, &sent[0], 1)?;
                g.recv(1, &mut got[1], 0)?;
                let (xs, ys) = (&mut x, &mut y);
                gpu::join(
                    |_| comm.all_reduce(&mut all_mut(xs), ReduceOp::Sum),
                    |_| comm.all_reduce(&mut all_mut(ys), ReduceOp::Max),
                )?;
                comm.broadcast(&mut all_mut(&mut z), 1)?;
                Ok(7)
            });
            assert_eq!(r.unwrap(), 7);
            let sum = n * (n + 1.0) / 2.0;
            for d in 0..comm.local_ranks() {
                assert_eq!(x[d].to_vec().unwrap(), vec![sum; 64], "device {d}");
                assert_eq!(y[d].to_vec().unwrap(), vec![10.0 * n; 64], "device {d}");
                assert_eq!(z[d].to_vec().unwrap(), vec![101.0; 64], "device {d}");
            }
            assert_eq!(got[1].to_vec().unwrap(), vec![5.0; 64]);
            assert_eq!(got[0].to_vec().unwrap(), vec![0.0; 64]);
            // A group inside the group, from a joined task, too.
            let r = comm.group(|_| {
                gpu::join(
                    |_| {
                        comm.group(|g| {
                            g.send(1, &sent[1], 0)?;
                            g.recv(0, &mut got[0], 1)
                        })
                    },
                    |_| Ok(()),
                )
            });
            r.unwrap();
            assert_eq!(got[0].to_vec().unwrap(), vec![5.0; 64]);
        },
    );
}

/// `calls` all-reduces (the maximum) on `comm` over `bufs`.
fn all_reduce_loop(comm: &Communicator, bufs: &mut [Buffer<f32>], calls: usize) {
    for _ in 0..calls {
        comm.all_reduce(&mut all_mut(bufs), ReduceOp::Max).unwrap();
    }
}

/// Hang 2: two communicators over the same two devices, with as few
/// streams as the runtime allows for both of them (4: room for one
/// communicator besides the devices' reclaim streams; 5; 6: room for
/// both), each called from its own thread many times. The second one is
/// refused (a typed error) where its tasks would have to share the
/// first's streams; otherwise both complete.
#[test]
fn two_communicators_on_few_streams_called_from_two_threads() {
    for max_streams in [4, 5, 6] {
        within("two communicators on two threads", move || {
            let rt = Runtime::new(RuntimeOptions {
                backend: BackendChoice::Host,
                host_devices: 2,
                max_streams,
                warm_streams: 1,
                ..RuntimeOptions::default()
            })
            .unwrap();
            // The buffers first: their tasks' streams go back to the pool.
            let n = rt.device_count();
            let mut a = (0..n)
                .map(|d| buffer(&rt, d, 10.0 + d as f32))
                .collect::<Vec<_>>();
            let mut b = (0..n)
                .map(|d| buffer(&rt, d, 20.0 + d as f32))
                .collect::<Vec<_>>();
            let first = Communicator::all_devices(&rt).unwrap();
            let second = match Communicator::all_devices(&rt) {
                Ok(c) => c,
                Err(e) => {
                    assert!(matches!(e, Error::Ledger(_)), "{e:?}");
                    assert!(max_streams < 6, "room for both, yet {e:?}");
                    return;
                }
            };
            std::thread::scope(|s| {
                let (first, second) = (&first, &second);
                let (a, b) = (&mut a, &mut b);
                s.spawn(move || all_reduce_loop(first, a, 3000));
                s.spawn(move || all_reduce_loop(second, b, 3000));
            });
            // Their calls finish (their drops wait for them), and their
            // streams go back, for the reads.
            drop((first, second));
            // Not two communicators where one would share the other's
            // streams.
            assert_eq!(max_streams, 6, "two communicators on {max_streams} streams");
            for d in 0..n {
                assert_eq!(a[d].to_vec().unwrap(), vec![10.0 + (n - 1) as f32; 256]);
                assert_eq!(b[d].to_vec().unwrap(), vec![20.0 + (n - 1) as f32; 256]);
            }
            assert!(rt.races().is_empty(), "{:?}", rt.races());
        });
    }
}

/// Hang 3: device 1's part of an all-reduce waits (on the device) for a
/// writer of its buffer behind a gate that stays closed; device 0's part
/// waits at the rendezvous for it past the communicator's timeout, then
/// gives up: the backend breaks, every later call is a typed error, and
/// nothing waits for good.
#[test]
fn a_rank_whose_part_never_comes_breaks_the_backend_after_the_timeout() {
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: 2,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let d1 = rt.device(1).unwrap();
    let comm = Communicator::all_devices(&rt).unwrap();
    comm.set_timeout(Duration::from_millis(50));
    let mut bufs = per_device(&comm, 64, |d| d as f32 + 1.0);
    let g = d1.gate().unwrap();
    let writer = d1.begin_task().unwrap();
    ops::gate(&writer, &g, TIMEOUT).unwrap();
    ops::fill(&writer, &mut bufs[1], 3.0f32).unwrap();
    comm.all_reduce(&mut all_mut(&mut bufs), ReduceOp::Sum)
        .unwrap();
    // Broken: no task starts (checked without waiting for any stream).
    let start = Instant::now();
    let mut broke = false;
    while !broke && start.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(5));
        broke = rt.begin_task().is_err();
    }
    g.open();
    assert!(broke, "the backend broke after the rendezvous timed out");
    assert!(!g.timed_out(), "the gate was opened, not timed out");
    let e = rt.begin_task().map(drop).unwrap_err();
    assert!(
        matches!(&e, Error::StickyDeviceError { name, .. } if name.contains("waited")),
        "{e:?}"
    );
    let e = comm
        .all_reduce(&mut all_mut(&mut bufs), ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(e, Error::StickyDeviceError { .. }), "{e:?}");
    let e = bufs[0].to_vec().unwrap_err();
    assert!(matches!(e, Error::StickyDeviceError { .. }), "{e:?}");
}
