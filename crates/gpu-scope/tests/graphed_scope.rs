//! `gpu::Graphed` (issue 26, DESIGN "Graphs without capture by hand"): a scope run again and again that
//! becomes a graph by itself. On the runtime of `common::runtime()`: the
//! host backend in CI, the GPU where `GPU_BACKEND=cuda` (the bundle's
//! runs), where the graph's branches run concurrently and a missing
//! dependence shows as a wrong value. The host backend replays a graph in
//! another order at each launch, so a missing dependence shows there too.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::{Buffer, Error, Graphed, Runtime};
use gpu_kernels as k;
use gpu_testkit::b13;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex};

fn all(b: &Buffer<f32>, want: f32) -> bool {
    b.to_vec().unwrap().iter().all(|&v| v == want)
}

/// The first run builds, the later ones replay the same graph; each run's
/// work is ordered after the previous one's through the buffers (a chain
/// of adds), and spawned tasks are branches ordered after their spawner's
/// work before the spawn.
#[test]
fn the_first_run_builds_and_later_runs_replay() {
    let rt = runtime();
    let n = 4096;
    let [mut x, mut acc, mut y] = zeroed::<3>(&rt, n);
    let mut parts = zeroed::<4>(&rt, n);
    let mut g = Graphed::on(&rt);
    for round in 1..=5 {
        g.scope(|s| {
            k::fill(s, &mut x, 1.0)?;
            let x = &x;
            for (i, p) in parts.iter_mut().enumerate() {
                // After the fill (the spawner's work before the spawn).
                s.spawn(move |t| {
                    k::fill(t, p, i as f32)?;
                    k::axpy(t, 1.0, x, p)
                });
            }
            k::axpy(s, 2.0, x, &mut acc)?; // acc grows by 2 each run
            let acc = &acc;
            let y = &mut y;
            s.spawn(move |t| k::scale_into(t, acc, y, 0.5));
            Ok(())
        })
        .unwrap();
        assert!(all(&acc, 2.0 * round as f32), "round {round}: acc");
        assert!(all(&y, round as f32), "round {round}: y after acc");
        for (i, p) in parts.iter().enumerate() {
            assert!(all(p, i as f32 + 1.0), "round {round}: part {i}");
        }
    }
    let st = g.stats();
    assert_eq!((st.builds, st.replays, st.updates), (1, 4, 0), "{st:?}");
    // fill, axpy, 4 x (fill, axpy), scale_into.
    assert_eq!(st.nodes, 11);
    assert_no_races(&rt);
}

/// Other buffers at the same places: the kernel nodes' arguments are set in
/// place (no new build), and the values follow the buffers of each run;
/// with the tasks as jobs, and run at their spawn (where a run that
/// touches other memory than the last leaves its trail).
#[test]
fn changed_pointers_update_the_graph_in_place() {
    for serial in [false, true] {
        changed_pointers_update_the_graph_in_place_as(serial);
    }
}

fn changed_pointers_update_the_graph_in_place_as(serial: bool) {
    let rt = runtime();
    let n = 1024;
    let mut bufs = zeroed::<4>(&rt, n);
    let mut g = Graphed::on(&rt).serial(serial);
    for round in 0..6usize {
        let (lo, hi) = bufs.split_at_mut(2);
        let (a, b) = if round % 2 == 0 {
            (&mut lo[0], &mut hi[0])
        } else {
            (&mut lo[1], &mut hi[1])
        };
        let v = round as f32;
        g.scope(|s| {
            k::fill(s, a, v)?;
            let a = &*a;
            s.spawn(move |t| k::scale_into(t, a, b, 3.0));
            Ok(())
        })
        .unwrap();
        let (a, b) = if round % 2 == 0 {
            (&bufs[0], &bufs[2])
        } else {
            (&bufs[1], &bufs[3])
        };
        assert!(
            all(a, v) && all(b, 3.0 * v),
            "serial {serial}, round {round}"
        );
    }
    let st = g.stats();
    // Rounds 1-5 replay, each with both nodes' pointers changed; round 2
    // and 4 set them back.
    assert_eq!((st.builds, st.replays, st.updates), (1, 5, 5), "{st:?}");
    assert_eq!(st.nodes_updated, 10);
    assert_no_races(&rt);
}

/// A serial scope whose runs follow their last one (DESIGN "Graphs
/// without capture by hand", "Following the last run"): runs alike replay
/// as they are, a scalar that changes is set in place, and the run after
/// it is compared with the graph as updated (a stale comparison would
/// launch the old scalar); a run that writes other memory leaves the trail
/// and has its pointers set.
#[test]
fn a_serial_run_like_the_last_replays_and_a_changed_scalar_is_still_set() {
    let rt = runtime();
    let n = 1024;
    let [mut a, mut b, mut c] = zeroed::<3>(&rt, n);
    let mut g = Graphed::on(&rt).serial(true);
    let scalars = [1.0f32, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0];
    for (round, &v) in scalars.iter().enumerate() {
        // Round 5 writes `c` instead of `b`: the run leaves its trail
        // there (other memory), and its nodes' pointers change.
        let last = if round == 5 { &mut c } else { &mut b };
        g.scope(|s| {
            k::fill(s, &mut a, v)?;
            let a = &a;
            s.spawn(move |t| k::scale_into(t, a, last, 2.0));
            Ok(())
        })
        .unwrap();
        assert!(all(&a, v), "round {round}: a");
        let out = if round == 5 { &c } else { &b };
        assert!(all(out, 2.0 * v), "round {round}: the scaled copy");
    }
    let st = g.stats();
    // Updated in place: round 2 (the fill's scalar), 4 (the scalar back),
    // 5 (the scale's pointer), 6 (the pointer back, and the scalar).
    assert_eq!((st.builds, st.replays, st.updates), (1, 6, 4), "{st:?}");
    assert_eq!(st.nodes_updated, 5);
    assert_no_races(&rt);
}

/// A run of another shape (more tasks, another kernel) builds a new graph;
/// the next run of the first shape builds again (one graph is kept).
#[test]
fn another_shape_builds_a_new_graph() {
    let rt = runtime();
    let n = 512;
    let mut bufs = zeroed::<3>(&rt, n);
    let mut g = Graphed::on(&rt);
    for (round, tasks) in [2usize, 2, 3, 3, 2].into_iter().enumerate() {
        g.scope(|s| {
            for b in bufs.iter_mut().take(tasks) {
                s.spawn(move |t| k::fill(t, b, round as f32));
            }
            Ok(())
        })
        .unwrap();
        for b in bufs.iter().take(tasks) {
            assert!(all(b, round as f32), "round {round}");
        }
    }
    let st = g.stats();
    assert_eq!((st.builds, st.replays), (3, 2), "{st:?}");
    // A scalar that changes is an argument: set in place.
    let mut a = zeroed::<1>(&rt, n);
    let mut g = Graphed::on(&rt);
    for v in [1.0f32, 2.0, 3.0] {
        g.scope(|s| k::fill(s, &mut a[0], v)).unwrap();
        assert!(all(&a[0], v));
    }
    assert_eq!((g.stats().builds, g.stats().updates), (1, 2));
    assert_no_races(&rt);
}

/// Runs recorded with the same tasks in the same order (a serial scope's)
/// are compared without sorting; what differs still counts: another
/// kernel, or the same kernels whose buffers now make one follow the
/// other, builds anew (set in place, the second would race the first).
#[test]
fn the_same_order_with_other_kernels_or_dependencies_builds_anew() {
    let rt = runtime();
    let n = 512;
    let [mut a, mut b] = zeroed::<2>(&rt, n);
    let mut g = Graphed::on(&rt).serial(true);
    // Two fills, independent.
    let two_fills = |g: &mut Graphed, a: &mut Buffer<f32>, b: &mut Buffer<f32>, v: f32| {
        g.scope(|s| {
            s.spawn(move |t| k::fill(t, a, v));
            s.spawn(move |t| k::fill(t, b, v + 1.0));
            Ok(())
        })
        .unwrap()
    };
    two_fills(&mut g, &mut a, &mut b, 1.0);
    two_fills(&mut g, &mut a, &mut b, 2.0);
    assert_eq!((g.stats().builds, g.stats().replays), (1, 1));
    // The same tasks, the second a scale: another kernel.
    g.scope(|s| {
        s.spawn(|t| k::fill(t, &mut a, 3.0));
        s.spawn(|t| k::scale(t, &mut b, 2.0));
        Ok(())
    })
    .unwrap();
    assert!(all(&a, 3.0) && all(&b, 6.0));
    assert_eq!((g.stats().builds, g.stats().replays), (2, 1));
    two_fills(&mut g, &mut a, &mut b, 4.0);
    assert_eq!((g.stats().builds, g.stats().replays), (3, 1));
    // The same kernels, both on `a`: the second follows the first.
    let shared = Mutex::new(&mut a);
    g.scope(|s| {
        s.spawn(|t| k::fill(t, &mut **lock(&shared), 7.0));
        s.spawn(|t| k::fill(t, &mut **lock(&shared), 8.0));
        Ok(())
    })
    .unwrap();
    assert_eq!((g.stats().builds, g.stats().replays), (4, 1));
    assert!(all(&a, 8.0) && all(&b, 5.0));
    assert_no_races(&rt);
}

/// B13's task graph (the bench's own code, its smaller size), through a
/// graphed scope: twice from the starting values (a build, then a replay),
/// equal to the host model bit for bit each time, whatever order its
/// tasks ran in.
#[test]
fn the_b13_task_graph_runs_graphed_bit_for_bit() {
    let rt = Runtime::global().unwrap();
    let tasks = b13::dag(b13::SEED, b13::HOST_TASKS, b13::BUFFERS);
    let pristine = b13::pristine().unwrap();
    let mut bufs = b13::buffers().unwrap();
    let want = b13::model(&tasks);
    let t = rt.begin_task().unwrap();
    // The tasks as jobs, then run at their spawn: the same graph.
    let mut shapes = Vec::new();
    for serial in [false, true] {
        let mut g = Graphed::on(rt).serial(serial);
        for round in 0..3 {
            b13::reset(&t, &pristine, &mut bufs).unwrap();
            t.synchronize().unwrap();
            b13::run_graphed(&mut g, &bufs, &tasks).unwrap();
            let differs = b13::first_difference(&bufs, &want).unwrap();
            assert!(
                differs.is_none(),
                "serial {serial}, round {round}: buffer {differs:?} differs"
            );
        }
        let st = g.stats();
        assert_eq!((st.builds, st.replays, st.updates), (1, 2, 0), "{st:?}");
        shapes.push((st.nodes, st.edges));
    }
    assert_eq!(shapes[0], shapes[1], "(nodes, edges) as jobs, then serial");
    assert_no_races(rt);
}

/// A serial graphed scope runs each task at its spawn, on the spawning
/// thread, before the code after the spawn; tasks spawned from tasks too,
/// up to a depth, past which they are jobs (a chain of spawns deeper than
/// that still runs, and its graph is right).
#[test]
fn a_serial_graphed_scope_runs_tasks_at_their_spawn() {
    let rt = runtime();
    let n = 1024;
    let [mut a, mut b] = zeroed::<2>(&rt, n);
    let log = Mutex::new(Vec::new());
    let me = std::thread::current().id();
    let mut g = Graphed::on(&rt).serial(true);
    for round in 1..=2 {
        lock(&log).clear();
        g.scope(|s| {
            let log = &log;
            lock(log).push("body");
            s.spawn(|s| {
                lock(log).push("first");
                assert_eq!(std::thread::current().id(), me, "the spawner's thread");
                s.spawn(|_| {
                    lock(log).push("nested");
                    Ok(())
                });
                lock(log).push("first, after its spawn");
                k::fill(s, &mut a, round as f32)
            });
            lock(log).push("body, after the first spawn");
            s.spawn(|s| {
                lock(log).push("second");
                k::fill(s, &mut b, 2.0 * round as f32)
            });
            // A join: `a`, then `b`, here.
            s.join(
                |_| {
                    lock(log).push("join a");
                    Ok(())
                },
                |_| {
                    assert_eq!(std::thread::current().id(), me, "the joiner's thread");
                    lock(log).push("join b");
                    Ok(())
                },
            )?;
            Ok(())
        })
        .unwrap();
        assert_eq!(
            *lock(&log),
            [
                "body",
                "first",
                "nested",
                "first, after its spawn",
                "body, after the first spawn",
                "second",
                "join a",
                "join b"
            ]
        );
        assert!(all(&a, round as f32) && all(&b, 2.0 * round as f32));
    }
    // A chain of 40 spawns, each from the task before: the first ones at
    // their spawn, the deeper ones as jobs; each adds one to `a`, in order.
    fn chain<'s>(s: &gpu::Scope<'_, 's>, a: &'s Mutex<&'s mut Buffer<f32>>, left: u32) {
        if left == 0 {
            return;
        }
        s.spawn(move |s| {
            {
                let mut a = lock(a);
                k::add_scalar(s, &mut **a, 1.0)?;
            }
            chain(s, a, left - 1);
            Ok(())
        });
    }
    let mut c = zeroed::<1>(&rt, n).into_iter().next().unwrap();
    {
        let c = Mutex::new(&mut c);
        let c = &c;
        g.scope(|s| {
            chain(s, c, 40);
            Ok(())
        })
        .unwrap();
    }
    assert!(all(&c, 40.0), "{:?}", &c.to_vec().unwrap()[..4]);
    assert_no_races(&rt);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Copies and word fills go into the graph as nodes of their own.
#[test]
fn copies_and_fills_are_nodes() {
    let rt = runtime();
    let n = 2048;
    let [mut a, mut b, mut c] = zeroed::<3>(&rt, n);
    let mut g = Graphed::on(&rt);
    for round in 1..=3 {
        g.scope(|s| {
            k::fill(s, &mut a, round as f32)?;
            s.copy(&a, &mut b)?;
            s.memset_zero(&mut c)?;
            k::axpy(s, 1.0, &b, &mut c)
        })
        .unwrap();
        assert!(
            all(&b, round as f32) && all(&c, round as f32),
            "round {round}"
        );
    }
    assert_eq!((g.stats().builds, g.stats().nodes), (1, 4));
    assert_no_races(&rt);
}

/// What a graphed scope refuses, each a typed error before anything is
/// queued: nothing of the failed run runs, and the graphed scope (and the
/// runtime) stay usable.
#[test]
fn what_a_graph_cannot_take_is_refused_and_nothing_runs() {
    let rt = runtime();
    let n = 256;
    let [mut a, mut b] = zeroed::<2>(&rt, n);
    let mut g = Graphed::on(&rt);
    type Body<'a> = &'a mut (dyn FnMut(&gpu::Scope<'_, '_>) -> gpu::Result<()> + Send);
    let mut refused = |what: &str, body: Body<'_>| {
        let r = g.scope(|s| {
            k::fill(s, &mut a, 9.0)?; // recorded, never run
            body(s)
        });
        let e = r.unwrap_err();
        assert!(matches!(e.root(), Error::Capturing { .. }), "{what}: {e:?}");
        assert!(all(&a, 0.0), "{what}: the fill ran");
    };
    refused("to_vec", &mut |s| s.to_vec(&b).map(drop));
    refused("synchronize", &mut |s| s.synchronize());
    refused("event wait", &mut |s| {
        let e = s.runtime().event()?;
        s.wait(&e)
    });
    refused("event record", &mut |s| {
        let e = s.runtime().event()?;
        s.record(&e)
    });
    refused("host_sync_ptr", &mut |s| s.host_sync_ptr(&mut b).map(drop));
    refused(
        "a factorization (its workspace is an allocation)",
        &mut |s| {
            let mut y = zeroed::<1>(s.runtime(), 4);
            gpu::solver::Potrf::new(2).run(s, &mut y[0])
        },
    );
    // A body's own error: nothing runs either.
    let r = g.scope(|s| {
        k::fill(s, &mut a, 9.0)?;
        Err(Error::Unsupported("the body's"))
    });
    assert!(matches!(r, Err(Error::Unsupported("the body's"))));
    assert!(all(&a, 0.0));
    // Still usable.
    g.scope(|s| k::fill(s, &mut a, 2.0)).unwrap();
    assert!(all(&a, 2.0));
    assert_no_races(&rt);
}

/// A task's panic reaches the caller after every sibling ended; nothing
/// of the run was queued, and the next run works.
#[test]
fn a_panic_in_a_task_launches_nothing() {
    let rt = runtime();
    let [mut a, mut b] = zeroed::<2>(&rt, 128);
    let mut g = Graphed::on(&rt);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        g.scope(|s| {
            s.spawn(|t| k::fill(t, &mut a, 1.0));
            s.spawn(|_| panic!("task"));
            Ok(())
        })
    }));
    assert!(caught.is_err(), "the panic reached the caller");
    assert!(all(&a, 0.0), "nothing ran");
    g.scope(|s| k::fill(s, &mut b, 3.0)).unwrap();
    assert!(all(&b, 3.0));
    assert_no_races(&rt);
}

/// A buffer dropped inside the body is freed after the graph that uses it
/// (the free is deferred until the launch): its allocation is gone once
/// the work is done, and nothing raced.
#[test]
fn a_buffer_dropped_in_the_body_outlives_the_graph() {
    let rt = runtime();
    let n = 1 << 16;
    let [mut out] = zeroed::<1>(&rt, n);
    let before = rt.live().allocations;
    let mut g = Graphed::on(&rt);
    for round in 1..=3 {
        let mut tmp = zeroed::<1>(&rt, n).into_iter().next().unwrap();
        assert_eq!(rt.live().allocations, before + 1);
        g.scope(|s| {
            k::fill(s, &mut tmp, round as f32)?;
            k::axpy(s, 1.0, &tmp, &mut out)?;
            drop(tmp); // freed after the graph, not before
            Ok(())
        })
        .unwrap();
        rt.synchronize().unwrap();
    }
    // 1 + 2 + 3.
    assert!(all(&out, 6.0));
    rt.synchronize().unwrap();
    assert_eq!(rt.live().allocations, before, "the frees were carried out");
    assert_no_races(&rt);
}

/// Work outside the scope that gets hold of a buffer the scope used (here
/// through a lock, while the body runs) is refused: the graph that uses it
/// is not launched yet, and a wait for the scope's stream would not cover
/// it. After the scope, the same work goes through and sees the graph's
/// writes.
#[test]
fn outside_work_on_a_buffer_of_a_scope_in_progress_is_refused() {
    let rt = runtime();
    let x = Mutex::new(zeroed::<1>(&rt, 1024).into_iter().next().unwrap());
    let (used, outside_done) = (mpsc::channel::<()>(), mpsc::channel::<bool>());
    let mut g = Graphed::on(&rt);
    std::thread::scope(|ts| {
        let x = &x;
        let rt2 = rt.clone();
        let (rx_used, tx_done) = (used.1, outside_done.0);
        ts.spawn(move || {
            rx_used.recv().unwrap();
            let mut guard = x.lock().unwrap();
            let b: &mut Buffer<f32> = &mut guard;
            let r = gpu::scope_on(&rt2, |s| k::fill(s, b, 5.0));
            tx_done
                .send(matches!(r, Err(Error::Capturing { .. })))
                .unwrap();
        });
        let (tx_used, rx_done) = (used.0, outside_done.1);
        g.scope(move |s| {
            k::fill(s, &mut *x.lock().unwrap(), 1.0)?;
            tx_used.send(()).unwrap();
            // The outside thread tries while this body still runs.
            assert!(rx_done.recv().unwrap(), "the outside fill was refused");
            Ok(())
        })
        .unwrap();
    });
    assert!(all(&x.lock().unwrap(), 1.0));
    gpu::scope_on(&rt, |s| k::add_scalar(s, &mut *x.lock().unwrap(), 1.0)).unwrap();
    assert!(all(&x.lock().unwrap(), 2.0));
    assert_no_races(&rt);
}

/// Where a graphed run of B13's full graph spends its host time (a probe,
/// run by hand: `cargo test --release --test graphed_scope -- --ignored
/// --nocapture b13_host_time`).
#[test]
#[ignore = "a probe: prints times"]
fn b13_host_time() {
    let rt = Runtime::global().unwrap();
    let tasks = b13::dag(b13::SEED, b13::TASKS, b13::BUFFERS);
    let bufs = b13::buffers().unwrap();
    for serial in [false, true] {
        let mut g = Graphed::on(rt).serial(serial);
        for round in 0..4 {
            let t0 = std::time::Instant::now();
            b13::run_graphed(&mut g, &bufs, &tasks).unwrap();
            let st = g.stats();
            eprintln!(
                "serial {serial} round {round}: {:?} (body {:?}, graph {:?}), {st:?}",
                t0.elapsed(),
                st.last_body,
                st.last_graph
            );
            rt.synchronize().unwrap();
        }
    }
}

/// In a serial graphed scope, a join whose `a` panics still runs `b`, then
/// re-raises `a`'s panic; nothing is launched.
#[test]
fn a_serial_join_runs_b_after_a_panicked() {
    let rt = runtime();
    let [mut a] = zeroed::<1>(&rt, 256);
    let b_ran = std::sync::atomic::AtomicBool::new(false);
    let mut g = Graphed::on(&rt).serial(true);
    let r = catch_unwind(AssertUnwindSafe(|| {
        g.scope(|s| {
            s.join(
                |_| -> gpu::Result<()> { panic!("a side") },
                |t| {
                    b_ran.store(true, std::sync::atomic::Ordering::SeqCst);
                    k::fill(t, &mut a, 1.0)
                },
            )?;
            Ok(())
        })
    }));
    let p = r.expect_err("a's panic reaches the caller");
    assert_eq!(p.downcast_ref::<&str>(), Some(&"a side"));
    assert!(b_ran.load(std::sync::atomic::Ordering::SeqCst), "b ran");
    assert!(all(&a, 0.0), "nothing launched");
    assert_eq!(g.stats().builds, 0);
}
