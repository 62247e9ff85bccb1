//! # 16: sparse products (`gpu::sparse`)
//!
//! A rectangular sparse matrix `A` (`m x n`, a few entries a row, some rows
//! empty) in CSR, uploaded once (`Csr::from_host` checks its structure
//! first: a bad index is an error, never an out-of-bounds read), and its
//! products, each in a task of its own (sibling tasks that share `A` as a
//! read, so they never wait for each other):
//!
//! - `y = 2 A x + y / 2` (`sparse::spmv`) and `z = A^T w`
//!   (`sparse::spmv_op` with `Op::T`);
//! - `C = A B` for a dense `B` of `k` columns (`sparse::Spmm`,
//!   column-major as in BLAS).
//!
//! Then `A`'s values are doubled in place by a built-in kernel
//! (`Csr::values_mut`: the structure cannot change, the values can) and
//! `y = A x` is taken again. Every result is checked against the dense
//! product on the host. cuSPARSE runs on the CUDA backend, loops on the
//! host backend. Exits non-zero if a check fails.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 16-sparse
//! ```

use gpu::blas::Op;
use gpu::prelude::*;
use gpu::sparse::{self, Csr, Spmm};
use gpu::BackendKind;
use gpu_kernels as k;

/// An `m x n` matrix in CSR: `per_row` entries in most rows (columns
/// spread by a fixed generator, sorted), every seventh row empty.
fn matrix(m: usize, n: usize, per_row: usize) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let (mut rp, mut ci, mut v) = (vec![0i32], vec![], vec![]);
    for i in 0..m {
        if i % 7 != 3 {
            let mut cols: Vec<usize> = (0..per_row).map(|_| next() % n).collect();
            cols.sort_unstable();
            cols.dedup();
            for c in cols {
                ci.push(c as i32);
                v.push(1.0 + (next() % 1000) as f64 / 250.0 - 2.0);
            }
        }
        rp.push(ci.len() as i32);
    }
    (rp, ci, v)
}

/// The CSR matrix as a dense column-major `m x n` one (`(i, j)` at
/// `i + j m`).
fn dense((rp, ci, v): &(Vec<i32>, Vec<i32>, Vec<f64>), m: usize, n: usize) -> Vec<f64> {
    let mut a = vec![0.0; m * n];
    for i in 0..m {
        for p in rp[i] as usize..rp[i + 1] as usize {
            a[i + ci[p] as usize * m] += v[p];
        }
    }
    a
}

/// `op(A) X` for a dense column-major `m x n` `A` and `X` of `cols`
/// columns (packed): `rows(op(A)) x cols`, column-major.
fn dense_product(a: &[f64], (m, n): (usize, usize), op: Op, x: &[f64], cols: usize) -> Vec<f64> {
    let (r, inner) = if op == Op::N { (m, n) } else { (n, m) };
    let at = |i: usize, j: usize| {
        if op == Op::N {
            a[i + j * m]
        } else {
            a[j + i * m]
        }
    };
    let mut out = vec![0.0; r * cols];
    for c in 0..cols {
        for i in 0..r {
            out[i + c * r] = (0..inner).map(|j| at(i, j) * x[j + c * inner]).sum();
        }
    }
    out
}

/// The largest `|got - want|`, relative to the largest `|want|`.
fn difference(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let d = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()));
    if got.len() == want.len() {
        d / scale.max(f64::MIN_POSITIVE)
    } else {
        f64::INFINITY
    }
}

/// A vector of `len` values from `seed`.
fn vector(len: usize, seed: f64) -> Vec<f64> {
    (0..len).map(|i| (seed * (i as f64 + 1.0)).sin()).collect()
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // (The bundle passes an output folder; this example writes nothing.)
    let rt = gpu::runtime()?;
    let (m, n, kcols) = match rt.backend() {
        BackendKind::Cuda => (4000, 3000, 16),
        BackendKind::Host => (300, 200, 8),
    };
    println!(
        "16-sparse: backend {} ({}); products by {}",
        rt.backend(),
        rt.device_name(),
        match rt.backend() {
            BackendKind::Cuda => "cuSPARSE",
            BackendKind::Host => "the host backend's loops",
        }
    );
    let csr = matrix(m, n, 8);
    let (x, y0, w) = (vector(n, 0.37), vector(m, 0.11), vector(m, 0.53));
    let b = vector(n * kcols, 0.07);

    // Uploaded once, on a task of their own; the matrix's structure is
    // checked first: a column out of range is refused, nothing uploaded.
    let mut a = gpu::with_task(|t| Csr::from_host(t, m, n, &csr.0, &csr.1, &csr.2))?;
    let bad = gpu::with_task(|t| Csr::from_host(t, 1, 2, &[0, 1], &[2], &[1.0f64])).unwrap_err();
    println!("  a column index out of range is refused: {bad}");
    let (xd, bd) = (Buffer::from_host(&x)?, Buffer::from_host(&b)?);

    // The products, as sibling tasks reading `a`.
    let (mut y, mut z, mut c) = (vec![], vec![], vec![]);
    gpu::scope(|s| {
        let (a, xd, bd, y0, w) = (&a, &xd, &bd, &y0, &w);
        let (y, z, c) = (&mut y, &mut z, &mut c);
        s.spawn(move |t| {
            let mut yd = t.from_host(y0)?;
            sparse::spmv(t, 2.0, a, xd, 0.5, &mut yd)?; // y = 2 A x + y / 2
            let wd = t.from_host(w)?;
            let mut zd = t.zeros::<f64>(n)?;
            sparse::spmv_op(t, Op::T, 1.0, a, &wd, 0.0, &mut zd)?; // z = A^T w
            *y = t.to_vec(&yd)?;
            *z = t.to_vec(&zd)?;
            Ok(())
        });
        s.spawn(move |t| {
            let mut cd = t.zeros::<f64>(m * kcols)?;
            Spmm::new(kcols).run(t, a, bd, &mut cd)?; // C = A B
            *c = t.to_vec(&cd)?;
            Ok(())
        });
        Ok(())
    })?;

    // New values, the same structure: A = 2 A in place, by a kernel.
    let y2 = gpu::scope(|s| {
        k::scale(s, &mut a.values_mut()?, 2.0)?;
        let mut yd = s.zeros::<f64>(m)?;
        sparse::spmv(s, 1.0, &a, &xd, 0.0, &mut yd)?; // y = (2 A) x
        s.to_vec(&yd)
    })?;

    let a = dense(&csr, m, n);
    let empty = (0..m).filter(|&i| csr.0[i] == csr.0[i + 1]).count();
    println!(
        "  A: {m} x {n}, {} entries ({empty} rows empty); B: {n} x {kcols}",
        csr.2.len()
    );
    let ax = dense_product(&a, (m, n), Op::N, &x, 1);
    let want_y: Vec<f64> = ax
        .iter()
        .zip(&y0)
        .map(|(ax, y)| 2.0 * ax + 0.5 * y)
        .collect();
    let want_z = dense_product(&a, (m, n), Op::T, &w, 1);
    let want_c = dense_product(&a, (m, n), Op::N, &b, kcols);
    let want_y2: Vec<f64> = ax.iter().map(|v| 2.0 * v).collect();
    let mut worst = 0.0f64;
    for (what, got, want) in [
        ("y = 2 A x + y / 2 (spmv)", &y, &want_y),
        ("z = A^T w (spmv_op, Op::T)", &z, &want_z),
        ("C = A B (Spmm)", &c, &want_c),
        ("y = (2 A) x, values doubled in place", &y2, &want_y2),
    ] {
        let d = difference(got, want);
        println!("  {what}: differs from the dense product by {d:.1e}");
        worst = worst.max(d);
    }
    if worst > 1e-12 {
        return Err(format!("a sparse product differs from the dense one by {worst:e}").into());
    }
    println!("  every product matches the dense product (relative to its largest value)");
    Ok(())
}
