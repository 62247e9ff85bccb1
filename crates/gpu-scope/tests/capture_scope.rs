//! `gpu::capture`: a scope captured into one graph and replayed (R12,
//! issue 16). On the runtime of `common::runtime()`: the host backend in
//! CI, the GPU where `GPU_BACKEND=cuda` (the bundle's runs), where the
//! graph's branches run concurrently and a missing dependence shows as a
//! wrong value.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::raw::RawTask;
use gpu::{Buffer, Error, Runtime};
use gpu_kernels as k;
use gpu_sched::plumbing::{RuntimeHooks, TaskHooks};
use gpu_testkit::b13;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Spawn, join and buffer edges: eight children each fill their buffer and
/// add a shared input into it twenty times (readers of one buffer side by
/// side); the root, after the children (the scope's join), adds each into a
/// total; a child spawned after the root wrote `y` reads it. Three
/// launches: the total is three times the sum.
#[test]
fn a_captured_scope_replays_with_its_order() {
    let rt = runtime();
    let n = 4096;
    let mut parts = zeroed::<8>(&rt, n);
    let [mut x, mut y, mut z, mut total] = zeroed::<4>(&rt, n);
    let setup = rt.begin_task().unwrap();
    k::fill(&setup, &mut x, 0.5).unwrap();
    setup.synchronize().unwrap();
    let x = &x;
    let graph = gpu::capture_on(&rt, |s| {
        s.scope(|s| {
            for (i, p) in parts.iter_mut().enumerate() {
                s.spawn(move |t| {
                    k::fill(t, p, i as f32)?;
                    for _ in 0..20 {
                        k::axpy(t, 1.0, x, p)?;
                    }
                    Ok(())
                });
            }
            Ok(())
        })?;
        for p in &parts {
            k::axpy(s, 1.0, p, &mut total)?;
        }
        k::fill(s, &mut y, 3.0)?;
        let y = &y;
        let z = &mut z;
        s.spawn(move |t| k::scale_into(t, y, z, 2.0));
        Ok(())
    })
    .unwrap();
    // Nothing ran: the buffers are still zero.
    assert!(total.to_vec().unwrap().iter().all(|&v| v == 0.0));
    let t = rt.begin_task().unwrap();
    for _ in 0..3 {
        let mut l = t
            .launch_graph(&graph)
            .read(x)
            .write(&mut y)
            .write(&mut z)
            .write(&mut total);
        for p in parts.iter_mut() {
            l = l.write(p);
        }
        l.submit().unwrap();
    }
    t.synchronize().unwrap();
    // Each part is i + 20 * 0.5; the total three times their sum.
    let want: f32 = (0..8).map(|i| i as f32 + 10.0).sum::<f32>() * 3.0;
    assert!(total.to_vec().unwrap().iter().all(|&v| v == want), "total");
    for (i, p) in parts.iter().enumerate() {
        assert!(p.to_vec().unwrap().iter().all(|&v| v == i as f32 + 10.0));
    }
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 6.0), "z after y");
    assert_no_races(&rt);
}

/// B13's task graph (the bench's own code, its smaller size): captured
/// through `gpu::capture`, replayed twice from the starting values, equal
/// to the host model bit for bit each time.
#[test]
fn the_b13_task_graph_replays_bit_for_bit() {
    let rt = Runtime::global().unwrap();
    let tasks = b13::dag(b13::SEED, b13::HOST_TASKS, b13::BUFFERS);
    let pristine = b13::pristine().unwrap();
    let mut bufs = b13::buffers().unwrap();
    let graph = b13::capture(&bufs, &tasks).unwrap();
    let want = b13::model(&tasks);
    let t = rt.begin_task().unwrap();
    for round in 0..2 {
        b13::reset(&t, &pristine, &mut bufs).unwrap();
        b13::launch(&t, &graph, &mut bufs).unwrap();
        t.synchronize().unwrap();
        let differs = b13::first_difference(&bufs, &want).unwrap();
        assert!(
            differs.is_none(),
            "round {round}: buffer {differs:?} differs"
        );
    }
    assert_no_races(rt);
}

/// What a capture refuses, each a typed error that discards the capture and
/// leaves the runtime usable; a launch that leaves out a buffer the graph
/// touches is refused.
#[test]
fn a_capture_refuses_what_cannot_go_into_a_graph() {
    let rt = runtime();
    let [mut a, mut b] = zeroed::<2>(&rt, 1024);
    let refused = |what: &str, r: gpu::Result<gpu::sync::Graph>| match r {
        Err(Error::Capturing { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    refused(
        "an allocation",
        gpu::capture_on(&rt, |s| {
            s.spawn(|t| t.zeros::<f32>(8).map(drop));
            Ok(())
        }),
    );
    refused(
        "a host copy",
        gpu::capture_on(&rt, |s| {
            let a = &a;
            s.spawn(move |t| t.to_vec(a).map(drop));
            Ok(())
        }),
    );
    refused(
        "a synchronize",
        gpu::capture_on(&rt, |s| {
            k::fill(s, &mut a, 1.0)?;
            s.synchronize()
        }),
    );
    refused(
        "a raw pointer",
        gpu::capture_on(&rt, |s| {
            let b = &mut b;
            s.spawn(move |t| t.raw_ptr(b).map(drop));
            Ok(())
        }),
    );
    refused(
        "a nested capture",
        gpu::capture_on(&rt, |s| {
            s.spawn(|t| t.capture(|_| Ok(())).map(drop));
            Ok(())
        }),
    );
    // A host copy as a spawned task's first operation (the task has no
    // stream yet): the graph would keep the staging memory's address.
    let mut st = gpu::memory::Staging::<f32>::new(&rt, 1024).unwrap();
    refused(
        "a staging copy",
        gpu::capture_on(&rt, |s| {
            let (st, a) = (&mut st, &a);
            s.spawn(move |t| st.receive(t, a));
            Ok(())
        }),
    );
    let ev = rt.event().unwrap();
    refused("an event wait", gpu::capture_on(&rt, |s| s.wait(&ev)));
    refused(
        "a graph launch",
        gpu::capture_on(&rt, |s| {
            let inner = gpu::capture_on(&rt, |s| k::fill(s, &mut b, 1.0))?;
            s.launch_graph(&inner).write(&mut b).submit()
        }),
    );
    // A fence of the capture's tasks, kept and waited for outside it.
    let kept = Mutex::new(None);
    let g = gpu::capture_on(&rt, |s| {
        k::fill(s, &mut a, 1.0)?;
        *kept.lock().unwrap() = Some(s.fence()?);
        Ok(())
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    let f = kept.lock().unwrap().take().unwrap();
    assert!(matches!(t.wait_fence(f), Err(Error::Capturing { .. })));
    // The graph writes `a`: a launch without it, or with it read only, is
    // refused; with it, it runs.
    assert!(matches!(
        t.launch_graph(&g).write(&mut b).submit(),
        Err(Error::BadKernelArgs { .. })
    ));
    assert!(matches!(
        t.launch_graph(&g).read(&a).submit(),
        Err(Error::BadKernelArgs { .. })
    ));
    t.launch_graph(&g).write(&mut a).submit().unwrap();
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 1.0));
    // A task's panic reaches the caller; the next capture works.
    let p = catch_unwind(AssertUnwindSafe(|| {
        gpu::capture_on(&rt, |s| {
            s.spawn(|_| panic!("a task of the capture"));
            Ok(())
        })
    }));
    assert!(p.is_err());
    let g = gpu::capture_on(&rt, |s| {
        s.spawn(|t| k::fill(t, &mut b, 4.0));
        Ok(())
    })
    .unwrap();
    t.launch_graph(&g).write(&mut b).submit().unwrap();
    assert!(b.to_vec().unwrap().iter().all(|&v| v == 4.0));
    assert_no_races(&rt);
}

/// A task of a capture sent away and kept past the capture's end submits
/// nothing more: an error, not work on a stream another task now owns.
#[test]
fn a_task_kept_past_its_capture_submits_nothing() {
    let rt = runtime();
    let [mut a] = zeroed::<1>(&rt, 256);
    let kept = Mutex::new(None);
    let _g = gpu::capture_on(&rt, |s| {
        s.spawn(|t| {
            // How the pool starts a spawned task of the capture.
            *kept.lock().unwrap() = Some(rt.begin_task_in(&t.capture_handle())?);
            Ok(())
        });
        Ok(())
    })
    .unwrap();
    let t = kept.lock().unwrap().take().unwrap();
    assert!(matches!(k::fill(&t, &mut a, 1.0), Err(Error::CaptureEnded)));
}

/// Only the tasks that the capture's tasks start through their scope
/// handle (spawn, join, nested `s.scope`) join it. A top-level `gpu::scope`
/// inside a captured task runs at once, outside the graph; and a job of
/// the same Rayon pool that a worker runs while it waits inside the
/// capture does not join it (the capture is passed, never ambient).
#[test]
fn only_the_captures_own_tasks_join_it() {
    let rt = runtime();
    let [mut a, mut b, c] = zeroed::<3>(&rt, 256);
    let c = Mutex::new(c);
    let g = gpu::capture_on(&rt, |s| {
        let (a, b, rt) = (&mut a, &mut b, &rt);
        s.spawn(move |t| {
            k::fill(t, a, 1.0)?;
            // Runs now: its own task, not the capture's.
            gpu::scope_on(rt, |s| k::fill(s, b, 7.0))
        });
        Ok(())
    })
    .unwrap();
    assert!(b.to_vec().unwrap().iter().all(|&v| v == 7.0));
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 0.0));
    let t = rt.begin_task().unwrap();
    t.launch_graph(&g).write(&mut a).submit().unwrap();
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 1.0));
    // A user's two-worker Rayon pool: the capture's body waits at its end
    // for a slow task that the other worker took, and runs an unrelated
    // job meanwhile.
    let pool = rayon_core::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let unrelated = Mutex::new(None);
    let g = pool.install(|| {
        gpu::capture_on(&rt, |s| {
            let a = &mut a;
            s.spawn(move |t| {
                std::thread::sleep(std::time::Duration::from_millis(200));
                k::fill(t, a, 2.0)
            });
            std::thread::sleep(std::time::Duration::from_millis(30));
            let (c, unrelated, rt) = (&c, &unrelated, &rt);
            rayon_core::scope(|rs| {
                rs.spawn(move |_| {
                    let mut guard = c.lock().unwrap();
                    let c: &mut Buffer<f32> = &mut guard;
                    *unrelated.lock().unwrap() = Some(gpu::scope_on(rt, |s| k::fill(s, c, 5.0)));
                });
            });
            Ok(())
        })
    });
    let g = g.unwrap();
    unrelated.lock().unwrap().take().unwrap().unwrap();
    let c = c.into_inner().unwrap();
    assert!(
        c.to_vec().unwrap().iter().all(|&v| v == 5.0),
        "the unrelated job ran"
    );
    assert_eq!(g.touches().count(), 1, "the graph touches `a` alone");
    t.launch_graph(&g).write(&mut a).submit().unwrap();
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

/// `x[i] = v` (`fill_f32`) or `x[i] *= v` (`scale_f32`) through a raw
/// pointer: work the runtime does not track, ordered in a graph only by its
/// task's order, spawn and join.
fn raw_op(
    t: &gpu::TaskContext,
    kernel: &'static gpu::kernel::Builtin<(gpu::kernel::Out<f32>, f32, u64)>,
    p: u64,
    n: usize,
    v: f32,
) -> gpu::Result<()> {
    // SAFETY: `p` is the address of a live buffer of `n` f32 (the test
    // keeps it alive past every launch and reads it only after
    // synchronizing); the kernel touches `n` elements from it.
    unsafe {
        kernel.launch(
            t,
            gpu::kernel::LaunchConfig::for_elements(n, k::BLOCK),
            (gpu::kernel::Untracked::new(p, n), v, n),
        )
    }
}

/// Operations that share no tracked buffer keep their task's order and the
/// spawn and join edges in the graph (the host backend replays the
/// latest-captured ready operation first, so a missing edge shows).
#[test]
fn untracked_work_keeps_task_spawn_and_join_order() {
    let rt = runtime();
    let n = 512;
    let [mut w] = zeroed::<1>(&rt, n);
    let setup = rt.begin_task().unwrap();
    let p = setup.raw_ptr(&mut w).unwrap();
    setup.synchronize().unwrap();
    drop(setup);
    let g = gpu::capture_on(&rt, |s| {
        raw_op(s, &k::FILL_F32, p, n, 1.0)?;
        raw_op(s, &k::SCALE_F32, p, n, 2.0)?; // after the fill: task order
        s.scope(|s| {
            // After the parent's work before the spawn.
            s.spawn(move |t| raw_op(t, &k::SCALE_F32, p, n, 3.0));
            Ok(())
        })?;
        raw_op(s, &k::SCALE_F32, p, n, 5.0) // after the child: the join
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    for _ in 0..2 {
        t.launch_graph(&g).submit().unwrap();
        t.synchronize().unwrap();
        assert!(w.to_vec().unwrap().iter().all(|&v| v == 30.0));
    }
    assert_no_races(&rt);
}

/// A device-wide synchronize from another thread while a task captures:
/// the capturing stream is waited for up to the capture (it cannot be
/// synchronized: on CUDA that would fail and end the capture), and the
/// capture goes on.
#[test]
fn a_device_wide_synchronize_during_a_capture_waits_around_it() {
    let rt = runtime();
    let [mut a] = zeroed::<1>(&rt, 256);
    let (started, wait_started) = std::sync::mpsc::channel();
    let (synced, wait_synced) = std::sync::mpsc::channel();
    // Not a scoped thread: were the synchronize stuck behind the capture,
    // the test fails at the timeout below instead of waiting for it.
    let rt2 = rt.clone();
    let other = std::thread::spawn(move || {
        wait_started.recv().unwrap();
        synced.send(rt2.synchronize()).unwrap();
    });
    let a_ref = &mut a;
    let g = gpu::capture_on(&rt, move |s| {
        k::fill(s, a_ref, 3.0)?;
        started.send(()).unwrap();
        wait_synced
            .recv_timeout(common::TIMEOUT)
            .expect("the device-wide synchronize returned during the capture")
    })
    .unwrap();
    other.join().unwrap();
    let t = rt.begin_task().unwrap();
    t.launch_graph(&g).write(&mut a).submit().unwrap();
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 3.0));
}
