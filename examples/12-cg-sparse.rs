//! # 12: conjugate gradients on a sparse matrix
//!
//! Solves the 2D Poisson equation (the 5-point stencil on an `n x n` grid,
//! Dirichlet boundaries: `4` on the diagonal, `-1` for each neighbour) by
//! conjugate gradients, the matrix a `gpu::sparse::Csr<f64>` and every
//! step a library call: `gpu::sparse::spmv` for `q = A p`, dot products
//! into one-element device buffers (`gpu_kernels::reduce::dot_into` in the
//! graphed steps: cuBLAS's `dot` is not capture-safe), `axpy_dev` and
//! `scal_dev` reading their factor from such a buffer. The factors `alpha = rr / pq` and `beta =
//! rr_new / rr` are computed on the device by a one-thread kernel of our
//! own (CUDA C compiled at run time, with a host implementation; the step
//! is `common::cg`), so the
//! host reads the residual only every `CHECK` steps. Those `CHECK` steps
//! run as one `gpu::Graphed` scope: a CUDA graph built at the first run
//! (each library call a child graph, captured again at every run), then
//! launched again at each check.
//!
//! First a small grid is checked against a direct solve on the host (a
//! banded Cholesky factorization), then a larger one reports its steps
//! and time and is checked by its true residual `||b - A x|| / ||b||`,
//! computed on the host. Exits non-zero if a check fails.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 12-cg-sparse
//! ```

use common::cg::{load, Cg};
use gpu::sparse::Csr;
use gpu::{BackendKind, Result};
use std::time::{Duration, Instant};

/// Relative residual (of the recurrence) to reach.
const TOL: f64 = 1e-10;
/// Steps between two looks at the residual from the host.
const CHECK: usize = 10;
const MAX_STEPS: usize = 20_000;

/// `A x` on the host, `A` in CSR.
fn host_spmv((rp, ci, v): &(Vec<i32>, Vec<i32>, Vec<f64>), x: &[f64]) -> Vec<f64> {
    (0..rp.len() - 1)
        .map(|i| {
            (rp[i] as usize..rp[i + 1] as usize)
                .map(|p| v[p] * x[ci[p] as usize])
                .sum()
        })
        .collect()
}

/// `A x = b` by a banded Cholesky factorization on the host (`A` is
/// symmetric positive definite, of bandwidth `bw`), stored dense.
fn cholesky_solve(a: &(Vec<i32>, Vec<i32>, Vec<f64>), bw: usize, b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut l = vec![0.0; n * n]; // row-major, l[i * n + j] for j <= i
    for (i, w) in a.0.windows(2).enumerate() {
        for p in w[0] as usize..w[1] as usize {
            let j = a.1[p] as usize;
            if j <= i {
                l[i * n + j] = a.2[p];
            }
        }
    }
    for j in 0..n {
        let lo = j.saturating_sub(bw);
        let d = l[j * n + j] - (lo..j).map(|k| l[j * n + k].powi(2)).sum::<f64>();
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..(j + bw + 1).min(n) {
            let s: f64 = (i.saturating_sub(bw).max(lo)..j)
                .map(|k| l[i * n + k] * l[j * n + k])
                .sum();
            l[i * n + j] = (l[i * n + j] - s) / d;
        }
    }
    // L z = b, then L^T x = z.
    let mut z = b.to_vec();
    for i in 0..n {
        let s: f64 = (i.saturating_sub(bw)..i).map(|k| l[i * n + k] * z[k]).sum();
        z[i] = (z[i] - s) / l[i * n + i];
    }
    for i in (0..n).rev() {
        let s: f64 = (i + 1..(i + bw + 1).min(n))
            .map(|k| l[k * n + i] * z[k])
            .sum();
        z[i] = (z[i] - s) / l[i * n + i];
    }
    z
}

/// What one solve gives: the solution, the steps, the recurrence's
/// relative residual, the time, and whether NVRTC compiled the kernel.
struct Solve {
    x: Vec<f64>,
    steps: usize,
    residual: f64,
    took: Duration,
    compiled: bool,
}

/// CG for `A x = b` from `x = 0`, until the relative residual is below
/// `TOL` (seen every `CHECK` steps) or `MAX_STEPS`.
fn cg(a: &(Vec<i32>, Vec<i32>, Vec<f64>), b: &[f64]) -> Result<Solve> {
    let n = b.len();
    let b_norm2: f64 = b.iter().map(|v| v * v).sum();
    gpu::scope(|s| {
        let (k, compiled) = load(s)?;
        let a = Csr::from_host(s, n, n, &a.0, &a.1, &a.2)?;
        let mut cg = Cg::new(s, b)?;
        s.to_vec(&cg.rr)?; // the uploads done: the clock starts with the steps
        let start = Instant::now();
        let (mut steps, mut residual) = (0, 1.0);
        // CHECK steps, one graph (its library calls captured into child
        // graphs, the SpMV's workspace reused): built at the first run,
        // launched again after.
        let mut graphed = gpu::Graphed::on(s.runtime());
        while steps < MAX_STEPS {
            graphed.scope(|g| {
                for _ in 0..CHECK {
                    cg.step(g, &a, &k)?;
                }
                Ok(())
            })?;
            steps += CHECK;
            // The one host read: every CHECK steps.
            residual = (s.to_vec(&cg.rr)?[0] / b_norm2).sqrt();
            if residual < TOL {
                break;
            }
        }
        let took = start.elapsed();
        let st = graphed.stats();
        println!(
            "  graphed: {} build, {} replays of {} nodes",
            st.builds, st.replays, st.nodes
        );
        Ok(Solve {
            x: s.to_vec(&cg.x)?,
            steps,
            residual,
            took,
            compiled,
        })
    })
}

/// `||b - A x|| / ||b||` on the host.
fn true_residual(a: &(Vec<i32>, Vec<i32>, Vec<f64>), x: &[f64], b: &[f64]) -> f64 {
    let ax = host_spmv(a, x);
    let r2: f64 = ax.iter().zip(b).map(|(ax, b)| (b - ax).powi(2)).sum();
    let b2: f64 = b.iter().map(|b| b * b).sum();
    (r2 / b2).sqrt()
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    let (small, large) = match backend {
        BackendKind::Cuda => (32, 512),
        BackendKind::Host => (16, 48),
    };
    println!("12-cg-sparse: backend {backend}; 2D Poisson (5-point), CSR through gpu::sparse");

    // The small grid against a direct solve.
    let a = common::poisson::poisson(small);
    let b: Vec<f64> = (0..small * small)
        .map(|i| 1.0 + ((i % small) as f64 * 0.3).sin())
        .collect();
    let got = cg(&a, &b)?;
    println!(
        "  kernel: {}",
        if got.compiled {
            "CUDA C compiled by NVRTC"
        } else {
            "host implementation (no NVRTC)"
        }
    );
    let direct = cholesky_solve(&a, small, &b);
    let scale = direct.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let err = got
        .x
        .iter()
        .zip(&direct)
        .fold(0.0f64, |m, (x, d)| m.max((x - d).abs()))
        / scale;
    println!(
        "  {small}x{small} grid ({} unknowns, {} entries): {} steps, residual {:.2e}; \
         largest difference from the Cholesky solve {err:.2e} (relative)",
        small * small,
        a.2.len(),
        got.steps,
        got.residual
    );
    if got.residual >= TOL || err > 1e-7 {
        return Err(format!(
            "the small grid did not match the direct solve: residual {:.2e}, error {err:.2e}",
            got.residual
        )
        .into());
    }

    // The large grid: steps, time, and the true residual.
    let a = common::poisson::poisson(large);
    let b = vec![1.0; large * large];
    let got = cg(&a, &b)?;
    let res = true_residual(&a, &got.x, &b);
    let per = got.took / got.steps.max(1) as u32;
    println!(
        "  {large}x{large} grid ({} unknowns, {} entries): {} steps in {:.2?} ({per:.2?} a step); \
         recurrence residual {:.2e}, true residual {res:.2e}",
        large * large,
        a.2.len(),
        got.steps,
        got.took,
        got.residual
    );
    if got.residual >= TOL || res > 1e-8 {
        return Err(format!(
            "the large grid did not converge: residual {:.2e}, true residual {res:.2e}",
            got.residual
        )
        .into());
    }
    println!("  converged, and the small grid matches the direct solve");
    Ok(())
}
