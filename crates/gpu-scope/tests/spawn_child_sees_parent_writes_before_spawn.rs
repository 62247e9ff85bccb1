//! A spawned task is ordered after the work its parent submitted before the
//! spawn: the child reads the parent's values, and the hand-off needs no
//! device wait (the spawn's fence already ordered the child's stream).

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::diag::Reason;
use gpu_kernels::{add_scalar, copy, fill};

const N: usize = 4096;

#[test]
fn child_reads_what_the_parent_wrote_before_the_spawn() {
    let rt = runtime();
    // Nothing of the setup is left in flight: every hand-off below is about
    // the parent and the child only.
    let [mut a, mut seen, mut later] = zeroed(&rt, N);

    let child_counters = std::sync::Mutex::new(None);
    gpu::scope_on(&rt, |s| {
        fill(s, &mut a, 1.0)?;
        add_scalar(s, &mut a, 2.0)?; // a = 3 on the parent's stream
        let a = &a;
        let seen = &mut seen;
        let child_counters = &child_counters;
        s.spawn(move |t| {
            let before = t.runtime().counters();
            copy(t, a, seen)?; // reads the parent's `a`
            *child_counters.lock().unwrap() = Some(t.runtime().counters().since(&before));
            let v = t.to_vec(seen)?;
            assert!(v.iter().all(|x| *x == 3.0), "child saw {:?}", &v[..4]);
            Ok(())
        });
        // After the spawn: the parent keeps working; the child is not
        // ordered after this.
        fill(s, &mut later, 7.0)?;
        Ok(())
    })
    .unwrap();

    let d = child_counters.into_inner().unwrap().expect("the child ran");
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert_eq!(d.host_syncs, 0, "{d:?}");
    assert!(d.avoided(Reason::Ordered) >= 1, "{d:?}");
    assert!(later.to_vec().unwrap().iter().all(|x| *x == 7.0));
    assert_no_races(&rt);
}
