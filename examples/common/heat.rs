//! The heat step both `07-own-kernel` and `05-stencil` run: a 5-point
//! stencil written in CUDA C, compiled at run time, with a host
//! implementation in safe Rust and a safe wrapper around its launch.
//! Included by the examples with `#[path = "common/heat.rs"] mod heat;`.
//!
//! One explicit step of the heat equation on a grid of `ny` rows of `nx`
//! columns (row-major) whose edge cells are fixed:
//! `u'[i][j] = u + k (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u)`
//! inside, `u'[i][j] = u[i][j]` on the edges (stable for `k <= 1/4`).

use gpu::kernel::{In, Kernel, Out};
use gpu::memory::{DeviceSlice, DeviceSliceMut};
use gpu::{Runtime, TaskContext};
use std::ops::Range;

/// The kernel, in CUDA C. It writes the rows `row0 .. row0 + rows` of the
/// next state (`rows * nx` elements of `out`) from the whole current state
/// `in` (`nx * ny` elements): one thread a cell, a 2D grid of 2D blocks.
pub const SRC: &str = r#"
extern "C" __global__ void heat_rows(float* out, const float* in,
                                     unsigned long long nx, unsigned long long ny,
                                     unsigned long long row0, unsigned long long rows,
                                     float k) {
    unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long r = blockIdx.y * (unsigned long long)blockDim.y + threadIdx.y;
    if (j >= nx || r >= rows) return;
    unsigned long long i = row0 + r;
    unsigned long long c = i * nx + j;
    float u = in[c];
    if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) {
        out[r * nx + j] = u;
    } else {
        out[r * nx + j] = u + k * (in[c - nx] + in[c + nx] + in[c - 1] + in[c + 1] - 4.0f * u);
    }
}
"#;

/// The kernel's name in [`SRC`].
const NAME: &str = "heat_rows";

/// Its signature: `(float* out, const float* in, unsigned long long nx,
/// unsigned long long ny, unsigned long long row0, unsigned long long rows,
/// float k)`.
type HeatRows = (Out<f32>, In<f32>, u64, u64, u64, u64, f32);

/// The host implementation: the same cells as the CUDA kernel, over slices
/// (run by the host backend, once per launch, in place of the kernel).
fn heat_rows_host(out: &mut [f32], inp: &[f32], nx: u64, ny: u64, row0: u64, rows: u64, k: f32) {
    let (nx, ny, row0) = (nx as usize, ny as usize, row0 as usize);
    for (r, row) in out.chunks_exact_mut(nx).take(rows as usize).enumerate() {
        let i = row0 + r;
        for (j, o) in row.iter_mut().enumerate() {
            let c = i * nx + j;
            let u = inp[c];
            *o = if i == 0 || j == 0 || i == ny - 1 || j == nx - 1 {
                u
            } else {
                u + k * (inp[c - nx] + inp[c + nx] + inp[c - 1] + inp[c + 1] - 4.0 * u)
            };
        }
    }
}

/// The stencil, loaded into a runtime.
#[derive(Clone, Debug)]
pub struct Heat {
    kernel: Kernel<HeatRows>,
    /// Whether NVRTC compiled [`SRC`] (always on CUDA; on the host backend
    /// only where NVRTC is installed, else only the kernel's name is read).
    pub nvrtc: bool,
}

impl Heat {
    /// Compiles [`SRC`] for `rt` (once per runtime) and looks the kernel up.
    /// `--fmad=false` keeps the GPU from fusing multiplies and adds, so it
    /// rounds as the CPU loop does.
    pub fn load(rt: &Runtime) -> gpu::Result<Heat> {
        let module = rt.compile_cuda(SRC, &["--fmad=false"])?;
        let nvrtc = module.is_compiled();
        let kernel = module.kernel::<HeatRows>(NAME)?.with_host(heat_rows_host);
        Ok(Heat { kernel, nvrtc })
    }

    /// Writes the rows `rows` of the next state of `inp`, a grid of `ny`
    /// rows of `nx` columns, to `out` (`rows.len()` rows of `nx`); `0..ny`
    /// is a whole step. One launch on `t`'s stream, of 2D blocks of 256
    /// threads (16 x 16 where there are 16 rows).
    ///
    /// # Errors
    ///
    /// [`gpu::Error::LengthMismatch`] unless `inp` has `nx * ny` elements
    /// and `out` `rows.len() * nx`; the launch's errors.
    ///
    /// # Panics
    ///
    /// If `rows` is empty or goes past `ny`.
    pub fn step(
        &self,
        t: &TaskContext,
        out: &mut (impl DeviceSliceMut<f32> + ?Sized),
        inp: &(impl DeviceSlice<f32> + ?Sized),
        (nx, ny): (usize, usize),
        rows: Range<usize>,
        k: f32,
    ) -> gpu::Result<()> {
        assert!(
            !rows.is_empty() && rows.end <= ny,
            "rows {rows:?} of a grid of {ny}"
        );
        same_len("the heat step's input", nx.checked_mul(ny), inp.len())?;
        same_len(
            "the heat step's output",
            nx.checked_mul(rows.len()),
            out.len(),
        )?;
        let by = rows.len().min(16) as u32;
        let bx = 256 / by;
        let cfg = gpu::kernel::LaunchConfig::for_grid_2d(nx, rows.len(), bx, by);
        let (row0, n_rows) = (rows.start, rows.len());
        // SAFETY: checked above: `inp` has `nx * ny` elements and `out`
        // `n_rows * nx` (the products without overflow), with
        // `row0 + n_rows <= ny`. A thread of the kernel (a cell of the host
        // implementation) with `j < nx`, `r < n_rows` writes `out[r * nx + j]`
        // only, and reads `in[c]`, `c = (row0 + r) * nx + j`, and, away
        // from the edges (`0 < row0 + r < ny - 1`, `0 < j < nx - 1`), the
        // four cells around it: all within the buffers; other threads
        // return. `out` is the only buffer written, and is passed `&mut`.
        unsafe {
            self.kernel
                .launch(t, cfg, (out, inp, nx, ny, row0, n_rows, k))
        }
    }
}

/// `Ok` when `expected` (`None`: overflowed) is `got`.
fn same_len(what: &'static str, expected: Option<usize>, got: usize) -> gpu::Result<()> {
    match expected {
        Some(e) if e == got => Ok(()),
        _ => Err(gpu::Error::LengthMismatch {
            what,
            expected: expected.unwrap_or(usize::MAX),
            got,
        }),
    }
}

/// A starting field: a hot top edge (1), a warm bump inside, the other
/// edges cold (0).
pub fn initial(nx: usize, ny: usize) -> Vec<f32> {
    let mut u = vec![0.0f32; nx * ny];
    for i in 0..ny {
        for j in 0..nx {
            let (y, x) = (i as f32 / ny as f32, j as f32 / nx as f32);
            let (dy, dx) = (y - 0.6, x - 0.35);
            u[i * nx + j] = if i == 0 {
                1.0
            } else if i == ny - 1 || j == 0 || j == nx - 1 {
                0.0
            } else {
                0.8 * (-(dx * dx + dy * dy) / 0.02).exp()
            };
        }
    }
    u
}

/// The same steps as a plain CPU loop over the whole grid: what the
/// examples check the kernel against.
pub fn reference(mut u: Vec<f32>, nx: usize, ny: usize, k: f32, steps: usize) -> Vec<f32> {
    let mut next = u.clone();
    for _ in 0..steps {
        for i in 1..ny - 1 {
            for j in 1..nx - 1 {
                let c = u[i * nx + j];
                let around = u[(i - 1) * nx + j] + u[(i + 1) * nx + j] + u[i * nx + j - 1];
                next[i * nx + j] = c + k * (around + u[i * nx + j + 1] - 4.0 * c);
            }
        }
        std::mem::swap(&mut u, &mut next);
    }
    u
}

/// The largest absolute difference between `got` and `want`, and where
/// (NaN counts as infinite).
pub fn largest_difference(got: &[f32], want: &[f32]) -> (f32, usize) {
    assert_eq!(got.len(), want.len(), "two fields of one size");
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .map(|d| if d.is_nan() { f32::INFINITY } else { d })
        .enumerate()
        .fold(
            (0.0, 0),
            |(w, at), (i, d)| if d > w { (d, i) } else { (w, at) },
        )
}
