//! B7: host-device-host pipelines (`par_map`) against one stream and the
//! transfer bound.

use super::*;

/// B7: host -> device -> host over pinned memory: `par_map` against
/// copy-all/compute/copy-back on one stream, and the transfer bound (both
/// directions at once).
pub(crate) fn b7_pipeline(c: &mut Criterion) {
    let rt = rt();
    let n: usize = if cuda() { 1 << 28 } else { 1 << 20 }; // 1 GiB of f32 on the GPU
    let input: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut output = vec![0.0f32; n];
    let mut g = c.benchmark_group("B7");
    g.sample_size(10);
    let t = rt.begin_task().unwrap();
    let mut stage_in = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
    let mut stage_out = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
    let mut d_in = t.zeros::<f32>(n).unwrap();
    let mut d_out = t.zeros::<f32>(n).unwrap();
    g.bench_function("copy-compute-copy", |b| {
        b.iter(|| {
            stage_in.upload(&t, &input, &mut d_in).unwrap();
            k::scale_into(&t, &d_in, &mut d_out, 2.0).unwrap();
            stage_out.download(&t, &d_out, &mut output).unwrap();
        })
    });
    // The transfer bound: the same bytes in and out at once, pinned to
    // pinned, no compute, no host staging copies.
    g.bench_function("transfer-bound", |b| {
        let up = rt.begin_task().unwrap();
        let down = rt.begin_task().unwrap();
        let mut src = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
        let mut dst = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
        let mut d_a = up.zeros::<f32>(n).unwrap();
        let d_b = down.zeros::<f32>(n).unwrap();
        up.synchronize().unwrap();
        down.synchronize().unwrap();
        b.iter(|| {
            src.send(&up, &mut d_a).unwrap();
            dst.receive(&down, &d_b).unwrap();
            up.synchronize().unwrap();
            down.synchronize().unwrap();
        })
    });
    let mut pinned_in = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
    pinned_in.as_mut_slice().unwrap().copy_from_slice(&input);
    let mut pinned_out = gpu::memory::Staging::<f32>::new(rt, n).unwrap();
    // Check the pipeline once, outside the timing.
    gpu::iter::par_map_pinned(
        &mut pinned_in,
        &mut pinned_out,
        gpu::iter::PipelineOptions::default(),
        |t, x, y| k::scale_into(t, x, y, 2.0),
    )
    .unwrap();
    assert_eq!(pinned_out.as_slice().unwrap()[999], 1998.0);
    for (lanes, chunk) in [
        (4usize, 1usize << 22),
        (4, 1 << 21),
        (8, 1 << 21),
        (4, 1 << 23),
    ] {
        g.bench_function(format!("par-map-pinned-{lanes}x{}M", chunk >> 20), |b| {
            let opts = gpu::iter::PipelineOptions { chunk, lanes };
            b.iter(|| {
                gpu::iter::par_map_pinned(&mut pinned_in, &mut pinned_out, opts, |t, x, y| {
                    k::scale_into(t, x, y, 2.0)
                })
                .unwrap()
            })
        });
    }
    let opts = gpu::iter::PipelineOptions {
        chunk: 1 << 22,
        lanes: 8,
    };
    // Checked once, outside the timing (which a filter may skip).
    output.fill(0.0);
    gpu::par_map(&input, &mut output, opts, |t, x, y| {
        k::scale_into(t, x, y, 2.0)
    })
    .unwrap();
    assert_eq!(output[999], 1998.0);
    g.bench_function("par-map-pageable-8", |b| {
        b.iter(|| {
            gpu::par_map(&input, &mut output, opts, |t, x, y| {
                k::scale_into(t, x, y, 2.0)
            })
            .unwrap()
        })
    });
    // The host copies of that pipeline alone, as `Staging` makes them
    // (`gpu::memory::par_copy`: all of `input` into pinned memory, then a pinned
    // buffer out into `output`), no device work: the floor of any pipeline
    // that stages pageable memory this way.
    let pin_in = pinned_in.as_mut_slice().unwrap();
    let pin_out = pinned_out.as_slice().unwrap();
    g.bench_function("host-copies", |b| {
        b.iter(|| {
            gpu::memory::par_copy(pin_in, &input);
            gpu::memory::par_copy(&mut output, pin_out);
        })
    });
    g.finish();
}
