//! B4-B5: the seed's hand-off, and sibling tasks against one stream.

use super::*;

/// B4: the seed's hand-off. The parent fills `a`, spawns a child that adds
/// to `a` and takes a host-sync pointer, and runs 20x the child's work on
/// `b`. Returns the child's latency from the spawn.
fn handoff_once(
    a: &mut Buffer<f32>,
    b: &mut Buffer<f32>,
    parent_work: Option<Duration>,
) -> Duration {
    let mut lat = Duration::ZERO;
    let queued = std::sync::atomic::AtomicBool::new(false);
    gpu::scope(|s| {
        k::fill(s, a, 1.0)?;
        let (lat, queued) = (&mut lat, &queued);
        let t0 = Instant::now();
        s.spawn(move |t| {
            while !queued.load(std::sync::atomic::Ordering::Acquire) {
                std::hint::spin_loop();
            }
            k::add_scalar(t, a, 1.0)?;
            black_box(t.host_sync_ptr(a)?);
            *lat = t0.elapsed();
            Ok(())
        });
        if let Some(w) = parent_work {
            k::spin_touch(s, b, w)?;
        }
        queued.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    })
    .unwrap();
    gpu::synchronize().unwrap();
    lat
}

pub(crate) fn b4_handoff(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { 1 << 24 } else { 1 << 16 };
    let mut a = Buffer::<f32>::zeros(n).unwrap();
    let mut b = Buffer::<f32>::zeros(4096).unwrap();
    // The child's own work, alone on an idle device.
    let own = {
        let t = rt.begin_task().unwrap();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            t.synchronize().unwrap();
            let t0 = Instant::now();
            k::add_scalar(&t, &mut a, 1.0).unwrap();
            black_box(t.host_sync_ptr(&mut a).unwrap());
            best = best.min(t0.elapsed());
        }
        best
    };
    let parent_work = own * 20;
    let mut g = c.benchmark_group("B4");
    g.sample_size(20);
    g.bench_function("child-own-work", |bch| {
        let t = rt.begin_task().unwrap();
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                t.synchronize().unwrap();
                let t0 = Instant::now();
                k::add_scalar(&t, &mut a, 1.0).unwrap();
                black_box(t.host_sync_ptr(&mut a).unwrap());
                total += t0.elapsed();
            }
            total
        })
    });
    // The baseline: the same scope, the parent doing no later work. The
    // child's latency then includes waiting for the parent's fill, which
    // it needs; what B4 measures is what the parent's *later* work adds.
    for (name, facts, work) in [
        ("child-latency-alone", true, None),
        ("child-latency", true, Some(parent_work)),
        ("child-latency-wait-all", false, Some(parent_work)),
    ] {
        rt.set_facts(facts);
        g.bench_function(name, |bch| {
            bch.iter_custom(|iters| (0..iters).map(|_| handoff_once(&mut a, &mut b, work)).sum())
        });
    }
    rt.set_facts(true);
    g.finish();
}

/// B5: 8 sibling tasks, each a small long kernel; against the same on one
/// stream, and one kernel alone (the ideal).
pub(crate) fn b5_siblings(c: &mut Criterion) {
    let rt = rt();
    let work = Duration::from_millis(if cuda() { 2 } else { 5 });
    let mut g = c.benchmark_group("B5");
    g.sample_size(20);
    let t = rt.begin_task().unwrap();
    g.bench_function("one-kernel", |b| {
        b.iter(|| {
            k::spin(&t, work).unwrap();
            t.synchronize().unwrap();
        })
    });
    g.bench_function("one-stream", |b| {
        b.iter(|| {
            for _ in 0..8 {
                k::spin(&t, work).unwrap();
            }
            t.synchronize().unwrap();
        })
    });
    for (name, facts) in [("siblings", true), ("siblings-wait-all", false)] {
        rt.set_facts(facts);
        g.bench_function(name, |b| {
            b.iter(|| {
                gpu::scope(|s| {
                    for _ in 0..8 {
                        s.spawn(move |t| k::spin(t, work));
                    }
                    Ok(())
                })
                .unwrap();
                rt.synchronize().unwrap();
            })
        });
    }
    rt.set_facts(true);
    g.finish();
}
