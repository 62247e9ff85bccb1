//! The end of a scope orders the caller after every task spawned in it,
//! children and grandchildren alike: values read afterwards are the tasks'
//! results, and a nested scope (`Scope::scope`) hands its tasks' buffers
//! back to the enclosing task without a device wait.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu_kernels::{add_scalar, spin_touch};
use std::time::Duration;

const N: usize = 512;
const TASKS: usize = 4;

#[test]
fn values_after_the_scope_are_the_childrens_results() {
    let rt = runtime();
    let mut bufs: [_; TASKS] = zeroed(&rt, N);
    gpu::scope_on(&rt, |s| {
        for (i, b) in bufs.iter_mut().enumerate() {
            s.spawn(move |t| {
                // A long kernel: a reader not ordered after it would see 0.
                spin_touch(t, b, Duration::from_millis(20))?;
                add_scalar(t, b, i as f32)
            });
        }
        Ok(())
    })
    .unwrap();
    for (i, b) in bufs.iter().enumerate() {
        let v = b.to_vec().unwrap();
        assert!(
            v.iter().all(|x| *x == 1.0 + i as f32),
            "task {i}: {:?}",
            &v[..4]
        );
    }
    assert_no_races(&rt);
}

#[test]
fn grandchildren_spawned_from_children_are_joined_too() {
    let rt = runtime();
    let mut bufs: [_; 2 * TASKS] = zeroed(&rt, N);
    gpu::scope_on(&rt, |s| {
        for (i, pair) in bufs.chunks_mut(2).enumerate() {
            let [mine, grandchilds] = pair else {
                unreachable!()
            };
            s.spawn(move |child| {
                add_scalar(child, mine, 1.0)?;
                child.spawn(move |grandchild| {
                    spin_touch(grandchild, grandchilds, Duration::from_millis(20))?;
                    add_scalar(grandchild, grandchilds, 10.0 * i as f32)
                });
                Ok(())
            });
        }
        Ok(())
    })
    .unwrap();
    for (i, pair) in bufs.chunks(2).enumerate() {
        assert!(pair[0].to_vec().unwrap().iter().all(|x| *x == 1.0));
        let g = pair[1].to_vec().unwrap();
        assert!(
            g.iter().all(|x| *x == 1.0 + 10.0 * i as f32),
            "grandchild {i}: {:?}",
            &g[..4]
        );
    }
    assert_no_races(&rt);
}

#[test]
fn a_nested_scope_orders_the_enclosing_task_without_device_waits() {
    let rt = runtime();
    let mut bufs: [_; TASKS] = zeroed(&rt, N);
    gpu::scope_on(&rt, |s| {
        s.scope(|inner| {
            for b in bufs.iter_mut() {
                inner.spawn(move |t| {
                    spin_touch(t, b, Duration::from_millis(20))?;
                    // A grandchild inside the nested scope.
                    t.spawn(move |g| add_scalar(g, b, 1.0));
                    Ok(())
                });
            }
            Ok(())
        })?;
        // The enclosing task continues ordered after every task of the
        // nested scope: using their buffers needs no wait.
        let before = s.runtime().counters();
        for b in bufs.iter_mut() {
            add_scalar(s, b, 1.0)?;
        }
        let d = s.runtime().counters().since(&before);
        assert_eq!(d.device_waits, 0, "{d:?}");
        assert_eq!(d.host_syncs, 0, "{d:?}");
        // Each buffer's last writer is a finished grandchild: ordered by the
        // nested scope's join, or its stream was recycled (once idle), or
        // (the task's first operation, which binds its stream) on that
        // grandchild's stream, which the task took over (DESIGN "Streams
        // are a resource").
        assert!(d.avoided(gpu::diag::Reason::SameStream) <= 1, "{d:?}");
        assert_eq!(
            d.switches_avoided() + d.avoided(gpu::diag::Reason::SameStream),
            TASKS as u64,
            "{d:?}"
        );
        for b in bufs.iter() {
            let v = s.to_vec(b)?;
            assert!(v.iter().all(|x| *x == 3.0), "{:?}", &v[..4]);
        }
        Ok(())
    })
    .unwrap();
    assert_no_races(&rt);
}
