//! B15: the tiled fp64 Cholesky of `11-cholesky` (`common::cholesky`:
//! POTRF, TRSM, SYRK and GEMM tasks over a tile grid, the DAG found by the
//! ledger) at n = 32768 (tiles of 2048) and n = 8192 (tiles of 1024), on
//! 16 tasks and on one (the scheduler's speed-up); PyTorch's and CuPy's
//! one-call cuSOLVER potrf on the same matrix are `benches/torch_linalg.py`.
//! One iteration: the factorization from a fresh copy of the matrix (the
//! copy untimed) until every task's stream is idle. CUDA only.

use super::*;
use common::cholesky::{factor, tasks, Tiles};

/// (n, default tile order) of the two sizes; `B15_TILE_<n>` in the
/// environment sets another tile order (the tuning runs of
/// `11-cholesky n tile`).
///
/// Tuned on the H200 with `11-cholesky n tile` (16 streams, one run each,
/// `benches/results/investigations/2026-12-02-b15-cholesky/`): n = 32768
/// took 267 ms with tiles of 1024 and 245 ms with 2048; n = 8192 16.1 ms
/// with 1024 (512: 38.9 ms, a cold first run).
const SIZES: [(usize, usize); 2] = [(32768, 2048), (8192, 1024)];

/// The tile order for `n`: `B15_TILE_<n>` or `default`.
fn tile(n: usize, default: usize) -> usize {
    std::env::var(format!("B15_TILE_{n}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&b: &usize| b > 0 && n % b == 0)
        .unwrap_or(default)
}
/// Tasks of the tiled run.
const STREAMS: usize = 16;

pub(crate) fn b15_cholesky(c: &mut Criterion) {
    if !cuda() {
        return;
    }
    let rt = rt();
    let setup = rt.begin_task().unwrap();
    let mut g = c.benchmark_group("B15");
    g.sample_size(10);
    for (n, b) in SIZES {
        let b = tile(n, b);
        eprintln!("B15: n = {n}, tiles of {b}");
        let original = Tiles::test_matrix(&setup, n / b, b).unwrap();
        setup.synchronize().unwrap();
        for (name, streams) in [("tiled", STREAMS), ("one-stream", 1)] {
            let workers = tasks(rt, streams).unwrap();
            g.bench_function(format!("{name}-{n}"), |bch| {
                bch.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut a = original.copy(&setup).unwrap();
                        setup.synchronize().unwrap();
                        let f = setup.fence().unwrap();
                        for w in &workers {
                            w.after_fence(f.clone()).unwrap();
                        }
                        let start = Instant::now();
                        factor(&workers, &mut a).unwrap();
                        for w in &workers {
                            w.synchronize().unwrap();
                        }
                        total += start.elapsed();
                        black_box(&a);
                    }
                    total
                })
            });
        }
    }
    g.finish();
}
