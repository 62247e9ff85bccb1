//! `par_map` over pageable memory: every element of every chunk comes back
//! mapped, whatever the lanes and chunk size (several chunks a lane, using
//! its two staging buffers in turn, and a short last chunk), with no race.

mod common;

#[test]
fn every_chunk_comes_back_mapped() {
    let rt = common::host();
    let input: Vec<f32> = (0..10_007).map(|i| i as f32).collect();
    for (chunk, lanes) in [(1000, 1), (1000, 3), (64, 4), (10_007, 2), (20_000, 1)] {
        let mut output = vec![-1.0f32; input.len()];
        let opts = gpu::iter::PipelineOptions { chunk, lanes };
        gpu::iter::par_map_on(&rt, &input, &mut output, opts, |t, x, y| {
            gpu_kernels::scale_into(t, x, y, 2.0)
        })
        .unwrap();
        let bad = output
            .iter()
            .enumerate()
            .find(|&(i, &y)| y != 2.0 * i as f32);
        assert_eq!(bad, None, "chunk {chunk}, lanes {lanes}");
    }
    assert_eq!(rt.races(), Vec::<String>::new());
}

/// Review 3 (issue 23), defect 5: `par_map_pinned` over a non-global
/// runtime's staging buffers ran its lanes on the global runtime and failed
/// with `WrongDevice`. It runs on the buffers' runtime now, and staging
/// buffers of two runtimes are refused. Failed before the fix at the first
/// `unwrap` (`WrongDevice`).
#[test]
fn par_map_pinned_runs_on_the_staging_buffers_runtime() {
    let rt = common::host();
    let n = 5_000;
    let mut input = gpu::memory::Staging::<f32>::new(&rt, n).unwrap();
    for (i, x) in input.as_mut_slice().unwrap().iter_mut().enumerate() {
        *x = i as f32;
    }
    let mut output = gpu::memory::Staging::<f32>::new(&rt, n).unwrap();
    let opts = gpu::iter::PipelineOptions {
        chunk: 1000,
        lanes: 2,
    };
    gpu::iter::par_map_pinned(&mut input, &mut output, opts, |t, x, y| {
        assert!(t.runtime().same(&rt), "a lane on another runtime");
        gpu_kernels::scale_into(t, x, y, 2.0)
    })
    .unwrap();
    let out = output.as_slice().unwrap();
    assert!(out.iter().enumerate().all(|(i, &y)| y == 2.0 * i as f32));
    assert_eq!(rt.races(), Vec::<String>::new());
    // An output of another runtime: refused, nothing copied.
    let other = common::host();
    let mut elsewhere = gpu::memory::Staging::<f32>::new(&other, n).unwrap();
    let e = gpu::iter::par_map_pinned(&mut input, &mut elsewhere, opts, |t, x, y| {
        gpu_kernels::scale_into(t, x, y, 2.0)
    })
    .unwrap_err();
    assert!(matches!(e, gpu::Error::WrongDevice { .. }), "{e:?}");
}
