//! Nothing returns, or hands its work over, before the GPU work it covers
//! (DESIGN "Soundness", DESIGN "Streams are a resource"): four orderings a review found missing, each a test that
//! failed before its fix, on the host backend (and, through the global
//! runtime, on the GPU machine):
//!
//! 1. A panic in `join`'s `b` (on a worker: Rayon's join) reached the caller
//!    before `b`'s GPU work finished (its final fence was skipped).
//! 2. A task that submitted nothing dropped the final fences of its nested
//!    scope's tasks, so its scope's caller was not ordered after them.
//! 3. A spawn inside a capture recorded the spawn's fence on the capturing
//!    stream: the child's stream would join the capture (on CUDA), and its
//!    work would go into the graph. Refused now.
//! 4. `copy_from_host` from a `Staging` buffer's slice (page-locked memory,
//!    which the device reads while the copy runs) returned at once, and the
//!    host could overwrite the memory under the copy.

mod common;

use common::{open_later, wait_for, zeroed, TIMEOUT};
use gpu::memory::Staging;
use gpu::Error;
use gpu_kernels::{add_scalar, fill, gate};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

const N: usize = 1024;

/// The panic reached the caller, and only once `what` (which records
/// `done` behind gate `g`) had finished on the device.
#[track_caller]
fn assert_panicked_after<R>(
    caught: std::thread::Result<R>,
    done: &gpu::sync::Event,
    g: &gpu::sync::Gate,
    what: &str,
) {
    assert!(caught.is_err(), "the panic reaches the caller");
    assert!(
        done.query().unwrap(),
        "the panic arrived while {what} was still queued"
    );
    assert!(!g.timed_out());
}

#[test]
fn a_panic_in_joins_b_arrives_after_bs_gpu_work() {
    let rt = gpu::runtime().unwrap();
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let mut y = rt.begin_task().unwrap().zeros::<f32>(N).unwrap();
    let queued = AtomicBool::new(false);
    let caught = std::thread::scope(|threads| {
        open_later(threads, &g, &queued, "the gated work being queued");
        catch_unwind(AssertUnwindSafe(|| {
            gpu::join(
                |_a| Ok(()),
                |b| -> gpu::Result<()> {
                    gate(b, &g, TIMEOUT)?;
                    add_scalar(b, &mut y, 1.0)?;
                    b.record(&done)?;
                    queued.store(true, Ordering::SeqCst);
                    panic!("b fails on purpose");
                },
            )
        }))
    });
    assert_panicked_after(caught, &done, &g, "b's gated work");
}

#[test]
fn a_task_without_gpu_work_hands_over_its_nested_tasks_fences() {
    let rt = gpu::runtime().unwrap();
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let mut y = rt.begin_task().unwrap().zeros::<f32>(N).unwrap();
    let queued = AtomicBool::new(false);
    let caught = std::thread::scope(|threads| {
        open_later(threads, &g, &queued, "the gated work being queued");
        catch_unwind(AssertUnwindSafe(|| {
            gpu::scope(|s| {
                let (y, g, done, queued) = (&mut y, &g, &done, &queued);
                // A task that submits nothing itself; its nested scope's
                // task does the gated work.
                s.spawn(move |c| {
                    c.scope(|s2| {
                        s2.spawn(move |gc| {
                            gate(gc, g, TIMEOUT)?;
                            add_scalar(gc, y, 1.0)?;
                            gc.record(done)?;
                            queued.store(true, Ordering::SeqCst);
                            Ok(())
                        });
                        Ok(())
                    })
                });
                s.spawn(move |_t| {
                    wait_for(queued, "the grandchild's gated work");
                    panic!("a sibling fails on purpose");
                });
                Ok(())
            })
        }))
    });
    assert_panicked_after(caught, &done, &g, "the grandchild's gated work");
}

#[test]
fn a_spawn_inside_a_capture_is_refused() {
    let rt = gpu::runtime().unwrap();
    let [mut b] = zeroed(rt, N);
    let mut child_ran = false;
    let r = gpu::scope(|s| {
        // The scope's task submits first, so a spawn records a fence.
        let mut x = s.zeros::<f32>(4)?;
        fill(s, &mut x, 1.0)?;
        let graph = s.capture(|_c| {
            s.spawn(|t| {
                child_ran = true;
                fill(t, &mut b, 7.0)
            });
            Ok(())
        });
        drop(graph);
        Ok(())
    });
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
    assert!(!child_ran, "the refused child never ran");
    assert_eq!(b.to_vec().unwrap(), vec![0.0; N]);
}

#[test]
fn a_copy_from_page_locked_memory_waits_for_the_device() {
    let rt = gpu::runtime().unwrap();
    let g = rt.gate().unwrap();
    let mut staged = Staging::<f32>::new(rt, N).unwrap();
    staged.as_mut_slice().unwrap().fill(1.0);
    let t = rt.begin_task().unwrap();
    let mut d = t.zeros::<f32>(N).unwrap();
    let queued = AtomicBool::new(true);
    std::thread::scope(|threads| {
        open_later(threads, &g, &queued, "the gated work being queued");
        // The copy sits behind the gate on the device.
        gate(&t, &g, TIMEOUT).unwrap();
        t.copy_from_host(&mut d, staged.as_slice().unwrap())
            .unwrap();
        // The host writes the memory the copy reads: only after it ran.
        staged.as_mut_slice().unwrap().fill(9.0);
    });
    assert_eq!(t.to_vec(&d).unwrap(), vec![1.0; N]);
    assert!(!g.timed_out());
}
