//! `par_map`: host slice in, host slice out, a kernel in between, chunked
//! over pinned staging buffers so that the copies in, the compute and the
//! copies out of different chunks overlap.

use crate::scope::scope_on;
use gpu_sched::{Buffer, DeviceRepr, Error, Result, Runtime, Staging, TaskContext};

/// How [`par_map`] splits its work.
#[derive(Clone, Copy, Debug)]
pub struct PipelineOptions {
    /// Elements per chunk.
    pub chunk: usize,
    /// Chunks in flight at once: each is a task with its own stream and its
    /// own staging and device buffers.
    pub lanes: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            chunk: 1 << 22,
            lanes: 4,
        }
    }
}

/// Maps `input` to `output` through the device: each chunk is copied in,
/// `f` runs on it (`f(task, chunk_in, chunk_out)`), and the result is copied
/// back, with chunks spread over `opts.lanes` streams so that transfers in
/// both directions and compute overlap.
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `input` and `output` have the same
/// length; [`Error::ZeroChunk`]; the first error of `f` or of the runtime.
///
/// # Examples
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let input: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
/// let mut output = vec![0.0f32; input.len()];
/// let opts = gpu::PipelineOptions { chunk: 1024, lanes: 3 };
/// gpu::par_map(&input, &mut output, opts, |t, x, y| {
///     t.copy(x, y)?;
///     gpu_kernels::scale(t, y, 2.0)
/// })?;
/// assert_eq!(output[5_000], 10_000.0);
/// # Ok(()) }
/// ```
pub fn par_map<T, U, F>(input: &[T], output: &mut [U], opts: PipelineOptions, f: F) -> Result<()>
where
    T: DeviceRepr,
    U: DeviceRepr,
    F: Fn(&TaskContext, &Buffer<T>, &mut Buffer<U>) -> Result<()> + Sync,
{
    par_map_on(Runtime::global()?, input, output, opts, f)
}

/// [`par_map`] on a given runtime.
///
/// # Errors
///
/// As [`par_map`].
pub fn par_map_on<T, U, F>(
    rt: &Runtime,
    input: &[T],
    output: &mut [U],
    opts: PipelineOptions,
    f: F,
) -> Result<()>
where
    T: DeviceRepr,
    U: DeviceRepr,
    F: Fn(&TaskContext, &Buffer<T>, &mut Buffer<U>) -> Result<()> + Sync,
{
    if input.len() != output.len() {
        return Err(Error::LengthMismatch {
            what: "par_map's output",
            expected: input.len(),
            got: output.len(),
        });
    }
    if opts.chunk == 0 {
        return Err(Error::ZeroChunk);
    }
    let chunks = input.len().div_ceil(opts.chunk);
    let lanes = opts.lanes.clamp(1, chunks.max(1));
    let mut work: Vec<Vec<(&[T], &mut [U])>> = (0..lanes).map(|_| Vec::new()).collect();
    for (i, pair) in input
        .chunks(opts.chunk)
        .zip(output.chunks_mut(opts.chunk))
        .enumerate()
    {
        work[i % lanes].push(pair);
    }
    let f = &f;
    scope_on(rt, |s| {
        for lane in work {
            s.spawn(move |t| {
                let n = opts.chunk.min(lane.first().map_or(0, |(x, _)| x.len()));
                let mut stage_in = Staging::<T>::new(t.runtime(), n)?;
                let mut stage_out = Staging::<U>::new(t.runtime(), n)?;
                let mut d_in = t.alloc::<T>(n)?;
                let mut d_out = t.alloc::<U>(n)?;
                for (src, dst) in lane {
                    if src.len() == n {
                        stage_in.upload(t, src, &mut d_in)?;
                        f(t, &d_in, &mut d_out)?;
                        stage_out.download(t, &d_out, dst)?;
                    } else {
                        // The short last chunk gets buffers of its own size.
                        let mut x = t.alloc::<T>(src.len())?;
                        let mut y = t.alloc::<U>(src.len())?;
                        stage_in.upload(t, src, &mut x)?;
                        f(t, &x, &mut y)?;
                        stage_out.download(t, &y, dst)?;
                    }
                }
                Ok(())
            });
        }
        Ok(())
    })
}
