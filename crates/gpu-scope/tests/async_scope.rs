//! `gpu::scope_async` and the futures through `gpu` (on the global runtime:
//! the GPU where there is one, the host backend in CI): the await returns
//! once the scope's device work, its spawned tasks' included, is done,
//! without blocking a current-thread runtime (another task of it opens the
//! gate that holds the work); a spawned task's failed factorization comes
//! with the await; `to_vec_async` returned from a scope gives the data.

use gpu::solver::Potrf;
use gpu::Error;
use gpu_kernels as k;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn the_await_covers_the_spawned_tasks_device_work() {
    let rt = gpu::Runtime::global().unwrap();
    let mut a = gpu::Buffer::<f32>::zeros(512).unwrap();
    let mut b = gpu::Buffer::<f32>::zeros(512).unwrap();
    let g = rt.gate().unwrap();
    let opened = AtomicBool::new(false);
    current_thread().block_on(async {
        let opener = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            opened.store(true, Ordering::SeqCst);
            g.open();
        };
        let work = async {
            let r = gpu::scope_async(|s| {
                s.spawn(|t| {
                    k::gate(t, &g, Duration::from_secs(20))?;
                    k::fill(t, &mut a, 1.0)
                });
                s.spawn(|t| {
                    k::fill(t, &mut b, 2.0)?;
                    // Ends last: its stream is the one the pool hands out
                    // next, not the gated one.
                    std::thread::sleep(Duration::from_millis(20));
                    Ok(())
                });
                Ok(7)
            })
            .await;
            assert!(
                opened.load(Ordering::SeqCst),
                "the scope's await returned before its gated task ran"
            );
            r
        };
        let (_, r) = tokio::join!(opener, work);
        assert_eq!(r.unwrap(), 7);
    });
    assert!(
        !g.timed_out(),
        "the gate timed out: the await blocked the thread"
    );
    assert_eq!(a.to_vec().unwrap(), [1.0; 512]);
    assert_eq!(b.to_vec().unwrap(), [2.0; 512]);
}

#[test]
fn a_spawned_failure_comes_with_the_await() {
    let mut bad = gpu::with_task(|t| t.from_host(&[1.0f64, 2.0, 2.0, 1.0])).unwrap();
    let mut good = gpu::with_task(|t| t.from_host(&[4.0f64, 2.0, 2.0, 3.0])).unwrap();
    let r = current_thread().block_on(gpu::scope_async(|s| {
        s.spawn(|t| Potrf::new(2).run(t, &mut bad));
        s.spawn(|t| Potrf::new(2).run(t, &mut good));
        Ok(())
    }));
    match r {
        Err(Error::NotPositiveDefinite { minor: 2, .. }) => {}
        r => panic!("expected the spawned task's failure, got {r:?}"),
    }
    assert_eq!(good.to_vec().unwrap()[0], 2.0);
    // The body's error comes first; the failure is still checked (not
    // left for the runtime).
    let mut bad = gpu::with_task(|t| t.from_host(&[-1.0f64])).unwrap();
    let r: gpu::Result<()> = current_thread().block_on(gpu::scope_async(|s| {
        s.spawn(|t| Potrf::new(1).run(t, &mut bad));
        Err(Error::ZeroChunk)
    }));
    assert!(matches!(r, Err(Error::ZeroChunk)), "{r:?}");
    gpu::Runtime::global().unwrap().synchronize().unwrap();
}

#[test]
fn to_vec_async_from_a_scope() {
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    tokio_rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..8 {
            tasks.push(tokio::spawn(async move {
                let data = gpu::scope(|s| {
                    let mut x = s.from_host(&[i as f32; 100])?;
                    k::scale(s, &mut x, 3.0)?;
                    s.to_vec_async(&x)
                })
                .unwrap();
                (i, data.await.unwrap())
            }));
        }
        for t in tasks {
            let (i, v) = t.await.unwrap();
            assert_eq!(v, [3.0 * i as f32; 100]);
        }
    });
}
