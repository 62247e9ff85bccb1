//! # 18: element-wise kernels written once (`gpu_kernels::Elementwise`)
//!
//! A symmetric positive definite system `M x = b` formed and solved on the
//! device, with no matrix uploaded but `B`:
//!
//! - `M = B Bᵀ + n I`: a product (`gpu::blas::Gemm`), then the shift on the
//!   diagonal (`gpu_kernels::diag::add_diagonal`: no `n I` from the host);
//! - `b = sin(t) + t / n` over `t = 0, 1, ...`, one expression
//!   (`Elementwise`), and the solve by Cholesky (`gpu::solver`);
//! - the residual `r = b - M x` (`gpu::blas::Gemv`), then its size
//!   element by element, relative to `b` where `|b| > 1`, by a second
//!   expression with a local, a selection and `abs`.
//!
//! Each expression is written once: NVRTC compiles it to a kernel on CUDA,
//! and the host backend runs the same expression. The diagonal of `M` is
//! read back (`diag::diagonal`) and checked against the host's `B Bᵀ + n I`,
//! and the relative residual must be tiny. Exits non-zero if a check
//! fails.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 18-elementwise
//! ```

use gpu::blas::{Gemm, Gemv, Op};
use gpu::prelude::*;
use gpu::solver::{Potrf, Potrs};
use gpu_kernels::{diag, Elementwise};

/// The order of the system.
const N: usize = 200;

fn main() -> Result<()> {
    let rt = gpu::Runtime::global()?;
    println!("18-elementwise on the {} backend", rt.backend());
    // B, column-major, entries in [-1, 1) from a fixed generator.
    let host_b: Vec<f64> = common::uniform(0x2545_F491_4F6C_DD1D, N * N)
        .into_iter()
        .map(|v| 2.0 * v)
        .collect();
    // The two expressions, parsed and checked once.
    let rhs = Elementwise::<f64>::new("rhs", &["t"], &["n"], &["b"], "b = sin(t) + t / n")?;
    let relative = Elementwise::<f64>::new(
        "relative",
        &["r", "b"],
        &[],
        &["e"],
        "m = abs(b); e = m > 1 ? abs(r) / m : abs(r)",
    )?;
    let index: Vec<f64> = (0..N).map(|i| i as f64).collect();

    let (e, d) = gpu::scope(|s| {
        let b_mat = s.from_host(&host_b)?;
        let t = s.from_host(&index)?;
        // M = B Bᵀ + n I.
        let mut m = s.zeros::<f64>(N * N)?;
        Gemm::new(N, N, N)
            .op_b(Op::T)
            .run(s, &b_mat, &b_mat, &mut m)?;
        diag::add_diagonal(s, &mut m, N as f64)?;
        let mut d = s.zeros::<f64>(N)?;
        diag::diagonal(s, &m, &mut d)?;
        // b, then x = M⁻¹ b by Cholesky (L in M's lower triangle).
        let mut b = s.zeros::<f64>(N)?;
        rhs.run(s, &[&t], &[N as f64], &mut [&mut b])?;
        let mut l = s.zeros::<f64>(N * N)?;
        s.copy(&m, &mut l)?;
        Potrf::new(N).run(s, &mut l)?;
        let mut x = s.zeros::<f64>(N)?;
        s.copy(&b, &mut x)?;
        Potrs::new(N, 1).run(s, &l, &mut x)?;
        // r = b - M x, then e = |r| / max(|b|, 1) element by element.
        let mut r = s.zeros::<f64>(N)?;
        s.copy(&b, &mut r)?;
        Gemv::new(N, N)
            .alpha(-1.0)
            .beta(1.0)
            .run(s, &m, &x, &mut r)?;
        let mut e = s.zeros::<f64>(N)?;
        relative.run(s, &[&r, &b], &[], &mut [&mut e])?;
        Ok((s.to_vec(&e)?, s.to_vec(&d)?))
    })?;

    // The diagonal against the host's: (B Bᵀ)_ii = sum_k B_ik², plus n.
    let mut worst_diag = 0.0f64;
    for i in 0..N {
        let want = (0..N).map(|k| host_b[i + k * N].powi(2)).sum::<f64>() + N as f64;
        worst_diag = worst_diag.max((d[i] - want).abs() / want);
    }
    let worst = e.iter().cloned().fold(0.0f64, f64::max);
    println!(
        "M = B Bᵀ + {N} I: diagonal within {worst_diag:.1e} of the host's; \
         largest residual |b - M x|_i / max(|b_i|, 1) = {worst:.1e}"
    );
    if worst_diag > 1e-12 || e.iter().any(|v| v.is_nan()) || worst >= 1e-10 {
        eprintln!("18-elementwise: a check failed");
        std::process::exit(1);
    }
    Ok(())
}
