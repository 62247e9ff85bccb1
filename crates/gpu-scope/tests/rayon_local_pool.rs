//! rayon-core's tests that need a pool of their own (`thread_pool/test.rs`,
//! `join/test.rs`), ported to [`gpu::ThreadPool`]: `gpu` calls inside a
//! pool's `install` (and its `scope` and `join`) run their tasks on that
//! pool's workers, with or without GPU work.

mod common;

use common::rayon_port::{partition, random_data, tiny_gpu_op};
use gpu::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicUsize, Ordering};

fn pool(n: usize) -> ThreadPool {
    ThreadPoolBuilder::new().num_threads(n).build().unwrap()
}

/// Port of rayon-core `thread_pool/test.rs`: `check_thread_pool_new`, and
/// `current_num_threads` inside the pool.
#[test]
fn check_thread_pool_new() {
    let p = pool(22);
    assert_eq!(p.current_num_threads(), 22);
    assert_eq!(p.install(gpu::current_num_threads), 22);
    assert_eq!(
        p.current_thread_index(),
        None,
        "the test thread is no worker"
    );
    assert!(p.install(|| p.current_thread_index()).is_some());
}

fn quick_sort(s: &gpu::Scope<'_, '_>, v: &mut [u32], gpu_op: bool) -> gpu::Result<()> {
    if v.len() <= 1 {
        return Ok(());
    }
    if gpu_op && v.len() > 256 {
        tiny_gpu_op(s)?;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    s.join(|a| quick_sort(a, lo, gpu_op), |b| quick_sort(b, hi, gpu_op))?;
    Ok(())
}

/// Port of rayon-core `join/test.rs`: `sort_in_pool`, on a pool of its own,
/// CPU-only and with a tiny GPU operation in each large task.
#[test]
fn sort_in_pool() {
    let p = pool(4);
    for gpu_op in [false, true] {
        let mut v = random_data(if gpu_op { 1 << 14 } else { 1 << 18 });
        let mut want = v.clone();
        want.sort_unstable();
        p.install(|| gpu::join(|a| quick_sort(a, &mut v, gpu_op), |_b| Ok(())))
            .unwrap();
        assert_eq!(v, want);
    }
}

/// Port of rayon-core `thread_pool/test.rs`: `mutual_install`: each pool
/// installs into the other, and `gpu::join` in each runs there.
#[test]
fn mutual_install() {
    let p1 = pool(1);
    let p2 = pool(1);
    let ok = p1.install(|| {
        p2.install(|| {
            assert!(p2.current_thread_index().is_some());
            p1.install(|| {
                assert!(p1.current_thread_index().is_some());
                gpu::join(|_a| Ok(1), |_b| Ok(2)).map(|(a, b)| a + b == 3)
            })
        })
    });
    assert!(ok.unwrap());
}

/// A scope of a pool of its own: its tasks run on that pool's workers, with
/// or without GPU work.
#[test]
fn scope_runs_on_the_pool() {
    let p = pool(3);
    let on_pool = AtomicUsize::new(0);
    let gpu_ops = AtomicUsize::new(0);
    p.scope(|s| {
        for i in 0..64 {
            let (on_pool, gpu_ops, p) = (&on_pool, &gpu_ops, &p);
            s.spawn(move |t| {
                if p.current_thread_index().is_some() {
                    on_pool.fetch_add(1, Ordering::Relaxed);
                }
                if i % 4 == 0 {
                    tiny_gpu_op(t)?;
                    gpu_ops.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(on_pool.load(Ordering::Relaxed), 64);
    assert_eq!(gpu_ops.load(Ordering::Relaxed), 16);
    assert_eq!(p.join(|_a| Ok(3), |_b| Ok(4)).unwrap(), (3, 4));
}

/// Port of rayon-core `thread_pool/test.rs`: `workers_stop` (the work part,
/// then the pool dropped: its workers end once idle, nothing hangs).
#[test]
fn workers_stop() {
    fn join_a_lot(s: &gpu::Scope<'_, '_>, n: usize) -> gpu::Result<usize> {
        if n == 0 {
            return Ok(1);
        }
        let (a, b) = s.join(|a| join_a_lot(a, n - 1), |b| join_a_lot(b, n - 1))?;
        Ok(a + b)
    }
    let p = pool(2);
    let leaves = p
        .install(|| gpu::join(|a| join_a_lot(a, 10), |b| join_a_lot(b, 10)))
        .unwrap();
    assert_eq!(leaves, (1 << 10, 1 << 10));
    drop(p);
}
