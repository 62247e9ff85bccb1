//! A task's panic reaches the caller of `scope` only after every sibling's
//! GPU work has finished: a sibling's stream is blocked on a gate when the
//! panic happens, another thread opens the gate a little later, and when
//! the panic arrives the sibling's work (an event recorded after it) is
//! already complete.

mod common;

use common::{assert_no_races, open_later, runtime, wait_for, zeroed, TIMEOUT};
use gpu_kernels::{add_scalar, gate};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

const N: usize = 1024;

#[test]
fn the_panic_arrives_after_the_gated_siblings_work_finished() {
    let rt = runtime();
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let [mut y] = zeroed(&rt, N);
    let queued = AtomicBool::new(false);
    let panicking = AtomicBool::new(false);

    let caught = std::thread::scope(|threads| {
        // Opens the gate a short while after the panic; until then the
        // sibling's stream is blocked.
        open_later(threads, &g, &panicking, "the panic");
        catch_unwind(AssertUnwindSafe(|| {
            gpu::scope_on(&rt, |s| {
                let (y, g, done, queued, panicking) = (&mut y, &g, &done, &queued, &panicking);
                s.spawn(move |t| {
                    gate(t, g, TIMEOUT)?;
                    add_scalar(t, y, 1.0)?;
                    t.record(done)?;
                    queued.store(true, Ordering::SeqCst);
                    Ok(())
                });
                s.spawn(move |_t| {
                    wait_for(queued, "the sibling's gated work");
                    panicking.store(true, Ordering::SeqCst);
                    panic!("task failed on purpose");
                });
                Ok(())
            })
        }))
    });

    let payload = caught.expect_err("the task's panic reaches the caller");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"task failed on purpose")
    );
    // The sibling's GPU work finished before the panic was re-raised (the
    // query does not wait).
    assert!(g.is_open());
    assert!(
        done.query().unwrap(),
        "the panic arrived before the sibling's GPU work finished"
    );
    assert!(!g.timed_out());
    assert!(y.to_vec().unwrap().iter().all(|v| *v == 1.0));
    assert_no_races(&rt);
}
