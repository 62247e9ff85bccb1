//! Sibling tasks overlap: while one sibling's stream is blocked on a closed
//! gate, another sibling completes its own GPU work and synchronizes it on
//! the host. If the runtime wrongly ordered the second after the first, its
//! synchronize could only return once the gate timed out, which the test
//! sees (no timing threshold).

mod common;

use common::{assert_no_races, runtime, wait_for, zeroed, TIMEOUT};
use gpu_kernels::{add_scalar, gate};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

const N: usize = 1024;

#[test]
fn a_sibling_finishes_while_the_other_is_gated() {
    let rt = runtime();
    let g = rt.gate().unwrap();
    let [mut a, mut b] = zeroed(&rt, N);

    let (tx, rx) = mpsc::channel();
    let gated = AtomicBool::new(false);
    let gated = &gated;
    let (ra, rb, g) = (&mut a, &mut b, &g);
    gpu::scope_on(&rt, move |s| {
        let (a, b) = (ra, rb);
        // Child A: its stream blocks on the gate, then writes `a`.
        s.spawn(move |t| {
            gate(t, g, TIMEOUT)?;
            add_scalar(t, a, 1.0)?;
            gated.store(true, Ordering::SeqCst);
            Ok(())
        });
        // Child B: its own work, synchronized on the host while A is gated.
        s.spawn(move |t| {
            // Start once A's gated work is queued: a wrong wait for A's
            // stream would then cover the gate.
            wait_for(gated, "A's gated work being queued");
            add_scalar(t, b, 2.0)?;
            let v = t.to_vec(b)?;
            tx.send((v, g.is_open(), g.timed_out())).unwrap();
            Ok(())
        });
        let (v, open, timed_out) = rx.recv().expect("child B reports");
        assert!(v.iter().all(|x| *x == 2.0), "B computed {:?}", &v[..4]);
        assert!(!open, "nobody opened the gate yet");
        assert!(!timed_out, "B's synchronize waited for A's gate");
        g.open();
        Ok(())
    })
    .unwrap();

    assert!(!g.timed_out());
    assert!(a.to_vec().unwrap().iter().all(|x| *x == 1.0));
    assert!(b.to_vec().unwrap().iter().all(|x| *x == 2.0));
    assert_no_races(&rt);
}

/// The device's work queues (CUDA's `CUDA_DEVICE_MAX_CONNECTIONS`, 8 by
/// default): two streams on one queue run one after the other.
fn work_queues() -> usize {
    std::env::var("CUDA_DEVICE_MAX_CONNECTIONS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=32).contains(n))
        .unwrap_or(8)
}

/// Adds 1 to `bufs[0]` and, in a nested scope, nests the rest.
fn nest(t: &gpu::Scope<'_, '_>, bufs: &mut [gpu::Buffer<f32>]) -> gpu::Result<()> {
    let Some((b, rest)) = bufs.split_first_mut() else {
        return Ok(());
    };
    add_scalar(t, b, 1.0)?;
    t.scope(|inner| {
        inner.spawn(move |t| nest(t, rest));
        Ok(())
    })
}

/// As many siblings as the device has work queues, all but one blocked on
/// a gate: the last still completes its work and synchronizes it, after a
/// burst of tasks made streams beyond the warm ones and gave them back. A
/// stream on a gated sibling's queue would wait for the gate (on CUDA; the
/// host backend has no queues, and passes either way).
#[test]
fn the_last_sibling_runs_beside_one_gated_sibling_per_work_queue() {
    let rt = runtime();
    let queues = work_queues();
    let burst = 3 * queues;
    let mut bufs: Vec<gpu::Buffer<f32>> = (0..burst)
        .map(|_| rt.begin_task().unwrap().zeros(N).unwrap())
        .collect();
    rt.synchronize().unwrap();
    // The burst: a chain of nested tasks, each live (holding its stream)
    // while the next runs, so more live tasks than warm streams.
    gpu::scope_on(&rt, |s| {
        let all = &mut bufs[..];
        s.spawn(move |t| nest(t, all));
        Ok(())
    })
    .unwrap();
    rt.synchronize().unwrap();

    let g = rt.gate().unwrap();
    let queued = std::sync::atomic::AtomicUsize::new(0);
    let (gated, rest) = bufs.split_at_mut(queues - 1);
    let last = &mut rest[0];
    let (tx, rx) = mpsc::channel();
    let (g, queued) = (&g, &queued);
    gpu::scope_on(&rt, move |s| {
        for b in gated.iter_mut() {
            s.spawn(move |t| {
                gate(t, g, TIMEOUT)?;
                add_scalar(t, b, 1.0)?;
                queued.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        s.spawn(move |t| {
            let start = std::time::Instant::now();
            while queued.load(Ordering::SeqCst) < queues - 1 {
                assert!(start.elapsed() < TIMEOUT, "the gated siblings never queued");
                std::thread::yield_now();
            }
            add_scalar(t, last, 2.0)?;
            let v = t.to_vec(last)?;
            tx.send((v, g.is_open(), g.timed_out())).unwrap();
            Ok(())
        });
        let (v, open, timed_out) = rx.recv().expect("the last sibling reports");
        assert!(v.iter().all(|x| *x == 3.0), "it computed {:?}", &v[..4]);
        assert!(!open, "nobody opened the gate yet");
        assert!(
            !timed_out,
            "the last sibling's synchronize waited for the gate: its stream shares a work queue with a gated one"
        );
        g.open();
        Ok(())
    })
    .unwrap();
    assert!(!g.timed_out());
    for b in &bufs[..queues - 1] {
        assert!(b.to_vec().unwrap().iter().all(|x| *x == 2.0));
    }
    assert_no_races(&rt);
}
