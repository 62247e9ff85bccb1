//! R11 for a reader (`TaskContext::host_sync_ptr_read`, what an MPI send
//! uses): it waits for the buffer's writers and the task's own work, and
//! for nothing else: not for work its parent queued after the spawn (the
//! seed's scenario), not for another task that only reads the buffer.

mod common;

use common::{assert_no_races, runtime, wait_for, zeroed, TIMEOUT};
use gpu::{BackendKind, Buffer, Runtime, TaskContext};
use gpu_kernels::{add_scalar, copy, fill, gate};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const N: usize = 1 << 12;

/// The buffer's elements as the host sees them through the pointer, where
/// it can (the host backend's device memory is host memory), else through
/// a tracked copy.
fn read_back(t: &TaskContext, rt: &Runtime, buf: &Buffer<f32>, p: u64) -> Vec<f32> {
    if rt.backend() == BackendKind::Host {
        // SAFETY: on the host backend, `p` is `buf`'s `N` elements in host
        // memory, whose writers are done (`host_sync_ptr_read` returned),
        // and `buf` is borrowed, so nothing writes it while it is read.
        unsafe { std::slice::from_raw_parts(p as *const f32, buf.len()) }.to_vec()
    } else {
        t.to_vec(buf).unwrap()
    }
}

#[test]
fn the_seeds_scenario_does_not_wait_for_the_parents_later_work() {
    let rt = runtime();
    let [mut a, mut later] = zeroed(&rt, N);
    let g = rt.gate().unwrap();
    let queued = AtomicBool::new(false);
    gpu::scope_on(&rt, |s| {
        fill(s, &mut a, 1.0)?; // ordered before the child by its spawn
        s.spawn(|t| {
            // Once the parent's later work is queued, a wait for it would
            // return only after the gate gave up.
            wait_for(&queued, "the parent's later work queued");
            let p = t.host_sync_ptr_read(&a)?;
            assert!(!g.timed_out(), "it waited for the parent's later work");
            assert!(read_back(t, &rt, &a, p).iter().all(|&x| x == 1.0));
            g.open();
            Ok(())
        });
        gate(s, &g, TIMEOUT)?; // the parent's later work, held until the child opens it
        fill(s, &mut later, 5.0)?;
        queued.store(true, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert!(!g.timed_out());
    assert!(rt
        .begin_task()
        .unwrap()
        .to_vec(&later)
        .unwrap()
        .iter()
        .all(|&x| x == 5.0));
    assert_no_races(&rt);
}

#[test]
fn it_waits_for_a_writer_it_is_not_ordered_after() {
    let rt = runtime();
    let [mut a] = zeroed(&rt, N);
    let writer = rt.begin_task().unwrap();
    let probe = rt.gate().unwrap();
    // The write is held for a while on the writer's stream, which nothing
    // orders the reader after: the reader's hand-off waits on the device.
    gate(&writer, &probe, Duration::from_millis(300)).unwrap();
    fill(&writer, &mut a, 2.0).unwrap();
    let reader = rt.begin_task().unwrap();
    let p = reader.host_sync_ptr_read(&a).unwrap();
    assert!(probe.timed_out(), "it returned before the held write ran");
    assert!(read_back(&reader, &rt, &a, p).iter().all(|&x| x == 2.0));
    drop((reader, writer));
    assert_no_races(&rt);
}

#[test]
fn it_does_not_wait_for_another_reader() {
    let rt = runtime();
    let [mut a, mut b] = zeroed(&rt, N);
    let setup = rt.begin_task().unwrap();
    add_scalar(&setup, &mut a, 3.0).unwrap();
    setup.synchronize().unwrap();
    let other = rt.begin_task().unwrap();
    let g = rt.gate().unwrap();
    // Another task reads `a`, held behind a gate.
    gate(&other, &g, TIMEOUT).unwrap();
    copy(&other, &a, &mut b).unwrap();
    let reader = rt.begin_task().unwrap();
    let p = reader.host_sync_ptr_read(&a).unwrap();
    assert!(!g.timed_out(), "it waited for another reader");
    assert!(read_back(&reader, &rt, &a, p).iter().all(|&x| x == 3.0));
    g.open();
    assert!(other.to_vec(&b).unwrap().iter().all(|&x| x == 3.0));
    drop((reader, other, setup));
    assert_no_races(&rt);
}
