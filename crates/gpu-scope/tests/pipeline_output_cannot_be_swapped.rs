//! DESIGN "Soundness": `par_map_pinned` hands its closure `&mut` to each chunk's output
//! buffer, and copies that buffer into the pinned output without staging.
//! A closure that puts a larger buffer in its place got a copy past the end
//! of the host memory (safe code writing out of bounds); now the length is
//! checked after the closure, before the copy. Runs on the global runtime:
//! the GPU when there is one (`GPU_BACKEND=cuda` on the GPU machine), the
//! host backend in CI.

mod common;

use common::assert_no_races;
use gpu::iter::PipelineOptions;
use gpu::memory::Staging;
use gpu::Error;

#[test]
fn par_map_pinned_refuses_a_swapped_output_buffer() {
    let rt = gpu::runtime().unwrap();
    let mut input = Staging::<f32>::new(rt, 16).unwrap();
    input.as_mut_slice().unwrap().fill(1.0);
    let mut output = Staging::<f32>::new(rt, 16).unwrap();
    let opts = PipelineOptions { chunk: 8, lanes: 2 };
    let e = gpu::iter::par_map_pinned(&mut input, &mut output, opts, |t, _x, y| {
        *y = t.zeros::<f32>(1 << 20)?;
        Ok(())
    })
    .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");

    // The same pipeline without the swap still works.
    gpu::iter::par_map_pinned(&mut input, &mut output, opts, |t, x, y| {
        gpu_kernels::scale_into(t, x, y, 3.0)
    })
    .unwrap();
    assert!(output.as_slice().unwrap().iter().all(|&v| v == 3.0));
    assert_no_races(rt);
}
