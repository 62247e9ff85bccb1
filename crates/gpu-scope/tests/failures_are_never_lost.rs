//! DESIGN "Where a failure goes": a factorization's failure (cuSOLVER's
//! `info`, known only after the device ran it) reaches the caller of every
//! API that ends or joins the task it happened in, wherever the task sits
//! (the caller's own task, a child, a grandchild behind a task with no GPU
//! work, a nested scope, a join's side, another device), and nowhere else:
//! an unrelated task's `to_vec` afterwards keeps its data, and nothing is
//! left for the runtime's `synchronize`.
//!
//! On the global runtime (the GPU where there is one, else the host
//! backend), plus a host runtime of two devices for "another device". The
//! cases run in one test each so that no other test of this binary leaves
//! failures on the global runtime in between.

use gpu::solver::{Potrf, Potrs};
use gpu::{Buffer, Error, Runtime, Scope};

/// Where in the covered tasks the failing factorization runs.
#[derive(Clone, Copy, Debug)]
enum At {
    /// The task of the API's body itself.
    Caller,
    /// A spawned task.
    Child,
    /// A grandchild, spawned in a nested scope of a child that queues no
    /// GPU work of its own.
    GrandchildBehindIdle,
    /// A grandchild as a `Scope::join` side of a child with no GPU work.
    JoinSideBehindIdle,
    /// A task of a nested scope of the body's task.
    NestedScope,
}

const ALL: [At; 5] = [
    At::Caller,
    At::Child,
    At::GrandchildBehindIdle,
    At::JoinSideBehindIdle,
    At::NestedScope,
];

/// Factors `bad` (not positive definite, owned: a join side's spawns may
/// borrow nothing) at `at` under `s`.
fn fail_at(s: &Scope<'_, '_>, at: At, mut bad: Buffer<f64>) -> gpu::Result<()> {
    match at {
        At::Caller => Potrf::new(1).run(s, &mut bad),
        At::Child => {
            s.spawn(move |t| Potrf::new(1).run(t, &mut bad));
            Ok(())
        }
        At::GrandchildBehindIdle => {
            s.spawn(move |t| {
                t.scope(move |s2| {
                    s2.spawn(move |u| Potrf::new(1).run(u, &mut bad));
                    Ok(())
                })
            });
            Ok(())
        }
        At::JoinSideBehindIdle => {
            s.spawn(move |t| {
                t.join(|_| Ok(()), move |u| Potrf::new(1).run(u, &mut bad))
                    .map(drop)
            });
            Ok(())
        }
        At::NestedScope => s.scope(move |s2| {
            s2.spawn(move |u| Potrf::new(1).run(u, &mut bad));
            Ok(())
        }),
    }
}

fn bad() -> Buffer<f64> {
    Buffer::from_host(&[-1.0f64]).unwrap()
}

/// `r` is the factorization's failure; afterwards an unrelated task's wait
/// keeps its data and the runtime has nothing left to report.
#[track_caller]
fn reported<T: std::fmt::Debug>(entry: &str, at: impl std::fmt::Debug, r: gpu::Result<T>) {
    match r {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("{entry} at {at:?}: expected the factorization's failure, got {r:?}"),
    }
    unrelated_keeps_its_data(entry, at);
}

#[track_caller]
fn unrelated_keeps_its_data(entry: &str, at: impl std::fmt::Debug) {
    let x = Buffer::from_host(&[7.0f32, 8.0]).unwrap();
    assert_eq!(
        x.to_vec().unwrap(),
        [7.0, 8.0],
        "{entry} at {at:?}: an unrelated to_vec"
    );
    gpu::synchronize().unwrap_or_else(|e| panic!("{entry} at {at:?}: left for synchronize: {e}"));
}

#[test]
fn every_scope_entry_point_reports_a_failure_anywhere_below_it() {
    for at in ALL {
        reported("scope", at, gpu::scope(|s| fail_at(s, at, bad())));
        reported(
            "in_place_scope",
            at,
            gpu::in_place_scope(|s| fail_at(s, at, bad())),
        );
        reported(
            "Scope::scope",
            at,
            gpu::scope(|s| s.scope(|s2| fail_at(s2, at, bad()))),
        );
        reported(
            "join (a)",
            at,
            gpu::join(|s| fail_at(s, at, bad()), |_| Ok(())),
        );
        reported(
            "join (b)",
            at,
            gpu::join(|_| Ok(()), |s| fail_at(s, at, bad())),
        );
        reported(
            "Scope::join",
            at,
            gpu::scope(|s| s.join(|a| fail_at(a, at, bad()), |_| Ok(())).map(drop)),
        );
        let pool = gpu::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        reported(
            "ThreadPool::install",
            at,
            pool.install(|| gpu::scope(|s| fail_at(s, at, bad()))),
        );
        reported(
            "ThreadPool::scope",
            at,
            pool.scope(|s| fail_at(s, at, bad())),
        );
        reported(
            "ThreadPool::join",
            at,
            pool.join(|_| Ok(()), |s| fail_at(s, at, bad())),
        );
    }
}

/// Each chunk is a 1 x 1 matrix; chunk 1's is not positive definite.
fn chunks() -> Buffer<f64> {
    Buffer::from_host(&[4.0f64, -1.0, 9.0]).unwrap()
}

/// Under a chunk's task: at the caller, factors the chunk `c` (only chunk
/// 1 fails); below it (a chunk's item lives for the chunk's call only, so
/// no spawned task may take it), factors a new matrix that is not positive
/// definite in a child or a grandchild behind an idle child (every chunk
/// fails: the first is reported).
fn chunk_at(s: &Scope<'_, '_>, at: At, c: &mut gpu::ViewMut<'_, f64>) -> gpu::Result<()> {
    match at {
        At::Caller => Potrf::new(1).run(s, c),
        _ => fail_at(s, at, s.from_host(&[-1.0f64])?),
    }
}

#[test]
fn every_chunk_terminal_reports_a_failure_of_a_chunk() {
    for at in [At::Caller, At::Child, At::GrandchildBehindIdle] {
        let mut m = chunks();
        reported(
            "par_chunks_mut(..).for_each",
            at,
            gpu::par_chunks_mut(&mut m, 1).for_each(|s, c| chunk_at(s, at, c)),
        );
        let mut m = chunks();
        reported(
            "map(..).collect",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .map(|s, mut c| chunk_at(s, at, &mut c))
                .collect::<Vec<()>>(),
        );
        let mut m = chunks();
        reported(
            "map(..).sum",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .map(|s, mut c| chunk_at(s, at, &mut c).map(|()| 1u32))
                .sum::<u32>(),
        );
        let mut m = chunks();
        reported(
            "map(..).reduce",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .map(|s, mut c| chunk_at(s, at, &mut c).map(|()| 1u32))
                .reduce(|| 0, |a, b| a + b),
        );
        let mut m = chunks();
        reported(
            "map(..).max",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .map(|s, mut c| chunk_at(s, at, &mut c).map(|()| 1u32))
                .max(),
        );
        let mut m = chunks();
        reported(
            "map(..).for_each",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .map(|s, mut c| chunk_at(s, at, &mut c))
                .for_each(drop),
        );
        let mut m = chunks();
        reported(
            "enumerate().for_each",
            at,
            gpu::par_chunks_mut(&mut m, 1)
                .enumerate()
                .for_each(|s, (_, mut c)| chunk_at(s, at, &mut c)),
        );
        // In a given task: the chunks' results are that task's, reported
        // at its next wait (here the end of `with_task`).
        let mut m = chunks();
        reported(
            "in_task(..).for_each",
            at,
            gpu::with_task(|t| {
                gpu::par_chunks_mut(&mut m, 1)
                    .in_task(t)
                    .for_each(|s, mut c| chunk_at(s, at, &mut c))
            }),
        );
    }
}

#[test]
fn pipelines_and_one_off_tasks_report_a_failure() {
    let opts = gpu::iter::PipelineOptions { chunk: 2, lanes: 2 };
    let input = [1.0f64, 2.0, 3.0, 4.0, 5.0];
    let mut output = [0.0f64; 5];
    reported(
        "par_map",
        "a chunk",
        gpu::par_map(&input, &mut output, opts, |t, x, y| {
            gpu_kernels::scale_into(t, x, y, 1.0)?;
            let mut m = t.from_host(&[-1.0f64])?;
            Potrf::new(1).run(t, &mut m)
        }),
    );
    let rt = gpu::runtime().unwrap();
    let mut input = gpu::memory::Staging::<f64>::new(rt, 5).unwrap();
    let mut output = gpu::memory::Staging::<f64>::new(rt, 5).unwrap();
    reported(
        "par_map_pinned",
        "a chunk",
        gpu::iter::par_map_pinned(&mut input, &mut output, opts, |t, x, y| {
            gpu_kernels::scale_into(t, x, y, 1.0)?;
            let mut m = t.from_host(&[-1.0f64])?;
            Potrf::new(1).run(t, &mut m)
        }),
    );
    let mut m = bad();
    reported(
        "with_task",
        At::Caller,
        gpu::with_task(|t| Potrf::new(1).run(t, &mut m)),
    );
}

/// Inside a capture or a graphed scope a factorization is refused
/// (cuSOLVER is not declared capture-safe) before anything is queued: the
/// refusal is the caller's error, at once, and no check of a word nobody
/// writes is left to hang a task's end (it did: `Potrs` registered its
/// check before the refusal, and the task's drop then synchronized the
/// capturing stream until the process aborted).
#[test]
fn a_refused_factorization_in_a_capture_neither_hangs_nor_aborts() {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let done = done.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(30),
                    "a refused factorization in a capture hung"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let a = Buffer::from_host(&[4.0f64]).unwrap();
    let mut b = Buffer::from_host(&[8.0f64]).unwrap();
    let mut x = Buffer::<f64>::zeros(4).unwrap();
    let r = gpu::capture(|s| {
        s.spawn(|t| {
            // An operation captured first, then the refused one.
            gpu_kernels::fill(t, &mut x, 1.0)?;
            Potrs::new(1, 1).run(t, &a, &mut b)
        });
        Ok(())
    });
    assert!(matches!(r, Err(Error::Capturing { .. })), "{r:?}");
    let mut m = Buffer::from_host(&[4.0f64]).unwrap();
    let mut step = gpu::Graphed::new().unwrap();
    let r = step.scope(|s| {
        s.spawn(|t| {
            gpu_kernels::fill(t, &mut x, 2.0)?;
            Potrf::new(1).run(t, &mut m)
        });
        Ok(())
    });
    let e = r.unwrap_err();
    assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
    done.store(true, std::sync::atomic::Ordering::Release);
    watch.join().unwrap();
    unrelated_keeps_its_data("capture", "a spawned task");
}

/// A failure on another device of the group reaches the scope on the
/// first (host backend: two simulated devices).
#[test]
fn a_failure_on_another_device_reaches_the_scope() {
    let rt = Runtime::new(gpu::RuntimeOptions {
        backend: gpu::BackendChoice::Host,
        host_devices: 2,
        ..Default::default()
    })
    .unwrap();
    for behind_idle in [false, true] {
        let r = gpu::scope_on(&rt, |s| {
            s.spawn_on(1, move |t| {
                if behind_idle {
                    t.scope(|s2| {
                        s2.spawn(|u| {
                            let mut m = u.from_host(&[-1.0f64])?;
                            Potrf::new(1).run(u, &mut m)
                        });
                        Ok(())
                    })
                } else {
                    let mut m = t.from_host(&[-1.0f64])?;
                    Potrf::new(1).run(t, &mut m)
                }
            });
            Ok(())
        });
        match r {
            Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
            r => panic!("device 1 (behind an idle task: {behind_idle}): {r:?}"),
        }
        rt.synchronize().unwrap();
        rt.device(1).unwrap().synchronize().unwrap();
    }
}

/// A task dropped with a failed result unchecked neither blocks in its
/// drop nor hands the failure to an unrelated task: the next `to_vec` of
/// another buffer keeps its data, and the runtime's `synchronize` reports
/// it, once.
#[test]
fn a_dropped_failure_goes_to_synchronize_only() {
    let rt = Runtime::new(gpu::RuntimeOptions {
        backend: gpu::BackendChoice::Host,
        ..Default::default()
    })
    .unwrap();
    let x = gpu::with_task(|_| Ok(())).map(|()| 0);
    assert_eq!(x.unwrap(), 0);
    let keep = {
        let t = rt.begin_task().unwrap();
        t.from_host(&[3.0f32]).unwrap()
    };
    let before = rt.counters();
    {
        let t = rt.begin_task().unwrap();
        let mut a = t.from_host(&[-1.0f64]).unwrap();
        Potrf::new(1).run(&t, &mut a).unwrap();
        // `t` and `a` dropped here, the result unchecked.
    }
    let d = rt.counters().since(&before);
    assert_eq!(d.host_syncs, 0, "the drop waited on the host: {d:?}");
    let u = rt.begin_task().unwrap();
    assert_eq!(u.to_vec(&keep).unwrap(), [3.0]);
    drop(u);
    match rt.synchronize() {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the dropped task's failure, got {r:?}"),
    }
    rt.synchronize().unwrap();
}
