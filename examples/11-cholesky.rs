//! # 11: a tiled Cholesky whose DAG the ledger finds
//!
//! Factors a symmetric positive definite fp64 matrix `A = L L^T` tile by
//! tile (right-looking: POTRF of the diagonal tile, TRSM down its column,
//! SYRK and GEMM on the trailing matrix), each tile a buffer of its own and
//! each tile's operations on one of 16 tasks. The operations are submitted
//! in program order from this one thread, with no waits written by hand:
//! the ledger orders each one after the last writers of the tiles it
//! reads, so independent updates overlap and the next panel starts early
//! (`common::cholesky`, also what B15 measures).
//!
//! Where the runtime has several devices, the same factor runs once more
//! over all of them (`common::cholesky_devices`: tiles 2D block-cyclic,
//! tracked peer copies; B18's measurement), is checked against the
//! one-device factor, and its efficiency against the best one-device time
//! is printed.
//!
//! Checked by `||A - L L^T||_F / ||A||_F` on the host (the whole matrix on
//! the host backend; on a GPU, the factor of n = 8192 through a product
//! with a random vector, `||A x - L (L^T x)|| / ||A x||`).
//!
//! ```text
//! cargo run --release -p gpu-examples --example 11-cholesky [n tile [streams]]
//! ```

use common::cholesky::{dense_factor, entry, factor, factor_with_panel, panel_tasks, tasks, Tiles};
use common::cholesky_devices::{device_tasks, factor_devices, grid, DeviceTiles};
use std::time::Instant;

fn main() -> gpu::Result<()> {
    let rt = gpu::Runtime::global()?;
    let on_gpu = rt.backend() == gpu::BackendKind::Cuda;
    // n and the tile order: 8192 and 1024 on a GPU (B15's tuning), 192 and 32 on the host,
    // or as given (n a multiple of the tile).
    // (Arguments that are not numbers, e.g. the bundle's output folder,
    // are ignored.)
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (n, b) = match args[..] {
        [n, b, ..] if b > 0 && n % b == 0 => (n, b),
        [] => {
            if on_gpu {
                (8192, 1024)
            } else {
                (192, 32)
            }
        }
        _ => panic!("usage: 11-cholesky [n tile [streams]] (n a multiple of tile)"),
    };
    let many = args.get(2).copied().unwrap_or(16);
    let t = n / b;
    println!(
        "11-cholesky on {}: n = {n}, {t} x {t} tiles of {b}",
        if on_gpu {
            "the GPU"
        } else {
            "the host backend (no GPU)"
        }
    );
    let setup = rt.begin_task()?;
    let original = Tiles::test_matrix(&setup, t, b)?;
    setup.synchronize()?;
    // Once untimed: libraries loaded, handles and kernels ready.
    {
        let mut a = original.copy(&setup)?;
        setup.synchronize()?;
        let w = tasks(rt, 1)?;
        w[0].after_fence(setup.fence()?)?;
        factor(&w, &mut a)?;
        w[0].synchronize()?;
    }
    let mut times = Vec::new();
    let mut last = None;
    // The last, checked below: the panel on two streams of high priority
    // (issue 39 item 3), the trailing updates on the others.
    for (streams, panel) in [(1, 0), (many, 0), (many, 2)] {
        let mut a = original.copy(&setup)?;
        setup.synchronize()?;
        let workers = tasks(rt, streams)?;
        let panel = panel_tasks(rt, panel)?;
        for w in workers.iter().chain(&panel) {
            // Each worker starts after the copies (its stream waits).
            w.after_fence(setup.fence()?)?;
        }
        let start = Instant::now();
        factor_with_panel(&workers, &panel, &mut a)?;
        for w in workers.iter().chain(&panel) {
            w.synchronize()?; // also checks each potrf's info
        }
        let s = start.elapsed().as_secs_f64();
        let with = match panel.len() {
            0 => String::new(),
            p => format!(" + {p} high-priority for the panel"),
        };
        println!(
            "  {streams:>2} stream(s){with}: {:.1} ms, {:.2} TFLOP/s",
            s * 1e3,
            (n as f64).powi(3) / 3.0 / s / 1e12
        );
        times.push(s);
        last = Some(a);
    }
    let l = dense_factor(&setup, &last.expect("factored"))?;
    let err = if n <= 1024 {
        // ||A - L L^T||_F / ||A||_F, every entry.
        let (mut d, mut s) = (0.0f64, 0.0f64);
        for j in 0..n {
            for i in 0..n {
                let llt: f64 = (0..=i.min(j)).map(|p| l[i + p * n] * l[j + p * n]).sum();
                d += (entry(n, i, j) - llt).powi(2);
                s += entry(n, i, j).powi(2);
            }
        }
        (d / s).sqrt()
    } else {
        // ||A x - L (L^T x)|| / ||A x|| for a random x.
        let x = common::uniform(0x2545_f491_4f6c_dd1d, n);
        let mut ltx = vec![0.0; n];
        for (j, v) in ltx.iter_mut().enumerate() {
            *v = (j..n).map(|i| l[i + j * n] * x[i]).sum();
        }
        let (mut d, mut s) = (0.0f64, 0.0f64);
        for i in 0..n {
            let llx: f64 = (0..=i).map(|j| l[i + j * n] * ltx[j]).sum();
            let ax: f64 = (0..n).map(|j| entry(n, i, j) * x[j]).sum();
            d += (ax - llx).powi(2);
            s += ax * ax;
        }
        (d / s).sqrt()
    };
    println!(
        "  relative error {err:.2e} (the last); {many} streams vs 1: {:.2}x, with the panel at high priority: {:.2}x",
        times[0] / times[1],
        times[0] / times[2]
    );
    if err.is_nan() || err >= 1e-12 {
        eprintln!("FAILED: the factor does not reproduce A (error {err:.2e} >= 1e-12)");
        std::process::exit(1);
    }
    let devices = rt.device_count();
    if devices > 1 {
        // B18's measurement: the same factor over every device (tiles 2D
        // block-cyclic, peer copies), against the best one-device time.
        let per = (many / devices).max(1);
        let setup: Vec<_> = device_tasks(rt, 1)?
            .into_iter()
            .map(|mut v| v.remove(0))
            .collect();
        let mut a = DeviceTiles::test_matrix(&setup, t, b)?;
        for s in &setup {
            s.synchronize()?;
        }
        let work = device_tasks(rt, per)?;
        let start = Instant::now();
        factor_devices(&work, &mut a)?;
        for d in &work {
            for w in d {
                w.synchronize()?;
            }
        }
        let s = start.elapsed().as_secs_f64();
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        let g = grid(devices);
        println!(
            "  {devices} devices ({} x {} grid, {per} streams each): {:.1} ms, {:.2} TFLOP/s, efficiency {:.3}",
            g.0,
            g.1,
            s * 1e3,
            (n as f64).powi(3) / 3.0 / s / 1e12,
            best / (devices as f64 * s)
        );
        let got = dense_factor(&setup[0], &a.gather(&setup[0])?)?;
        let diff = got
            .iter()
            .zip(&l)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f64, f64::max);
        let scale = l.iter().map(|x| x.abs()).fold(0.0f64, f64::max);
        if diff.is_nan() || diff > 1e-12 * scale {
            eprintln!(
                "FAILED: the factor over {devices} devices differs from one device's by {diff:.2e}"
            );
            std::process::exit(1);
        }
    }
    println!("  ok");
    Ok(())
}
