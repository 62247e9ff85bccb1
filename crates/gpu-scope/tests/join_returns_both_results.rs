//! `join` runs two closures as tasks and returns both results, with the
//! caller ordered after both tasks' GPU work.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu_kernels::{add_scalar, fill, spin_touch};
use std::time::Duration;

const N: usize = 1000;

#[test]
fn global_join_returns_both_results() {
    let (a, b) = gpu::join(
        |s| {
            let mut x = s.zeros::<f32>(N)?;
            fill(s, &mut x, 2.0)?;
            s.to_vec(&x)
        },
        |t| {
            let mut y = t.zeros::<f64>(N)?;
            fill(t, &mut y, 3.0)?;
            add_scalar(t, &mut y, 0.5)?;
            Ok((t.to_vec(&y)?, "b"))
        },
    )
    .unwrap();
    assert!(a.iter().all(|v| *v == 2.0));
    assert_eq!(b.1, "b");
    assert!(b.0.iter().all(|v| *v == 3.5));
    assert_no_races(gpu::runtime().unwrap());
}

#[test]
fn scope_join_orders_the_task_after_both_sides() {
    let rt = runtime();
    let [mut x, mut y] = zeroed(&rt, N);
    gpu::scope_on(&rt, |s| {
        let (ra, rb) = s.join(
            |a| {
                spin_touch(a, &mut x, Duration::from_millis(10))?;
                Ok(1u32)
            },
            |b| {
                spin_touch(b, &mut y, Duration::from_millis(10))?;
                add_scalar(b, &mut y, 1.0)?;
                Ok(2u64)
            },
        )?;
        assert_eq!((ra, rb), (1, 2));
        // This task continues after both sides' GPU work.
        add_scalar(s, &mut x, 1.0)?;
        add_scalar(s, &mut y, 1.0)?;
        assert!(s.to_vec(&x)?.iter().all(|v| *v == 2.0));
        assert!(s.to_vec(&y)?.iter().all(|v| *v == 3.0));
        Ok(())
    })
    .unwrap();
    assert_no_races(&rt);
}

/// `install` runs its closure on a pool worker; scopes opened there work
/// as anywhere else.
#[test]
fn install_runs_scopes_on_a_worker() {
    let caller = std::thread::current().id();
    let (on, got) = gpu::install(|| -> gpu::Result<_> {
        let on = std::thread::current().id();
        let mut x = vec![0.0f32; 4];
        let mut buf = gpu::runtime()?.begin_task()?.zeros::<f32>(N)?;
        gpu::scope(|s| {
            let b = &mut buf;
            s.spawn(move |t| fill(t, b, 4.0));
            Ok(())
        })?;
        x.copy_from_slice(&buf.to_vec()?[..4]);
        Ok((on, x))
    })
    .unwrap();
    assert_ne!(on, caller, "ran on a worker");
    assert_eq!(got, vec![4.0; 4]);
}
