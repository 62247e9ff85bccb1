//! B13: a DAG of 10,000 small tasks, against its raw floor (PyTorch and
//! CUDA graphs in `torch_dag.py`).

use super::*;

/// B13 (issue 16): the task graph of `b13.rs` (10,000 tasks over 256
/// buffers; 500 on the host backend) through `gpu::scope` / `spawn`, from
/// the spawns to the end of its GPU work; and one of its spins, back to
/// back, to set against PyTorch's (`torch_dag.py` runs the graph in
/// PyTorch). The buffers are reset before each run, outside the timing.
pub(crate) fn b13_dag(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { b13::TASKS } else { b13::HOST_TASKS };
    let tasks = b13::dag(b13::SEED, n, b13::BUFFERS);
    let fp = b13::fingerprint(&tasks);
    for (len, want) in b13::FINGERPRINTS {
        assert!(
            len != n || fp == want,
            "B13: the graph's fingerprint {fp:#x} is not {want:#x}"
        );
    }
    let pristine = b13::pristine().unwrap();
    let mut bufs = b13::buffers().unwrap();
    let t = rt.begin_task().unwrap();
    let reset = |bufs: &mut [std::sync::RwLock<Buffer<f32>>]| {
        b13::reset(&t, &pristine, bufs).unwrap();
        t.synchronize().unwrap();
    };
    // Once, checked against the host model, before timing.
    reset(&mut bufs);
    b13::run(&bufs, &tasks).unwrap();
    gpu::synchronize().unwrap();
    let want = b13::model(&tasks);
    assert!(
        want.iter().flatten().all(|v| v.is_finite()),
        "B13: the model overflowed"
    );
    let check = |bufs: &[std::sync::RwLock<Buffer<f32>>], when: &str| {
        if let Some(b) = b13::first_difference(bufs, &want).unwrap() {
            panic!("B13 ({when}): buffer {b} differs from the host model");
        }
        let races = rt.races();
        assert!(races.is_empty(), "B13 ({when}): races: {races:?}");
    };
    check(&bufs, "the first run");
    let mut g = c.benchmark_group("B13");
    g.sample_size(10);
    g.bench_function("gpu-scope", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                reset(&mut bufs);
                let t0 = Instant::now();
                b13::run(&bufs, &tasks).unwrap();
                gpu::synchronize().unwrap();
                total += t0.elapsed();
            }
            total
        })
    });
    // When the filter skipped it, this checks the first run again.
    check(&bufs, "the last timed run");
    // The same scope captured into one graph (`gpu::capture`) and replayed:
    // checked once, then the capture and the replay timed apart.
    let graph = b13::capture(&bufs, &tasks).unwrap();
    reset(&mut bufs);
    b13::launch(&t, &graph, &mut bufs).unwrap();
    t.synchronize().unwrap();
    check(&bufs, "the captured scope's first replay");
    g.bench_function("gpu-capture", |bch| {
        bch.iter(|| black_box(b13::capture(&bufs, &tasks).unwrap()))
    });
    g.bench_function("gpu-capture-replay", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                reset(&mut bufs);
                let t0 = Instant::now();
                b13::launch(&t, &graph, &mut bufs).unwrap();
                t.synchronize().unwrap();
                total += t0.elapsed();
            }
            total
        })
    });
    check(&bufs, "the last timed replay");
    for serial in [false, true] {
        b13_graphed(&mut g, &t, &pristine, &mut bufs, &tasks, &check, serial);
    }
    let one = rt.begin_task().unwrap();
    g.bench_function("spin-alone", |bch| {
        bch.iter_custom(|iters| {
            one.synchronize().unwrap();
            let t0 = Instant::now();
            for _ in 0..iters {
                k::spin(&one, b13::SPIN).unwrap();
            }
            one.synchronize().unwrap();
            t0.elapsed()
        })
    });
    if cuda() {
        b13_raw_floor(&mut g, &tasks);
    }
    g.finish();
}

/// B13's floor for launching the graph kernel by kernel: the same kernels
/// (each task's spin, then one add a read) through raw `cuLaunchKernel`,
/// with no dependences, events or tracking at all, from one thread and from
/// as many threads as the pool has workers (task `i` on thread `i % n`, a
/// stream and two buffers of its own each). Each timed run includes starting
/// the threads and their streams (microseconds). What the driver's
/// submission costs, without which no launch-by-launch scheme can go.
fn b13_raw_floor(g: &mut Group<'_>, tasks: &[b13::Task]) {
    let rt = rt();
    let spin = rt.cu_function(&k::SPIN_NS).unwrap();
    let axpy = rt.cu_function(&k::AXPY_F32).unwrap();
    let spin_ns = b13::SPIN.as_nanos() as u64;
    let grid = (b13::LEN as u32).div_ceil(k::BLOCK);
    let run = |threads: usize| {
        std::thread::scope(|s| {
            for w in 0..threads {
                s.spawn(move || {
                    let t = rt.begin_task().unwrap();
                    let mut x = t.zeros::<f32>(b13::LEN).unwrap();
                    let mut y = t.zeros::<f32>(b13::LEN).unwrap();
                    let px = t.raw_ptr(&mut x).unwrap();
                    let py = t.raw_ptr(&mut y).unwrap();
                    let stream = t.cu_stream();
                    for task in tasks.iter().skip(w).step_by(threads) {
                        raw::launch(spin, stream, 1, 1, &mut [spin_ns]);
                        for _ in task.reads() {
                            let mut args = [1.0f32.to_bits() as u64, px, py, b13::LEN as u64];
                            raw::launch(axpy, stream, grid, k::BLOCK, &mut args);
                        }
                    }
                    t.synchronize().unwrap();
                });
            }
        })
    };
    let workers = gpu::current_num_threads();
    for (name, threads) in [
        ("raw-launches-1-thread".to_string(), 1),
        (format!("raw-launches-{workers}-threads"), workers),
    ] {
        g.bench_function(name, |bch| bch.iter(|| run(threads)));
    }
}

/// B13's buffers.
type Bufs = [std::sync::RwLock<Buffer<f32>>];

/// A row too long for criterion's ten samples and warm-up (a graph build,
/// 100 graphed runs: seconds each): the median of `runs` runs of `run`,
/// printed as a JSON row (`xtask bench` takes it with criterion's), every
/// run listed on stderr. Run unless the bench's filter rules it out (see
/// [`filter_may_select`]).
fn printed_row(name: &str, runs: usize, mut run: impl FnMut() -> Duration) {
    if !filter_may_select(name) {
        return;
    }
    let mut times: Vec<Duration> = (0..runs).map(|_| run()).collect();
    eprintln!("{name}: {runs} runs: {times:?}");
    times.sort();
    let ns = times[runs / 2].as_nanos() as f64;
    println!("{{\"name\": \"{name}\", \"value\": {ns:.1}, \"unit\": \"ns\"}}");
}

/// Whether the bench's filter (its first argument that is not a flag, a
/// criterion regex) may select `name`: no filter, or an alternative of it
/// whose literal start (up to its first regex metacharacter) begins
/// `name`. Loose on purpose: a row runs when in doubt.
fn filter_may_select(name: &str) -> bool {
    let Some(f) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        return true;
    };
    f.split('|').any(|alt| {
        let lit: String = alt
            .trim_start_matches('^')
            .chars()
            .take_while(|c| !"()[]{}.*+?\\$^".contains(*c))
            .collect();
        name.starts_with(&lit)
    })
}

/// The sum of `iters` runs' times, each run from B13's starting values
/// (`reset`, not timed) and timing itself.
fn from_reset(
    iters: u64,
    bufs: &mut Bufs,
    reset: &dyn Fn(&mut Bufs),
    mut run: impl FnMut(&Bufs) -> Duration,
) -> Duration {
    (0..iters)
        .map(|_| {
            reset(bufs);
            run(bufs)
        })
        .sum()
}

/// B13's check of the buffers against the host model, after `what`.
type Check<'a> = dyn Fn(&[std::sync::RwLock<Buffer<f32>>], &str) + 'a;

/// B13 through a graphed scope (`gpu::Graphed`, issue 26), checked first:
/// a fresh one's first run (a build) and a second run (a replay), each
/// from the starting values and equal to the host model. Then timed, with
/// the tasks as jobs of the pool (`gpu-graphed-*`) and run at their spawn
/// (`gpu-graphed-serial-*`, `Graphed::serial`): `-build`, a fresh one's
/// first run until it returns (its graph built and launched; waited for
/// outside the timing), against PyTorch's capture and instantiation of
/// the DAG (`B13-build`, serial; the median of 5, [`printed_row`]) and one
/// plain run of the scope (`B13-build-vs-plain`); `-replay`,
/// one more run of a built one, to the end of its work (criterion);
/// serial only, `-100`, 100 runs of a fresh one (the build included) to
/// the end of their GPU work, against PyTorch's capture of the DAG and
/// 100 replays (`B13-iter`; the median of 3); and the host part of a
/// replay per task, with its parts ([`b13::replay_host_parts`]).
fn b13_graphed(
    g: &mut Group<'_>,
    t: &gpu::TaskContext,
    pristine: &[Buffer<f32>],
    bufs: &mut [std::sync::RwLock<Buffer<f32>>],
    tasks: &[b13::Task],
    check: &Check<'_>,
    serial: bool,
) {
    let rt = rt();
    let name = if serial {
        "gpu-graphed-serial"
    } else {
        "gpu-graphed"
    };
    let fresh = || gpu::Graphed::on(rt).serial(serial);
    let reset = |bufs: &mut [std::sync::RwLock<Buffer<f32>>]| {
        b13::reset(t, pristine, bufs).unwrap();
        t.synchronize().unwrap();
    };
    let mut graphed = fresh();
    for (run, what) in ["the graphed scope's build", "the graphed scope's replay"]
        .into_iter()
        .enumerate()
    {
        reset(bufs);
        b13::run_graphed(&mut graphed, bufs, tasks).unwrap();
        gpu::synchronize().unwrap();
        check(bufs, what);
        let st = graphed.stats();
        eprintln!(
            "B13: {what} ({name}): body {:?}, graph {:?} ({} nodes, {} edges)",
            st.last_body, st.last_graph, st.nodes, st.edges
        );
        assert_eq!(
            (st.builds, st.replays),
            (1, run as u64),
            "B13: {what}: {st:?}"
        );
    }
    let iterations = if cuda() { 100 } else { 5 };
    if serial {
        printed_row(&format!("B13/{name}-{iterations}"), 3, || {
            from_reset(1, bufs, &reset, |bufs| {
                let t0 = Instant::now();
                let mut fresh = fresh();
                for _ in 0..iterations {
                    b13::run_graphed(&mut fresh, bufs, tasks).unwrap();
                }
                gpu::synchronize().unwrap();
                assert_eq!(fresh.stats().builds, 1, "B13: one build");
                t0.elapsed()
            })
        });
    }
    printed_row(&format!("B13/{name}-build"), 5, || {
        from_reset(1, bufs, &reset, |bufs| {
            let t0 = Instant::now();
            let mut fresh = fresh();
            b13::run_graphed(&mut fresh, bufs, tasks).unwrap();
            let took = t0.elapsed();
            gpu::synchronize().unwrap();
            took
        })
    });
    g.bench_function(format!("{name}-replay"), |bch| {
        bch.iter_custom(|iters| {
            from_reset(iters, bufs, &reset, |bufs| {
                let t0 = Instant::now();
                b13::run_graphed(&mut graphed, bufs, tasks).unwrap();
                gpu::synchronize().unwrap();
                t0.elapsed()
            })
        })
    });
    check(
        bufs,
        &format!("the graphed scope's last timed replay ({name})"),
    );
    // Serial only: the host part of a replay per task, and its parts
    // (`B13-graphed-host-per-task`, issue 38 item 4).
    let row = "B13/gpu-graphed-replay-host-per-task";
    if serial && filter_may_select(row) {
        let p = b13::replay_host_parts(&mut graphed, t, pristine, bufs, tasks, 20).unwrap();
        eprintln!("{row}: the medians of 20 replays: {p:?}");
        print!("{}", p.rows(tasks.len()));
        check(bufs, "the graphed scope's replays of its host parts");
    }
}
