//! A task returning an error: `scope` returns that error, and only after
//! every sibling's GPU work has finished (a sibling is gated when the error
//! is returned; another thread opens the gate a little later).

mod common;

use common::{assert_no_races, open_later, runtime, wait_for, zeroed, TIMEOUT};
use gpu::Error;
use gpu_kernels::{add_scalar, gate};
use std::sync::atomic::{AtomicBool, Ordering};

const N: usize = 1024;

#[test]
fn scope_returns_the_error_after_the_gated_siblings_work_finished() {
    let rt = runtime();
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let [mut y] = zeroed(&rt, N);
    let queued = AtomicBool::new(false);
    let failing = AtomicBool::new(false);

    let r: gpu::Result<()> = std::thread::scope(|threads| {
        open_later(threads, &g, &failing, "the error");
        gpu::scope_on(&rt, |s| {
            let (y, g, done, queued, failing) = (&mut y, &g, &done, &queued, &failing);
            s.spawn(move |t| {
                gate(t, g, TIMEOUT)?;
                add_scalar(t, y, 1.0)?;
                t.record(done)?;
                queued.store(true, Ordering::SeqCst);
                Ok(())
            });
            s.spawn(move |_t| {
                wait_for(queued, "the sibling's gated work");
                failing.store(true, Ordering::SeqCst);
                Err(Error::Unsupported("failing on purpose"))
            });
            Ok(())
        })
    });

    let e = r.expect_err("the task's error reaches the caller");
    assert!(matches!(e, Error::Unsupported("failing on purpose")), "{e}");
    assert!(g.is_open());
    assert!(
        done.query().unwrap(),
        "the error arrived before the sibling's GPU work finished"
    );
    assert!(!g.timed_out());
    assert!(y.to_vec().unwrap().iter().all(|v| *v == 1.0));
    assert_no_races(&rt);
}

#[test]
fn the_scope_bodys_own_error_also_waits_for_its_tasks() {
    let rt = runtime();
    let g = rt.gate().unwrap();
    let done = rt.event().unwrap();
    let [mut y] = zeroed(&rt, N);
    let queued = AtomicBool::new(false);
    let failing = AtomicBool::new(false);

    let r: gpu::Result<u32> = std::thread::scope(|threads| {
        open_later(threads, &g, &failing, "the error");
        gpu::scope_on(&rt, |s| {
            let (y, g, done, queued) = (&mut y, &g, &done, &queued);
            s.spawn(move |t| {
                gate(t, g, TIMEOUT)?;
                add_scalar(t, y, 1.0)?;
                t.record(done)?;
                queued.store(true, Ordering::SeqCst);
                Ok(())
            });
            wait_for(queued, "the task's gated work");
            failing.store(true, Ordering::SeqCst);
            Err(Error::ZeroChunk)
        })
    });

    assert!(matches!(r, Err(Error::ZeroChunk)), "{r:?}");
    assert!(
        done.query().unwrap(),
        "the error arrived before the task's GPU work finished"
    );
    assert!(!g.timed_out());
    assert!(y.to_vec().unwrap().iter().all(|v| *v == 1.0));
    assert_no_races(&rt);
}
