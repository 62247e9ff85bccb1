//! `gpu_libs::solver`'s batched Cholesky (`PotrfBatched`, `PotrsBatched`:
//! cuSOLVER's batched calls on the CUDA backend, `faer` on the host): the
//! same factors and solutions as one call per matrix, a failing problem
//! named with the others that failed, bad batches refused before anything
//! is queued.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, spd, values};
use gpu_libs::solver::{Potrf, PotrfBatched, Potrs, PotrsBatched, Uplo};
use gpu_sched::{Error, Runtime};

/// `batch` matrices from `one(i)`, each `stride` apart (the gaps 5.0).
fn batch_of(batch: usize, stride: usize, one: impl Fn(usize) -> Vec<f64>) -> Vec<f64> {
    let mut all = vec![5.0; batch * stride];
    for i in 0..batch {
        let m = one(i);
        all[i * stride..i * stride + m.len()].copy_from_slice(&m);
    }
    all
}

/// `max |x - y| / max |y|`.
fn rel_err(x: &[f64], y: &[f64]) -> f64 {
    let d = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    d / y.iter().map(|v| v.abs()).fold(f64::MIN_POSITIVE, f64::max)
}

/// A batch of 5 matrices (padded leading dimension, gaps between them),
/// both triangles: the batched factors equal one `Potrf` per matrix
/// (relative 1e-12: cuSOLVER's batched kernels are other kernels), the
/// gaps and the other triangle untouched; the batched solve with 3
/// right-hand sides (one call per column on CUDA) equals one `Potrs` per
/// system, and also with one shared factor (`stride_a = 0`).
fn batched_cholesky_matches_one_call_per_matrix(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let (n, ld, nrhs, batch) = (17, 20, 3, 5);
    let (sa, sb) = (ld * n + 7, ld * nrhs + 2);
    let a = batch_of(batch, sa, |i| spd(n, ld, 10 + i as u64));
    let b = batch_of(batch, sb, |i| values(ld * nrhs, 40 + i as u64));
    for uplo in [Uplo::Lower, Uplo::Upper] {
        let mut da = t.from_host(&a).unwrap();
        let pf = PotrfBatched::new(n, batch).uplo(uplo).ld(ld).stride(sa);
        pf.run(&t, &mut da).unwrap();
        let f = t.to_vec(&da).unwrap();
        let mut db = t.from_host(&b).unwrap();
        let ps = PotrsBatched::new(n, nrhs, batch).uplo(uplo).ld(ld, ld);
        ps.stride(sa, sb).run(&t, &da, &mut db).unwrap();
        let x = t.to_vec(&db).unwrap();
        for i in 0..batch {
            let mut one = t.from_host(&a[i * sa..i * sa + ld * n]).unwrap();
            Potrf::new(n).uplo(uplo).ld(ld).run(&t, &mut one).unwrap();
            let mut rhs = t.from_host(&b[i * sb..i * sb + ld * nrhs]).unwrap();
            Potrs::new(n, nrhs)
                .uplo(uplo)
                .ld(ld, ld)
                .run(&t, &one, &mut rhs)
                .unwrap();
            let (want_f, want_x) = (t.to_vec(&one).unwrap(), t.to_vec(&rhs).unwrap());
            // The factor's triangle only: cuSOLVER's batched potrf uses the
            // other one as its workspace.
            let tri = |m: &[f64]| -> Vec<f64> {
                let mut t = Vec::new();
                for j in 0..n {
                    for r in 0..n {
                        if (uplo == Uplo::Lower && r >= j) || (uplo == Uplo::Upper && r <= j) {
                            t.push(m[r + j * ld]);
                        }
                    }
                }
                t
            };
            let e = rel_err(&tri(&f[i * sa..i * sa + ld * n]), &tri(&want_f));
            assert!(e < 1e-12, "{uplo:?} factor {i}: {e:e}");
            let e = rel_err(&x[i * sb..i * sb + ld * nrhs], &want_x);
            assert!(e < 1e-12, "{uplo:?} solution {i}: {e:e}");
            if i + 1 < batch {
                assert!(f[i * sa + ld * n..(i + 1) * sa].iter().all(|&v| v == 5.0));
            }
        }
        // One factor for every system: the first.
        let mut db = t.from_host(&b).unwrap();
        let ps = PotrsBatched::new(n, nrhs, batch).uplo(uplo).ld(ld, ld);
        ps.stride(0, sb).run(&t, &da, &mut db).unwrap();
        let shared = t.to_vec(&db).unwrap();
        let mut x0 = t.from_host(&b[sb..sb + ld * nrhs]).unwrap();
        let one = t.from_host(&f[..ld * n]).unwrap();
        Potrs::new(n, nrhs)
            .uplo(uplo)
            .ld(ld, ld)
            .run(&t, &one, &mut x0)
            .unwrap();
        let e = rel_err(&shared[sb..sb + ld * nrhs], &t.to_vec(&x0).unwrap());
        assert!(e < 1e-12, "{uplo:?} shared factor: {e:e}");
    }
    // f32, packed: L L^T reproduces A.
    let a32: Vec<f32> = batch_of(3, 8 * 8, |i| spd(8, 8, 70 + i as u64))
        .iter()
        .map(|&v| v as f32)
        .collect();
    let mut d = t.from_host(&a32).unwrap();
    PotrfBatched::new(8, 3).run(&t, &mut d).unwrap();
    let l = t.to_vec(&d).unwrap();
    for m in 0..3 {
        let at = |i: usize, j: usize| if i >= j { l[m * 64 + i + j * 8] } else { 0.0 };
        for j in 0..8 {
            for i in j..8 {
                let s: f32 = (0..8).map(|p| at(i, p) * at(j, p)).sum();
                let want = a32[m * 64 + i + j * 8];
                assert!(
                    (s - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "f32 {m} ({i},{j})"
                );
            }
        }
    }
}
backend_tests!(batched_cholesky_matches_one_call_per_matrix);

/// Problems 2 and 4 of 6 are indefinite: nothing fails at the call; the
/// next wait's error is problem 2's `NotPositiveDefinite` (the minor
/// LAPACK names), says "problem 2 of a batch of 6" and lists 4; the
/// others are factored. A batch larger than a page of status words
/// (1500) names its failure too, and its words are reused by the next.
fn a_failing_problem_is_named_with_the_others(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let n = 6;
    let a = batch_of(6, n * n, |i| {
        let mut m = spd(n, n, 90 + i as u64);
        if i == 2 || i == 4 {
            m[3 + 3 * n] = -1.0e3; // the 4th leading minor fails
        }
        m
    });
    let mut d = t.from_host(&a).unwrap();
    PotrfBatched::new(n, 6).run(&t, &mut d).unwrap();
    let e = t.synchronize().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("problem 2 of a batch of 6"), "{msg}");
    assert!(msg.contains("also failed: 4)"), "{msg}");
    assert!(
        matches!(
            e.root(),
            Error::NotPositiveDefinite {
                op: "potrfBatched",
                minor: 4
            }
        ),
        "{e:?}"
    );
    let f = t.to_vec(&d).unwrap();
    let mut one = t.from_host(&a[..n * n]).unwrap();
    Potrf::new(n).run(&t, &mut one).unwrap();
    assert!(rel_err(&f[..n * n], &t.to_vec(&one).unwrap()) < 1e-12);

    for _ in 0..2 {
        let big = 1500;
        let a = batch_of(big, 4, |i| {
            let mut m = vec![2.0, 0.0, 0.0, 2.0];
            if i == 1234 {
                m[0] = -2.0;
            }
            m
        });
        let mut d = t.from_host(&a).unwrap();
        PotrfBatched::new(2, big).run(&t, &mut d).unwrap();
        let e = t.synchronize().unwrap_err();
        assert!(
            e.to_string().contains("problem 1234 of a batch of 1500"),
            "{e}"
        );
        assert!(!e.to_string().contains("also failed"), "{e}");
        assert!(matches!(
            e.root(),
            Error::NotPositiveDefinite { minor: 1, .. }
        ));
    }
    // A good batch after the failures: clean.
    let mut d = t
        .from_host(&batch_of(1500, 4, |_| vec![4.0, 0.0, 0.0, 9.0]))
        .unwrap();
    PotrfBatched::new(2, 1500).run(&t, &mut d).unwrap();
    let f = t.to_vec(&d).unwrap();
    assert!(f.chunks(4).all(|m| m[0] == 2.0 && m[3] == 3.0));
}
backend_tests!(a_failing_problem_is_named_with_the_others);

/// Overlapping written matrices, a buffer too short for the batch and a
/// leading dimension below `n` are `Error::Shape`, and a batch in a
/// capture `Error::Capturing` naming the call, each with nothing queued
/// (no result left to check); an empty batch or `n = 0` queues nothing.
fn bad_batches_are_refused(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f64>(4 * 16).unwrap();
    let shape = |r: gpu_sched::Result<()>, needle: &str| match r {
        Err(Error::Shape { problem, .. }) => assert!(problem.contains(needle), "{problem}"),
        other => panic!("{other:?}"),
    };
    shape(PotrfBatched::new(4, 4).stride(8).run(&t, &mut a), "overlap");
    shape(PotrfBatched::new(4, 5).run(&t, &mut a), "needed");
    shape(
        PotrfBatched::new(4, 2).ld(3).run(&t, &mut a),
        "leading dimension",
    );
    let mut b = t.zeros::<f64>(8).unwrap();
    shape(PotrsBatched::new(4, 1, 4).run(&t, &a, &mut b), "needed");
    shape(
        PotrsBatched::new(4, 2, 2).stride(16, 4).run(&t, &a, &mut b),
        "overlap",
    );
    // Sizes whose products overflow: a shape error, never a panic.
    let huge = usize::MAX / 2;
    assert!(matches!(
        PotrfBatched::new(3, 2).ld(huge).run(&t, &mut a),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        PotrsBatched::new(3, huge, 2).run(&t, &a, &mut b),
        Err(Error::Shape { .. })
    ));
    // In a capture: refused by name before anything is queued (the
    // pointer arrays come from host memory, which a graph cannot hold).
    let e = t
        .capture(|c| PotrfBatched::new(4, 4).run(c, &mut a))
        .unwrap_err();
    assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
    assert!(e.to_string().contains("potrfBatched"), "{e}");
    let e = t
        .capture(|c| PotrsBatched::new(4, 1, 1).run(c, &a, &mut b))
        .unwrap_err();
    assert!(e.to_string().contains("potrsBatched"), "{e}");
    PotrfBatched::new(4, 0).run(&t, &mut a).unwrap();
    PotrfBatched::new(0, 3).run(&t, &mut a).unwrap();
    PotrsBatched::new(4, 0, 2).run(&t, &a, &mut b).unwrap();
    assert!(!t.has_unchecked_results());
    t.synchronize().unwrap();
}
backend_tests!(bad_batches_are_refused);
