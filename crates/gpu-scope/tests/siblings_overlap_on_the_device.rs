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
