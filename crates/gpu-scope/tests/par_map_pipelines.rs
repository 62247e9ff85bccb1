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
        let opts = gpu::PipelineOptions { chunk, lanes };
        gpu::par_map_on(&rt, &input, &mut output, opts, |t, x, y| {
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
