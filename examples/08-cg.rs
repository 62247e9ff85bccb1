//! # 08: a conjugate gradient with device scalars
//!
//! Solves `A x = b` for the tridiagonal `A = tridiag(-1, 2.01, -1)` of
//! 10^6 unknowns (symmetric positive definite, condition number about 400)
//! by conjugate gradients, and checks the result against a direct CPU solve
//! (the Thomas algorithm).
//!
//! Every step stays on the device: the dot products are device reductions
//! (`gpu_kernels::reduce::dot_into`, deterministic, f64) that write 1-element
//! buffers, and the vector updates are kernels of our own, CUDA C compiled at
//! run time, that read `alpha = rr / pq` and `beta = rr_new / rr` from those
//! buffers. The host reads the residual only every `CHECK` steps to decide
//! whether to stop: no host round trip per dot product. The `CHECK` steps
//! between two reads run as one `gpu::Graphed` scope: recorded once, built
//! into a CUDA graph, then launched again at each check (the reductions'
//! temporaries reuse their memory from run to run).
//!
//! ```text
//! cargo run --release -p gpu-examples --example 08-cg
//! ```

use gpu::kernel::{In, Kernel, LaunchConfig, Out};
use gpu::{Buffer, Result, TaskContext};
use gpu_kernels::reduce::dot_into;
use std::time::Instant;

/// Unknowns.
const N: usize = 1_000_000;
/// The diagonal: `2 + 0.01` keeps the system well enough conditioned.
const DIAG: f64 = 2.01;
/// Relative residual to reach.
const TOL: f64 = 1e-10;
/// Steps between two looks at the residual from the host.
const CHECK: usize = 10;
const MAX_STEPS: usize = 2000;

const SRC: &str = r#"
#define FOR_EACH(i, n) for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
                            i < n; i += (unsigned long long)gridDim.x * blockDim.x)

// y = A x for A = tridiag(-1, diag, -1).
extern "C" __global__ void cg_matvec(double* y, const double* x, double diag, unsigned long long n) {
    FOR_EACH(i, n) {
        double v = diag * x[i];
        if (i > 0) v -= x[i - 1];
        if (i + 1 < n) v -= x[i + 1];
        y[i] = v;
    }
}

// alpha = rr / pq; x += alpha p; r -= alpha q.
extern "C" __global__ void cg_update_xr(double* x, double* r, const double* p, const double* q,
                                        const double* rr, const double* pq, unsigned long long n) {
    double alpha = rr[0] / pq[0];
    FOR_EACH(i, n) {
        x[i] += alpha * p[i];
        r[i] -= alpha * q[i];
    }
}

// beta = rr_new / rr; p = r + beta p.
extern "C" __global__ void cg_update_p(double* p, const double* r, const double* rr_new,
                                       const double* rr, unsigned long long n) {
    double beta = rr_new[0] / rr[0];
    FOR_EACH(i, n) p[i] = r[i] + beta * p[i];
}
"#;

type Matvec = Kernel<(Out<f64>, In<f64>, f64, u64)>;
type UpdateXr = Kernel<(Out<f64>, Out<f64>, In<f64>, In<f64>, In<f64>, In<f64>, u64)>;
type UpdateP = Kernel<(Out<f64>, In<f64>, In<f64>, In<f64>, u64)>;

/// The three kernels, with their host implementations.
struct Cg {
    matvec: Matvec,
    update_xr: UpdateXr,
    update_p: UpdateP,
    /// NVRTC compiled `SRC` (else the host implementations run).
    compiled: bool,
}

impl Cg {
    fn load(t: &TaskContext) -> Result<Cg> {
        let m = t.runtime().compile_cuda(SRC, &[])?;
        Ok(Cg {
            compiled: m.is_compiled(),
            matvec: m.kernel("cg_matvec")?.with_host(
                |y: &mut [f64], x: &[f64], diag: f64, n: u64| {
                    let n = n as usize;
                    for i in 0..n {
                        let mut v = diag * x[i];
                        if i > 0 {
                            v -= x[i - 1];
                        }
                        if i + 1 < n {
                            v -= x[i + 1];
                        }
                        y[i] = v;
                    }
                },
            ),
            update_xr: m.kernel("cg_update_xr")?.with_host(
                |x: &mut [f64],
                 r: &mut [f64],
                 p: &[f64],
                 q: &[f64],
                 rr: &[f64],
                 pq: &[f64],
                 _n: u64| {
                    let alpha = rr[0] / pq[0];
                    for i in 0..x.len() {
                        x[i] += alpha * p[i];
                        r[i] -= alpha * q[i];
                    }
                },
            ),
            update_p: m.kernel("cg_update_p")?.with_host(
                |p: &mut [f64], r: &[f64], rr_new: &[f64], rr: &[f64], _n: u64| {
                    let beta = rr_new[0] / rr[0];
                    for i in 0..p.len() {
                        p[i] = r[i] + beta * p[i];
                    }
                },
            ),
        })
    }
}

/// Sizes the kernels rely on: vectors of `n`, scalars of 1.
fn check_sizes(n: usize, vectors: &[usize], scalars: &[usize]) -> Result<()> {
    let bad = |what, expected, got| gpu::Error::LengthMismatch {
        what,
        expected,
        got,
    };
    if let Some(&got) = vectors.iter().find(|&&l| l != n) {
        return Err(bad("a CG vector", n, got));
    }
    if let Some(&got) = scalars.iter().find(|&&l| l != 1) {
        return Err(bad("a CG scalar", 1, got));
    }
    Ok(())
}

fn cfg(n: usize) -> LaunchConfig {
    LaunchConfig::for_elements(n, 256)
}

/// q = A p.
fn matvec(t: &TaskContext, cg: &Cg, q: &mut Buffer<f64>, p: &Buffer<f64>) -> Result<()> {
    let n = p.len();
    check_sizes(n, &[q.len()], &[])?;
    // SAFETY: grid-stride over i < n; reads x[i-1..=i+1] within 0..n and
    // writes y[i]; both hold n elements (checked).
    unsafe { cg.matvec.launch(t, cfg(n), (q, p, DIAG, n)) }
}

/// x += alpha p, r -= alpha q, alpha = rr / pq.
#[allow(clippy::too_many_arguments)]
fn update_xr(
    t: &TaskContext,
    cg: &Cg,
    x: &mut Buffer<f64>,
    r: &mut Buffer<f64>,
    p: &Buffer<f64>,
    q: &Buffer<f64>,
    rr: &Buffer<f64>,
    pq: &Buffer<f64>,
) -> Result<()> {
    let n = x.len();
    check_sizes(n, &[r.len(), p.len(), q.len()], &[rr.len(), pq.len()])?;
    // SAFETY: grid-stride over i < n on four vectors of n elements, and
    // element 0 of two 1-element scalars (all checked).
    unsafe { cg.update_xr.launch(t, cfg(n), (x, r, p, q, rr, pq, n)) }
}

/// p = r + beta p, beta = rr_new / rr.
fn update_p(
    t: &TaskContext,
    cg: &Cg,
    p: &mut Buffer<f64>,
    r: &Buffer<f64>,
    rr_new: &Buffer<f64>,
    rr: &Buffer<f64>,
) -> Result<()> {
    let n = p.len();
    check_sizes(n, &[r.len()], &[rr_new.len(), rr.len()])?;
    // SAFETY: grid-stride over i < n on two vectors of n elements, and
    // element 0 of two 1-element scalars (all checked).
    unsafe { cg.update_p.launch(t, cfg(n), (p, r, rr_new, rr, n)) }
}

/// The Thomas algorithm for tridiag(-1, DIAG, -1) x = b.
fn thomas(b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let (mut c, mut d) = (vec![0.0; n], vec![0.0; n]);
    c[0] = -1.0 / DIAG;
    d[0] = b[0] / DIAG;
    for i in 1..n {
        let m = DIAG + c[i - 1];
        c[i] = -1.0 / m;
        d[i] = (b[i] + d[i - 1]) / m;
    }
    let mut x = vec![0.0; n];
    x[n - 1] = d[n - 1];
    for i in (0..n - 1).rev() {
        x[i] = d[i] - c[i] * x[i + 1];
    }
    x
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    // b = A x_true for a smooth x_true.
    let x_true: Vec<f64> = (0..N).map(|i| 1.0 + (i as f64 * 1e-3).sin()).collect();
    let b: Vec<f64> = (0..N)
        .map(|i| {
            let mut v = DIAG * x_true[i];
            if i > 0 {
                v -= x_true[i - 1];
            }
            if i + 1 < N {
                v -= x_true[i + 1];
            }
            v
        })
        .collect();
    let b_norm2: f64 = b.iter().map(|v| v * v).sum();
    println!("08-cg: backend {backend}; tridiag(-1, {DIAG}, -1), {N} unknowns");

    let start = Instant::now();
    let (x, steps, residual, compiled) = gpu::scope(|s| {
        let cg = Cg::load(s)?;
        // x = 0, r = b, p = r, rr = r.r
        let mut x = s.zeros::<f64>(N)?;
        let mut r = s.from_host(&b)?;
        let mut p = s.from_host(&b)?;
        let mut q = s.zeros::<f64>(N)?;
        let (mut rr, mut rr_new, mut pq) = (s.zeros::<f64>(1)?, s.zeros::<f64>(1)?, s.zeros(1)?);
        dot_into(s, &r, &r, &mut rr)?;
        let mut steps = 0;
        let mut residual = 1.0;
        // CHECK steps, one graph: built at the first run, launched again.
        let mut graphed = gpu::Graphed::on(s.runtime());
        while steps < MAX_STEPS {
            graphed.scope(|g| {
                for _ in 0..CHECK {
                    matvec(g, &cg, &mut q, &p)?;
                    dot_into(g, &p, &q, &mut pq)?;
                    update_xr(g, &cg, &mut x, &mut r, &p, &q, &rr, &pq)?;
                    dot_into(g, &r, &r, &mut rr_new)?;
                    update_p(g, &cg, &mut p, &r, &rr_new, &rr)?;
                    std::mem::swap(&mut rr, &mut rr_new);
                }
                Ok(())
            })?;
            steps += CHECK;
            // The one host read: every CHECK steps.
            residual = (s.to_vec(&rr)?[0] / b_norm2).sqrt();
            if residual < TOL {
                break;
            }
        }
        let st = graphed.stats();
        println!(
            "  graphed: {} build, {} replays of {} nodes",
            st.builds, st.replays, st.nodes
        );
        Ok((s.to_vec(&x)?, steps, residual, cg.compiled))
    })?;
    let took = start.elapsed();

    let direct = thomas(&b);
    let scale = direct.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = x
        .iter()
        .zip(&direct)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
        / scale;
    println!(
        "  kernels: {}",
        if compiled {
            "CUDA C compiled by NVRTC"
        } else {
            "host implementations (no NVRTC)"
        }
    );
    println!("  {steps} steps in {took:.2?}: relative residual {residual:.2e}");
    println!("  largest difference from the direct CPU solve: {err:.2e} (relative)");
    if residual >= TOL || err > 1e-6 {
        return Err(format!("did not converge: residual {residual:.2e}, error {err:.2e}").into());
    }
    println!("  converged, and matches the CPU solve");
    Ok(())
}
