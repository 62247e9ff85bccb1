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
/// let opts = gpu::iter::PipelineOptions { chunk: 1024, lanes: 3 };
/// gpu::par_map(&input, &mut output, opts, |t, x, y| {
///     gpu_kernels::scale_into(t, x, y, 2.0)
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

/// [`par_map`] over page-locked memory: the input and output live in
/// [`Staging`] buffers, so chunks move between host and device with no host
/// copy, at the transfer rate, each lane's copies in, compute and copies out
/// queued back to back on its stream. Returns once every copy completed.
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless the two buffers have the same capacity;
/// [`Error::WrongDevice`] unless both are of one runtime (the lanes run on
/// the input's runtime);
/// [`Error::ZeroChunk`]; the first error of `f` or of the runtime.
///
/// # Examples
///
/// ```
/// # fn main() -> gpu::Result<()> {
/// let rt = gpu::runtime()?;
/// let mut input = gpu::memory::Staging::<f32>::new(rt, 10_000)?;
/// input.as_mut_slice()?.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32);
/// let mut output = gpu::memory::Staging::<f32>::new(rt, 10_000)?;
/// let opts = gpu::iter::PipelineOptions { chunk: 1024, lanes: 3 };
/// gpu::iter::par_map_pinned(&mut input, &mut output, opts, |t, x, y| {
///     gpu_kernels::scale_into(t, x, y, 2.0)
/// })?;
/// assert_eq!(output.as_slice()?[5_000], 10_000.0);
/// # Ok(()) }
/// ```
pub fn par_map_pinned<T, U, F>(
    input: &mut Staging<T>,
    output: &mut Staging<U>,
    opts: PipelineOptions,
    f: F,
) -> Result<()>
where
    T: DeviceRepr,
    U: DeviceRepr,
    F: Fn(&TaskContext, &Buffer<T>, &mut Buffer<U>) -> Result<()> + Sync,
{
    let n = input.capacity();
    if output.capacity() != n {
        return Err(Error::LengthMismatch {
            what: "par_map_pinned's output",
            expected: n,
            got: output.capacity(),
        });
    }
    if opts.chunk == 0 {
        return Err(Error::ZeroChunk);
    }
    // The input's runtime runs the lanes: its streams copy to and from its
    // page-locked memory, and the output must be of the same device.
    let rt = input.runtime().clone();
    if !output.runtime().same(&rt) {
        return Err(Error::WrongDevice {
            what: "par_map_pinned's output (a staging buffer of another runtime than the input's)",
        });
    }
    // Both buffers stay borrowed until every lane synchronized its stream,
    // so the host cannot touch them while a copy is in flight.
    let src = input.settled_ptr()? as usize;
    let dst = output.settled_ptr()? as usize;
    let chunks = n.div_ceil(opts.chunk);
    let lanes = opts.lanes.clamp(1, chunks.max(1));
    let (chunk, f) = (opts.chunk, &f);
    scope_on(&rt, |s| {
        for lane in 0..lanes {
            s.spawn(move |t| {
                let full = chunk.min(n);
                let mut d_in = t.alloc::<T>(full)?;
                let mut d_out = t.alloc::<U>(full)?;
                for c in (lane..chunks).step_by(lanes) {
                    let start = c * chunk;
                    let len = chunk.min(n - start);
                    let (mut x, mut y);
                    let (xi, yo) = if len == full {
                        (&mut d_in, &mut d_out)
                    } else {
                        x = t.alloc::<T>(len)?;
                        y = t.alloc::<U>(len)?;
                        (&mut x, &mut y)
                    };
                    // SAFETY: `start + len <= n`, the capacity of both
                    // buffers, which stay borrowed (untouched by the host)
                    // until this lane's stream is synchronized below or,
                    // on an error, by the scope before it returns.
                    unsafe { t.copy_from_host_async(xi, (src as *const T).add(start))? };
                    f(t, xi, yo)?;
                    // `f` holds `&mut` to the output buffer and may have put
                    // another one in its place: the copy below writes
                    // `yo.len()` elements into host memory (DESIGN "Soundness").
                    if yo.len() != len {
                        return Err(Error::LengthMismatch {
                            what: "par_map_pinned's output buffer after the closure",
                            expected: len,
                            got: yo.len(),
                        });
                    }
                    // SAFETY: as above (`yo` has `len` elements, checked);
                    // lanes write disjoint chunks.
                    unsafe { t.copy_to_host_async(yo, (dst as *mut U).add(start))? };
                }
                t.synchronize()
            });
        }
        Ok(())
    })
}
