//! B6 and B14: `par_chunks_mut` maps and `par_chunks` reductions against
//! one launch over it all.

use super::*;

/// B6: `par_chunks_mut` map over 2 GiB against one launch over it all.
pub(crate) fn b6_par_chunks(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { 1 << 29 } else { 1 << 20 };
    let mut buf = Buffer::<f32>::zeros(n).unwrap();
    let t = rt.begin_task().unwrap();
    let mut g = c.benchmark_group("B6");
    g.sample_size(20);
    g.bench_function("one-launch", |b| {
        b.iter(|| {
            k::scale(&t, &mut buf, 1.0).unwrap();
            t.synchronize().unwrap();
        })
    });
    g.bench_function("par-chunks", |b| {
        b.iter(|| {
            gpu::par_chunks_mut(&mut buf, n / 8)
                .for_each(|t, chunk| k::scale(t, chunk, 1.0))
                .unwrap();
            rt.synchronize().unwrap();
        })
    });
    g.finish();
}

/// B14: a sum over 1 GiB of f32 by chunks against one device reduction of
/// it all (`torch.sum` of the same data is in `torch_pipeline.py`), two
/// ways: `par_chunks(&x, n / 8).map(sum).sum()` (each chunk's task reduces
/// its chunk and reads the sum back; the sums are added on the host:
/// `par-chunks-sum`), and the chunks zipped with one element each of a
/// device buffer of partial sums, reduced on the device after them (one
/// host read: `par-chunks-sum-device`, what `ratio/B14` compares).
pub(crate) fn b14_reduce(c: &mut Criterion) {
    let rt = rt();
    let n: usize = if cuda() { 1 << 28 } else { 1 << 20 };
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
    let want: f64 = host.iter().map(|&v| f64::from(v)).sum();
    let x = Buffer::from_host(&host).unwrap();
    drop(host);
    let t = rt.begin_task().unwrap();
    let par_sum = || -> f32 {
        gpu::par_chunks(&x, n / 8)
            .map(|t, chunk| k::reduce::sum(t, &chunk))
            .sum()
            .unwrap()
    };
    let mut partials = Buffer::<f32>::zeros(8).unwrap();
    let mut par_sum_device = || -> f32 {
        gpu::scope(|s| {
            gpu::par_chunks(&x, n / 8)
                .zip(gpu::par_chunks_mut(&mut partials, 1))
                .for_each(|t, (chunk, mut out)| k::reduce::sum_into(t, &chunk, &mut out))?;
            k::reduce::sum(s, &partials)
        })
        .unwrap()
    };
    // All are right before any is timed (f32 accumulators: 1e-5).
    let one = f64::from(k::reduce::sum(&t, &x).unwrap());
    let par = f64::from(par_sum());
    let dev = f64::from(par_sum_device());
    for v in [one, par, dev] {
        assert!((v - want).abs() / want < 1e-5, "{v} vs {want}");
    }
    let mut g = c.benchmark_group("B14");
    g.sample_size(20);
    g.bench_function("one-reduction", |b| {
        b.iter(|| black_box(k::reduce::sum(&t, &x).unwrap()))
    });
    g.bench_function("par-chunks-sum", |b| b.iter(|| black_box(par_sum())));
    g.bench_function("par-chunks-sum-device", |b| {
        b.iter(|| black_box(par_sum_device()))
    });
    g.finish();
}
