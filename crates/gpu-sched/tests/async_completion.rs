//! Completion as futures (`gpu_sched::FenceFuture`, `ToVecFuture`), under
//! tokio: a fence is awaited and checks the results it carries as
//! `Fence::synchronize` does; `to_vec_async` returns the data; while the
//! awaited work is held by a gate, the executor thread (a current-thread
//! runtime) goes on with other tasks, one of which opens the gate (a
//! blocked thread would leave the gate to time out); a future dropped
//! before its copy is done leaves the memory the copy writes alone; a
//! dropped future keeps no waker.

mod common;

use common::{backend_tests, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_sched::{Runtime, Staging};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// A current-thread tokio runtime: one thread runs every task, so a poll
/// that blocked would stop them all.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// A waker that counts nothing but its clones (through `Arc::strong_count`).
struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `f` once with `waker`.
fn poll_once<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    std::pin::Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// A fence of gated work, awaited on a current-thread runtime while
/// another task of that runtime opens the gate after 50 ms: the await
/// returns after the opening (the executor thread was free to run the
/// opener) and the fenced work is done.
fn awaiting_a_fence_blocks_no_executor_thread(rt: &Runtime) {
    let w = rt.begin_task().unwrap();
    let mut a = w.from_host(&[0.0f32; 256]).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 3.0).unwrap();
    let f = w.fence().unwrap();
    drop(w);
    let opened = AtomicBool::new(false);
    current_thread().block_on(async {
        let opener = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            opened.store(true, Ordering::SeqCst);
            g.open();
        };
        let wait = async {
            f.await.unwrap();
            assert!(
                opened.load(Ordering::SeqCst),
                "the fence completed before its gate opened"
            );
        };
        tokio::join!(opener, wait);
    });
    assert!(
        !g.timed_out(),
        "the gate timed out: the await blocked the thread"
    );
    assert_eq!(rt.begin_task().unwrap().to_vec(&a).unwrap(), [3.0; 256]);
}
backend_tests!(awaiting_a_fence_blocks_no_executor_thread);

/// `to_vec_async` of gated work returns the data written after the gate,
/// on a current-thread runtime whose other task opens the gate; and one
/// without a gate, at once.
fn to_vec_async_returns_the_data(rt: &Runtime) {
    let w = rt.begin_task().unwrap();
    let mut a = w.from_host(&[0.0f32; 1000]).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 5.0).unwrap();
    drop(w);
    // Another task: the copy is ordered after the gated writer through
    // the buffer.
    let data = a.to_vec_async().unwrap();
    current_thread().block_on(async {
        let opener = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            g.open();
        };
        let (_, v) = tokio::join!(opener, data);
        assert_eq!(v.unwrap(), [5.0; 1000]);
    });
    assert!(
        !g.timed_out(),
        "the gate timed out: the await blocked the thread"
    );
    let t = rt.begin_task().unwrap();
    let b = t.from_host(&[1u32, 2, 3]).unwrap();
    let empty = t.from_host::<u32>(&[]).unwrap();
    let (f, e) = (t.to_vec_async(&b).unwrap(), t.to_vec_async(&empty).unwrap());
    drop(t);
    current_thread().block_on(async {
        assert_eq!(f.await.unwrap(), [1, 2, 3]);
        assert_eq!(e.await.unwrap(), Vec::<u32>::new());
    });
}
backend_tests!(to_vec_async_returns_the_data);

/// Many requests at once on a multi-thread runtime, each a tokio task
/// that queues its work and awaits its copy.
fn concurrent_requests_get_their_own_data(rt: &Runtime) {
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    tokio_rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..32u32 {
            let rt = rt.clone();
            handles.push(tokio::spawn(async move {
                let data = {
                    let t = rt.begin_task().unwrap();
                    let mut b = t.from_host(&[0.0f32; 64]).unwrap();
                    k::fill(&t, &mut b, i as f32).unwrap();
                    t.to_vec_async(&b).unwrap()
                };
                (i, data.await.unwrap())
            }));
        }
        for h in handles {
            let (i, v) = h.await.unwrap();
            assert_eq!(v, [i as f32; 64], "request {i}");
        }
    });
}
backend_tests!(concurrent_requests_get_their_own_data);

/// A `to_vec_async` future dropped while its copy is held by a gate (once
/// never polled, once after a poll registered it): the page-locked memory
/// the copy writes is not given back until the copy is done. A staging
/// buffer of the same size taken meanwhile (the cache hands out a block of
/// the same size) gets other memory: the copy, once the gate opens, does
/// not overwrite what the host wrote there. Once the copy is done the
/// memory does go back (no leak).
fn a_dropped_to_vec_async_future_keeps_the_memory_until_the_copy_is_done(rt: &Runtime) {
    let n = 4096;
    for poll_first in [false, true] {
        let w = rt.begin_task().unwrap();
        let mut a = w.from_host(&vec![0.0f32; n]).unwrap();
        let g = rt.gate().unwrap();
        // After the gate's own page-locked flags, with nothing cached.
        rt.release_cached_memory();
        let pinned_before = rt.live().pinned_bytes;
        k::gate(&w, &g, OPENED_BY_TEST).unwrap();
        k::fill(&w, &mut a, 9.0).unwrap();
        drop(w);
        let mut data = a.to_vec_async().unwrap();
        if poll_first {
            let waker = Arc::new(Noop).into();
            assert!(
                poll_once(&mut data, &waker).is_pending(),
                "the gate is closed"
            );
        }
        drop(data);
        let mut s = Staging::<f32>::new(rt, n).unwrap();
        s.as_mut_slice().unwrap().fill(-1.0);
        g.open();
        rt.synchronize().unwrap();
        assert!(!g.timed_out(), "the gate timed out");
        assert!(
            s.as_slice().unwrap().iter().all(|&x| x == -1.0),
            "the dropped future's copy wrote memory handed out again (poll first: {poll_first})"
        );
        drop(s);
        // The waiter gives the memory back to the cache once it saw the
        // copy done, on its own thread, maybe after the synchronize
        // returned: once it has, nothing is held beyond what was before
        // (the cache emptied each time; a block held for good stays).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            rt.release_cached_memory();
            let grown = rt.live().pinned_bytes - pinned_before;
            if grown == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped future's memory never came back ({grown} bytes more pinned)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
backend_tests!(a_dropped_to_vec_async_future_keeps_the_memory_until_the_copy_is_done);

/// A fence future dropped while registered keeps no clone of the waker;
/// one that completed keeps none either.
fn a_dropped_fence_future_keeps_no_waker(rt: &Runtime) {
    let w = rt.begin_task().unwrap();
    let mut a = w.from_host(&[0.0f32; 16]).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 1.0).unwrap();
    let noop = Arc::new(Noop);
    let waker: Waker = noop.clone().into();
    let mut f = w.fence().unwrap().wait_async();
    assert!(poll_once(&mut f, &waker).is_pending(), "the gate is closed");
    assert!(poll_once(&mut f, &waker).is_pending(), "the gate is closed");
    assert_eq!(
        Arc::strong_count(&noop),
        3,
        "the registration holds one waker"
    );
    drop(f);
    assert_eq!(
        Arc::strong_count(&noop),
        2,
        "the dropped future left its waker"
    );
    let mut f = w.fence().unwrap().wait_async();
    assert!(poll_once(&mut f, &waker).is_pending(), "the gate is closed");
    g.open();
    current_thread().block_on(&mut f).unwrap();
    assert_eq!(
        Arc::strong_count(&noop),
        2,
        "the completed future left its waker"
    );
    assert!(!g.timed_out(), "the gate timed out");
}
backend_tests!(a_dropped_fence_future_keeps_no_waker);

/// A waker that panics when woken (the caller's code).
struct Panics;
impl Wake for Panics {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

/// A future polled with a waker that panics when its gated work ends: the
/// runtime's waiter survives the panic, so a later future of the same
/// runtime still completes (it hung before: the waiter thread died with
/// its queue still registered).
fn a_panicking_waker_does_not_stop_later_futures(rt: &Runtime) {
    let w = rt.begin_task().unwrap();
    let mut a = w.from_host(&[0.0f32; 16]).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 1.0).unwrap();
    let mut first = w.fence().unwrap().wait_async();
    assert!(poll_once(&mut first, &Waker::from(Arc::new(Panics))).is_pending());
    g.open();
    // Time for the waiter to wake the panicking waker (it ran on).
    std::thread::sleep(Duration::from_millis(200));
    // A second future on the same runtime, registered with the waiter
    // (its work is gated too), completes once its gate opens.
    let g2 = rt.gate().unwrap();
    k::gate(&w, &g2, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 2.0).unwrap();
    let second = w.fence().unwrap();
    drop(w);
    current_thread().block_on(async {
        let opener = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            g2.open();
        };
        let wait = async {
            tokio::time::timeout(Duration::from_secs(10), second)
                .await
                .expect("a later future hung after a waker panicked")
                .unwrap();
        };
        tokio::join!(opener, wait);
    });
    drop(first);
    assert_eq!(rt.begin_task().unwrap().to_vec(&a).unwrap(), [2.0; 16]);
}
backend_tests!(a_panicking_waker_does_not_stop_later_futures);
