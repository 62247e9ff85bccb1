//! The heat step of `09-multi-gpu-heat`: the 5-point stencil of
//! `common/heat.rs`, for a block of rows held by one device, whose rows
//! above and below come from separate one-row buffers (the halos, written
//! by the neighbouring devices). Included with
//! `#[path = "common/heat_parts.rs"] mod heat_parts;`.
//!
//! One launch writes `count` rows of the next state, `out`, from the rows
//! `first .. first + count` of `body` (a block of `rows` rows of `nx`),
//! reading the row above the block from `above` and the row below it from
//! `below` where the stencil reaches past the block. Row `r` of `out` is
//! global row `g_first + r` of a grid of `ny` rows; the grid's edge cells
//! (first and last row and column) are fixed (copied).

use gpu::kernel::{In, Kernel, Out};
use gpu::memory::{DeviceSlice, DeviceSliceMut};
use gpu::{Runtime, TaskContext};

/// The kernel, in CUDA C: one thread a cell, 2D blocks.
pub const SRC: &str = r#"
extern "C" __global__ void heat_part(float* out, const float* above, const float* body,
                                     const float* below,
                                     unsigned long long nx, unsigned long long rows,
                                     unsigned long long first, unsigned long long count,
                                     unsigned long long g_first, unsigned long long ny,
                                     float k) {
    unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long r = blockIdx.y * (unsigned long long)blockDim.y + threadIdx.y;
    if (j >= nx || r >= count) return;
    unsigned long long i = first + r;
    unsigned long long g = g_first + r;
    float u = body[i * nx + j];
    if (g == 0 || g == ny - 1 || j == 0 || j == nx - 1) {
        out[r * nx + j] = u;
        return;
    }
    float up = i > 0 ? body[(i - 1) * nx + j] : above[j];
    float down = i + 1 < rows ? body[(i + 1) * nx + j] : below[j];
    out[r * nx + j] = u + k * (up + down + body[i * nx + j - 1] + body[i * nx + j + 1] - 4.0f * u);
}
"#;

/// `(out, above, body, below, nx, rows, first, count, g_first, ny, k)`.
type HeatPartSig = (
    Out<f32>,
    In<f32>,
    In<f32>,
    In<f32>,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    f32,
);

/// The host implementation: the same cells as the kernel.
#[allow(clippy::too_many_arguments)]
fn heat_part_host(
    out: &mut [f32],
    above: &[f32],
    body: &[f32],
    below: &[f32],
    nx: u64,
    rows: u64,
    first: u64,
    count: u64,
    g_first: u64,
    ny: u64,
    k: f32,
) {
    let (nx, rows, first, count) = (nx as usize, rows as usize, first as usize, count as usize);
    for (r, row) in out.chunks_exact_mut(nx).take(count).enumerate() {
        let (i, g) = (first + r, g_first + r as u64);
        for (j, o) in row.iter_mut().enumerate() {
            let u = body[i * nx + j];
            *o = if g == 0 || g == ny - 1 || j == 0 || j == nx - 1 {
                u
            } else {
                let up = if i > 0 {
                    body[(i - 1) * nx + j]
                } else {
                    above[j]
                };
                let down = if i + 1 < rows {
                    body[(i + 1) * nx + j]
                } else {
                    below[j]
                };
                u + k * (up + down + body[i * nx + j - 1] + body[i * nx + j + 1] - 4.0 * u)
            };
        }
    }
}

/// The kernel, loaded into one device's runtime.
#[derive(Clone, Debug)]
pub struct HeatPart {
    kernel: Kernel<HeatPartSig>,
}

impl HeatPart {
    /// Compiles [`SRC`] for `rt` (once per runtime); `--fmad=false` keeps
    /// the rounding of the CPU loop.
    pub fn load(rt: &Runtime) -> gpu::Result<HeatPart> {
        let module = rt.compile_cuda(SRC, &["--fmad=false"])?;
        let kernel = module
            .kernel::<HeatPartSig>("heat_part")?
            .with_host(heat_part_host);
        Ok(HeatPart { kernel })
    }

    /// Writes `count` rows of the next state to `out` from rows
    /// `first .. first + count` of `body` (`rows` rows of `nx`), with
    /// `above` and `below` the one-row halos; row `r` of `out` is global
    /// row `g_first + r` of `ny`.
    ///
    /// # Errors
    ///
    /// [`gpu::Error::LengthMismatch`] for buffers of the wrong sizes; the
    /// launch's errors.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &self,
        t: &TaskContext,
        out: &mut (impl DeviceSliceMut<f32> + ?Sized),
        (above, body, below): (
            &(impl DeviceSlice<f32> + ?Sized),
            &(impl DeviceSlice<f32> + ?Sized),
            &(impl DeviceSlice<f32> + ?Sized),
        ),
        (nx, rows): (usize, usize),
        (first, count): (usize, usize),
        (g_first, ny): (usize, usize),
        k: f32,
    ) -> gpu::Result<()> {
        let check = |what, expected: Option<usize>, got: usize| match expected {
            Some(e) if e == got => Ok(()),
            _ => Err(gpu::Error::LengthMismatch {
                what,
                expected: expected.unwrap_or(usize::MAX),
                got,
            }),
        };
        check("the block", nx.checked_mul(rows), body.len())?;
        check("the output rows", nx.checked_mul(count), out.len())?;
        check("the halo above", Some(nx), above.len())?;
        check("the halo below", Some(nx), below.len())?;
        assert!(
            count > 0 && first + count <= rows,
            "rows {first}..{} of {rows}",
            first + count
        );
        let by = count.min(8) as u32;
        let cfg = gpu::kernel::LaunchConfig::for_grid_2d(nx, count, 32, by);
        // SAFETY: checked above: `body` has `rows * nx` elements, `out`
        // `count * nx`, each halo `nx`, and `first + count <= rows`. A
        // thread with `j < nx`, `r < count` writes `out[r * nx + j]` only,
        // and reads `body` at row `i = first + r < rows` and, away from the
        // grid's edges, its rows `i - 1` (when `i > 0`, else `above[j]`)
        // and `i + 1` (when `i + 1 < rows`, else `below[j]`) and columns
        // `j - 1`, `j + 1` with `0 < j < nx - 1`: all within the buffers;
        // other threads return. `out` is the only buffer written, and is
        // passed `&mut`.
        unsafe {
            self.kernel.launch(
                t,
                cfg,
                (
                    out,
                    above,
                    body,
                    below,
                    nx as u64,
                    rows as u64,
                    first as u64,
                    count as u64,
                    g_first as u64,
                    ny as u64,
                    k,
                ),
            )
        }
    }
}
