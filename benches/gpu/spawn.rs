//! B8 and B10: spawn and join costs, against the bare launch and Rayon.

use super::*;

/// B8: spawn + join of a task that launches one kernel, against the bare
/// launch.
pub(crate) fn b8_spawn(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(256).unwrap();
    let mut g = c.benchmark_group("B8");
    g.bench_function("bare-launch", |b| {
        let mut i = 0;
        b.iter(|| {
            k::fill(&t, &mut a, 1.0).unwrap();
            drain(&t, i, 1024);
            i += 1;
        })
    });
    if cuda() {
        let f = rt.cu_function(&k::FILL_F32).unwrap();
        let mut x = t.zeros::<f32>(256).unwrap();
        let p = t.raw_ptr(&mut x).unwrap();
        g.bench_function("raw-launch", |b| {
            let mut i = 0;
            let mut args = [p, 1.0f32.to_bits() as u64, 256];
            b.iter(|| {
                raw::launch(f, t.cu_stream(), 1, k::BLOCK, &mut args);
                drain(&t, i, 1024);
                i += 1;
            })
        });
    }
    for (name, facts) in [("spawn-join", true), ("spawn-join-wait-all", false)] {
        rt.set_facts(facts);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                gpu::scope(|s| {
                    s.spawn(|t| k::fill(t, &mut a, 1.0));
                    Ok(())
                })
                .unwrap();
                if i % 1024 == 1023 {
                    rt.synchronize().unwrap();
                }
                i += 1;
            })
        });
    }
    rt.set_facts(true);
    // The same from a worker thread of the pool: the spawn goes to the
    // worker's own queue, no wake-up from outside.
    g.bench_function("spawn-join-in-pool", |b| {
        b.iter_custom(|iters| {
            let a = &mut a;
            gpu::install(move || {
                let start = Instant::now();
                for i in 0..iters {
                    gpu::scope(|s| {
                        s.spawn(|t| k::fill(t, a, 1.0));
                        Ok(())
                    })
                    .unwrap();
                    if i % 1024 == 1023 {
                        rt.synchronize().unwrap();
                    }
                }
                start.elapsed()
            })
        })
    });
    // Where spawn + join's time goes: the pieces, each measured alone.
    g.bench_function("part-empty-scope", |b| {
        b.iter(|| gpu::scope(|_s| Ok(())).unwrap())
    });
    g.bench_function("part-spawn-empty-task", |b| {
        b.iter(|| {
            gpu::scope(|s| {
                s.spawn(|_t| Ok(()));
                Ok(())
            })
            .unwrap()
        })
    });
    g.bench_function("part-begin-task", |b| {
        b.iter(|| black_box(rt.begin_task().unwrap()))
    });
    if cuda() {
        // What begin_task pays the driver: one query of an idle stream.
        t.synchronize().unwrap();
        g.bench_function("part-raw-stream-query", |b| {
            b.iter(|| assert!(raw::stream_query(t.cu_stream())))
        });
        // What it pays instead for a stream whose last task submitted work:
        // a query of the event that task recorded as it ended.
        let ev = rt.event().unwrap();
        t.record(&ev).unwrap();
        t.synchronize().unwrap();
        g.bench_function("part-raw-event-query", |b| {
            b.iter(|| assert!(raw::event_query(ev.cu_event())))
        });
    }
    g.bench_function("part-fence-and-wait", |b| {
        let other = rt.begin_task().unwrap();
        let mut i = 0;
        b.iter(|| {
            let f = t.fence().unwrap();
            other.wait_fence(f).unwrap();
            drain(&other, i, 1024);
            i += 1;
        })
    });
    g.finish();
}

/// A join tree of empty tasks, `depth` levels: `2^depth - 1` joins.
fn gpu_tree(s: &gpu::Scope<'_, '_>, depth: u32) -> gpu::Result<()> {
    if depth == 0 {
        return Ok(());
    }
    s.join(|a| gpu_tree(a, depth - 1), |b| gpu_tree(b, depth - 1))?;
    Ok(())
}

/// The same tree through Rayon.
fn rayon_tree(depth: u32) {
    if depth == 0 {
        return;
    }
    rayon_core::join(|| rayon_tree(depth - 1), || rayon_tree(depth - 1));
}

/// B10 (DESIGN "Streams are a resource", DESIGN "Benchmarks added"): task overhead with no GPU work, against Rayon in the same
/// binary, each from a worker thread of its own pool of the same size: a
/// depth-16 join tree (65,535 joins) and 100,000 empty spawns in one scope.
pub(crate) fn b10_rayon(c: &mut Criterion) {
    let threads = gpu::current_num_threads();
    let rayon = rayon_core::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut g = c.benchmark_group("B10");
    g.sample_size(10);
    g.bench_function("join-tree-gpu", |b| {
        b.iter(|| gpu::install(|| gpu::join(|a| gpu_tree(a, 15), |b| gpu_tree(b, 15))).unwrap())
    });
    g.bench_function("join-tree-rayon", |b| {
        b.iter(|| rayon.install(|| rayon_tree(16)))
    });
    const SPAWNS: usize = 100_000;
    g.bench_function("spawns-gpu", |b| {
        b.iter(|| {
            gpu::install(|| {
                gpu::scope(|s| {
                    for _ in 0..SPAWNS {
                        s.spawn(|_t| Ok(()));
                    }
                    Ok(())
                })
            })
            .unwrap()
        })
    });
    g.bench_function("spawns-rayon", |b| {
        b.iter(|| {
            rayon.install(|| {
                rayon_core::scope(|s| {
                    for _ in 0..SPAWNS {
                        s.spawn(|_| {});
                    }
                })
            })
        })
    });
    g.finish();
}
