//! T12 through the public API (X1): a task three spawns below the root uses
//! the root's buffer with no device wait. Each spawn's fence carries what
//! its stream was ordered after, so the great-grandchild's stream is
//! ordered after the root's write without ever waiting on the root's
//! stream itself.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::diag::Reason;
use gpu_kernels::add_scalar;
use std::sync::Mutex;

const N: usize = 2048;

#[test]
fn a_task_three_spawns_deep_uses_the_roots_buffer_without_waiting() {
    let rt = runtime();
    let [mut a] = zeroed(&rt, N);

    let seen = Mutex::new(None);
    gpu::scope_on(&rt, |root| {
        add_scalar(root, &mut a, 1.0)?; // stamped on the root's stream
        let (a, seen) = (&mut a, &seen);
        root.spawn(move |child| {
            child.spawn(move |grandchild| {
                grandchild.spawn(move |deep| {
                    // Only `a` is touched: one earlier use (the root's
                    // write) is examined.
                    let before = deep.runtime().counters();
                    add_scalar(deep, a, 1.0)?;
                    *seen.lock().unwrap() = Some(deep.runtime().counters().since(&before));
                    Ok(())
                });
                Ok(())
            });
            Ok(())
        });
        Ok(())
    })
    .unwrap();

    let d = seen.into_inner().unwrap().expect("the deep task ran");
    assert_eq!(d.avoided(Reason::Ordered), 1, "{d:?}");
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert_eq!(d.host_syncs, 0, "{d:?}");
    assert!(a.to_vec().unwrap().iter().all(|x| *x == 2.0));
    assert_no_races(&rt);
}
