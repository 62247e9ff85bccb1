//! `gpu_libs::blas` (DESIGN "Numerical libraries and foreign work"): cuBLAS on the CUDA backend, `matrixmultiply`
//! on the host backend, each operation ordered as a launch is (a gated
//! writer before it, a reader on another stream after it), its results
//! those of a plain reference product, and every shape, leading dimension
//! and stride checked against the buffers before anything is queued.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, values, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::blas::{self, Gemm, Gemv, Op, Scalar};
use gpu_sched::{Error, Runtime};
use std::time::Duration;

/// Element `(i, j)` of `op(X)`, `X` column-major with leading dimension
/// `ld`.
fn at(x: &[f64], op: Op, ld: usize, i: usize, j: usize) -> f64 {
    match op {
        Op::N => x[i + j * ld],
        Op::T => x[j + i * ld],
    }
}

/// The reference of one product: `C = alpha op(A) op(B) + beta C`.
#[allow(clippy::too_many_arguments)]
fn reference(
    (m, n, kk): (usize, usize, usize),
    (oa, ob): (Op, Op),
    (alpha, beta): (f64, f64),
    (a, lda): (&[f64], usize),
    (b, ldb): (&[f64], usize),
    (c, ldc): (&mut [f64], usize),
) {
    for j in 0..n {
        for i in 0..m {
            let s: f64 = (0..kk)
                .map(|p| at(a, oa, lda, i, p) * at(b, ob, ldb, p, j))
                .sum();
            c[i + j * ldc] = alpha * s + beta * c[i + j * ldc];
        }
    }
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: {g} != {w}"
        );
    }
}

/// A gemm of `T` against the reference, every combination of the two ops,
/// padded leading dimensions, alpha and beta.
fn gemm_case<T: Scalar + Into<f64> + Default>(rt: &Runtime, from: fn(f64) -> T, tol: f64) {
    let t = rt.begin_task().unwrap();
    let (m, n, kk) = (13, 7, 9);
    for (oa, ob) in [
        (Op::N, Op::N),
        (Op::T, Op::N),
        (Op::N, Op::T),
        (Op::T, Op::T),
    ] {
        let (ra, ca) = if oa == Op::N { (m, kk) } else { (kk, m) };
        let (rb, cb) = if ob == Op::N { (kk, n) } else { (n, kk) };
        let (lda, ldb, ldc) = (ra + 3, rb + 1, m + 2);
        let a = values(lda * ca, 1);
        let b = values(ldb * cb, 2);
        let mut c = values(ldc * n, 3);
        let conv = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<T>>();
        let da = t.from_host(&conv(&a)).unwrap();
        let db = t.from_host(&conv(&b)).unwrap();
        let mut dc = t.from_host(&conv(&c)).unwrap();
        Gemm::new(m, n, kk)
            .op_a(oa)
            .op_b(ob)
            .alpha(from(1.5))
            .beta(from(-0.5))
            .ld(lda, ldb, ldc)
            .run(&t, &da, &db, &mut dc)
            .unwrap();
        reference(
            (m, n, kk),
            (oa, ob),
            (1.5, -0.5),
            (&a, lda),
            (&b, ldb),
            (&mut c, ldc),
        );
        let got: Vec<f64> = t.to_vec(&dc).unwrap().into_iter().map(Into::into).collect();
        close(&got, &c, tol);
    }
}

fn gemm_matches_the_reference(rt: &Runtime) {
    gemm_case::<f32>(rt, |x| x as f32, 1e-5);
    gemm_case::<f64>(rt, |x| x, 1e-12);
}
backend_tests!(gemm_matches_the_reference);

/// A strided batch: three products, each against the reference.
fn batched_gemm_matches_the_reference(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let (m, n, kk, count) = (5, 4, 6, 3);
    let (sa, sb, sc) = (m * kk + 2, kk * n, m * n + 1);
    let a = values(sa * count, 4);
    let b = values(sb * count, 5);
    let mut c = vec![0.0; sc * count];
    let da = t.from_host(&a).unwrap();
    let db = t.from_host(&b).unwrap();
    let mut dc = t.from_host(&c).unwrap();
    Gemm::new(m, n, kk)
        .batched(count, sa, sb, sc)
        .run(&t, &da, &db, &mut dc)
        .unwrap();
    for i in 0..count {
        reference(
            (m, n, kk),
            (Op::N, Op::N),
            (1.0, 0.0),
            (&a[i * sa..], m),
            (&b[i * sb..], kk),
            (&mut c[i * sc..], m),
        );
    }
    close(&t.to_vec(&dc).unwrap(), &c, 1e-12);
}
backend_tests!(batched_gemm_matches_the_reference);

/// The level-1 and level-2 operations against plain loops; dot and nrm2
/// write a device scalar, read by a kernel without a host wait.
fn vector_operations_match_plain_loops(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let n = 1000;
    let x = values(n, 6);
    let y = values(n, 7);
    let dx = t.from_host(&x).unwrap();
    let mut dy = t.from_host(&y).unwrap();
    blas::axpy(&t, 2.0, &dx, &mut dy).unwrap();
    let mut want: Vec<f64> = x.iter().zip(&y).map(|(x, y)| 2.0 * x + y).collect();
    close(&t.to_vec(&dy).unwrap(), &want, 1e-14);
    blas::scal(&t, -3.0, &mut dy).unwrap();
    want.iter_mut().for_each(|w| *w *= -3.0);
    close(&t.to_vec(&dy).unwrap(), &want, 1e-14);
    let mut d = t.zeros::<f64>(1).unwrap();
    let mut r = t.zeros::<f64>(1).unwrap();
    blas::dot(&t, &dx, &dy, &mut d).unwrap();
    blas::nrm2(&t, &dx, &mut r).unwrap();
    let dot: f64 = x.iter().zip(&want).map(|(a, b)| a * b).sum();
    let nrm = x.iter().map(|a| a * a).sum::<f64>().sqrt();
    close(&t.to_vec(&d).unwrap(), &[dot], 1e-12);
    close(&t.to_vec(&r).unwrap(), &[nrm], 1e-12);
    // gemv, as stored and transposed, with a padded leading dimension.
    let (m, nn, lda) = (6, 4, 8);
    let a = values(lda * nn, 8);
    let da = t.from_host(&a).unwrap();
    for op in [Op::N, Op::T] {
        let (xs, ys) = if op == Op::N { (nn, m) } else { (m, nn) };
        let v = values(xs, 9);
        let w0 = values(ys, 10);
        let dv = t.from_host(&v).unwrap();
        let mut dw = t.from_host(&w0).unwrap();
        Gemv::new(m, nn)
            .op(op)
            .alpha(0.5)
            .beta(2.0)
            .lda(lda)
            .run(&t, &da, &dv, &mut dw)
            .unwrap();
        let mut w = w0.clone();
        reference(
            (ys, 1, xs),
            (op, Op::N),
            (0.5, 2.0),
            (&a, lda),
            (&v, xs),
            (&mut w, ys),
        );
        close(&t.to_vec(&dw).unwrap(), &w, 1e-12);
    }
}
backend_tests!(vector_operations_match_plain_loops);

/// A gemm reads `A` while its writer (another task) is held by a gate: it
/// is ordered after the writer (the gate opened in time, nothing waited for
/// it on the host), and a reader on a third task sees the product.
fn gemm_is_ordered_between_its_writer_and_its_reader(rt: &Runtime) {
    let n = 64;
    let w = rt.begin_task().unwrap();
    let mut a = w.zeros::<f32>(n * n).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 2.0).unwrap();
    let r = rt.begin_task().unwrap();
    let b = r.from_host(&vec![0.5f32; n * n]).unwrap();
    let mut c = r.zeros::<f32>(n * n).unwrap();
    let before = rt.counters();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        Gemm::new(n, n, n).run(&r, &a, &b, &mut c).unwrap();
    });
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(n * n).unwrap();
    k::axpy(&u, 1.0, &c, &mut z).unwrap();
    let got = u.to_vec(&z).unwrap();
    assert!(got.iter().all(|&v| v == n as f32), "z[0] = {}", got[0]);
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert!(
        d.device_waits >= 2,
        "the writer and the reader each wait: {d:?}"
    );
}
backend_tests!(gemm_is_ordered_between_its_writer_and_its_reader);

fn shape(e: Error, needle: &str) {
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
}

/// Every shape error is refused before anything is queued: the output
/// keeps its values.
fn bad_shapes_are_refused_before_anything_is_queued(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let a = t.from_host(&[1.0f32; 12]).unwrap();
    let b = t.from_host(&[1.0f32; 12]).unwrap();
    let mut c = t.from_host(&[7.0f32; 12]).unwrap();
    let r = |g: Gemm<f32>, c: &mut gpu_sched::Buffer<f32>| g.run(&t, &a, &b, c).unwrap_err();
    shape(
        r(Gemm::new(4, 3, 4), &mut c),
        "A has 12 elements, 16 needed",
    );
    shape(
        r(Gemm::new(3, 3, 3).ld(2, 3, 3), &mut c),
        "leading dimension 2 < max(1, rows = 3)",
    );
    shape(
        r(Gemm::new(3, 5, 3).op_b(Op::T).ld(3, 5, 3), &mut c),
        "B has 12 elements, 15 needed",
    );
    shape(
        r(Gemm::new(2, 2, 2).batched(3, 4, 4, 3), &mut c),
        "the batch's outputs overlap",
    );
    shape(
        r(Gemm::new(2, 2, 2).batched(4, 0, 0, 4), &mut c),
        "C has 12 elements, 16 needed",
    );
    shape(r(Gemm::new(usize::MAX / 2, 1, 1), &mut c), "");
    let mut y = t.from_host(&[7.0f32; 3]).unwrap();
    let x = t.from_host(&[1.0f32; 4]).unwrap();
    shape(
        Gemv::new(3, 3).run(&t, &a, &x, &mut y).unwrap_err(),
        "x has 4 elements, op(A) takes 3",
    );
    shape(
        blas::axpy(&t, 1.0, &x, &mut y).unwrap_err(),
        "x has 4 elements, y 3",
    );
    shape(blas::dot(&t, &x, &x, &mut y).unwrap_err(), "1 expected");
    shape(blas::nrm2(&t, &x, &mut y).unwrap_err(), "1 expected");
    assert_eq!(t.to_vec(&c).unwrap(), [7.0; 12]);
    assert_eq!(t.to_vec(&y).unwrap(), [7.0; 3]);
}
backend_tests!(bad_shapes_are_refused_before_anything_is_queued);

/// Views work as operands (a product into one half of a split buffer) and
/// empty shapes queue nothing and succeed.
fn views_and_empty_shapes(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let a = t.from_host(&[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let mut c = t.from_host(&[9.0f64; 8]).unwrap();
    {
        let mut hi = c.slice_mut(4..).unwrap();
        Gemm::new(2, 2, 2)
            .run(&t, &a, &a.slice(..).unwrap(), &mut hi)
            .unwrap();
    }
    assert_eq!(
        t.to_vec(&c).unwrap(),
        [9.0, 9.0, 9.0, 9.0, 7.0, 10.0, 15.0, 22.0]
    );
    let e = t.zeros::<f64>(0).unwrap();
    let mut e2 = t.zeros::<f64>(0).unwrap();
    Gemm::new(0, 0, 5).run(&t, &e, &e, &mut e2).unwrap();
    blas::axpy(&t, 1.0, &e, &mut e2).unwrap();
}
backend_tests!(views_and_empty_shapes);

/// Streams come and go with bursts of tasks (DESIGN "Streams are a resource"); the handles do not pile
/// up with them: 300 bursts of 16 tasks, each a gemm on a stream of its
/// own, leave the device's free memory where 10 bursts left it (within
/// 256 MiB; one handle per new stream would take gigabytes).
#[test]
#[ignore = "needs a CUDA GPU"]
fn handles_stay_bounded_while_streams_come_and_go() {
    fn free_bytes() -> usize {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: two valid out-pointers; the runtime's context is current
        // on this thread (its calls bound it).
        unsafe { cudarc::driver::sys::cuMemGetInfo_v2(&mut free, &mut total) }
            .result()
            .unwrap();
        free
    }
    let rt = common::runtime(gpu_sched::BackendKind::Cuda);
    let n = 128;
    let t = rt.begin_task().unwrap();
    let a = t.from_host(&vec![1.0f32; n * n]).unwrap();
    let mut outs: Vec<_> = (0..16).map(|_| t.zeros::<f32>(n * n).unwrap()).collect();
    rt.synchronize().unwrap();
    let burst = |outs: &mut Vec<gpu_sched::Buffer<f32>>| {
        // All 16 live at once: 16 streams, given back together.
        let mut tasks: Vec<_> = outs
            .iter_mut()
            .map(|c| (rt.begin_task().unwrap(), c))
            .collect();
        for (u, c) in &mut tasks {
            Gemm::new(n, n, n).run(u, &a, &a, &mut **c).unwrap();
        }
        drop(tasks);
        rt.synchronize().unwrap();
    };
    for _ in 0..10 {
        burst(&mut outs);
    }
    let before = free_bytes();
    for _ in 0..300 {
        burst(&mut outs);
    }
    let after = free_bytes();
    assert!(
        after + (256 << 20) >= before,
        "free device memory fell from {before} to {after} bytes"
    );
    assert!(t.to_vec(&outs[3]).unwrap().iter().all(|&v| v == n as f32));
}

/// `trsm` for every side, triangle, op and diagonal: `op(A) X` (or `X
/// op(A)`) gives back `alpha B`, with `A` well conditioned (a dominant
/// diagonal) and its other triangle filled with garbage that must not be
/// read.
fn trsm_solves_every_variant(rt: &Runtime) {
    use blas::{Diag, Side, Trsm, Uplo};
    let t = rt.begin_task().unwrap();
    let (m, n) = (7, 5);
    for side in [Side::Left, Side::Right] {
        for uplo in [Uplo::Lower, Uplo::Upper] {
            for op in [Op::N, Op::T] {
                for diag in [Diag::NonUnit, Diag::Unit] {
                    let d = if side == Side::Left { m } else { n };
                    let lda = d + 2;
                    let mut a = values(lda * d, 11);
                    for j in 0..d {
                        for i in 0..d {
                            let inside = if uplo == Uplo::Lower { i >= j } else { i <= j };
                            if !inside {
                                a[i + j * lda] = f64::NAN; // never read
                            } else if i == j {
                                a[i + j * lda] = if diag == Diag::Unit {
                                    f64::NAN
                                } else {
                                    4.0 + a[i + j * lda]
                                };
                            }
                        }
                    }
                    let ldb = m + 1;
                    let b0 = values(ldb * n, 12);
                    let da = t.from_host(&a).unwrap();
                    let mut db = t.from_host(&b0).unwrap();
                    Trsm::new(m, n)
                        .side(side)
                        .uplo(uplo)
                        .op(op)
                        .diag(diag)
                        .alpha(2.0)
                        .ld(lda, ldb)
                        .run(&t, &da, &mut db)
                        .unwrap();
                    let x = t.to_vec(&db).unwrap();
                    // The triangle as a full matrix, diagonal as declared.
                    let tri = |i: usize, j: usize| {
                        let (i, j) = if op == Op::N { (i, j) } else { (j, i) };
                        let inside = if uplo == Uplo::Lower { i >= j } else { i <= j };
                        match (inside, i == j, diag) {
                            (false, ..) => 0.0,
                            (true, true, Diag::Unit) => 1.0,
                            _ => a[i + j * lda],
                        }
                    };
                    for j in 0..n {
                        for i in 0..m {
                            let got: f64 = match side {
                                Side::Left => (0..m).map(|p| tri(i, p) * x[p + j * ldb]).sum(),
                                Side::Right => (0..n).map(|p| x[i + p * ldb] * tri(p, j)).sum(),
                            };
                            let want = 2.0 * b0[i + j * ldb];
                            assert!(
                                (got - want).abs() < 1e-10,
                                "{side:?} {uplo:?} {op:?} {diag:?} ({i}, {j}): {got} != {want}"
                            );
                        }
                        // B's padding row is untouched.
                        assert_eq!(x[m + j * ldb], b0[m + j * ldb]);
                    }
                }
            }
        }
    }
}
backend_tests!(trsm_solves_every_variant);

/// `syrk` against the reference product, on either triangle and op; the
/// other triangle keeps its values.
fn syrk_updates_one_triangle(rt: &Runtime) {
    use blas::{Syrk, Uplo};
    let t = rt.begin_task().unwrap();
    let (n, kk) = (6, 4);
    for uplo in [Uplo::Lower, Uplo::Upper] {
        for op in [Op::N, Op::T] {
            let (ra, ca) = if op == Op::N { (n, kk) } else { (kk, n) };
            let (lda, ldc) = (ra + 1, n + 3);
            let a = values(lda * ca, 13);
            let c0 = values(ldc * n, 14);
            let da = t.from_host(&a).unwrap();
            let mut dc = t.from_host(&c0).unwrap();
            Syrk::new(n, kk)
                .uplo(uplo)
                .op(op)
                .alpha(0.5)
                .beta(-1.0)
                .ld(lda, ldc)
                .run(&t, &da, &mut dc)
                .unwrap();
            let mut want = c0.clone();
            let ob = if op == Op::N { Op::T } else { Op::N };
            reference(
                (n, n, kk),
                (op, ob),
                (0.5, -1.0),
                (&a, lda),
                (&a, lda),
                (&mut want, ldc),
            );
            let got = t.to_vec(&dc).unwrap();
            for j in 0..n {
                for i in 0..ldc {
                    let inside = i < n && if uplo == Uplo::Lower { i >= j } else { i <= j };
                    let w = if inside {
                        want[i + j * ldc]
                    } else {
                        c0[i + j * ldc]
                    };
                    let g = got[i + j * ldc];
                    assert!(
                        (g - w).abs() < 1e-12,
                        "{uplo:?} {op:?} ({i}, {j}): {g} != {w}"
                    );
                }
            }
        }
    }
}
backend_tests!(syrk_updates_one_triangle);

/// A factor computed on the device feeds the next operation there: `d =
/// x . x`, `y = d x + y`, `y = d y`, with no host wait until the result is
/// read; a factor buffer of two elements is refused.
fn device_scalars_chain_without_a_host_wait(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let n = 300;
    let x = values(n, 15);
    let y = values(n, 16);
    let dx = t.from_host(&x).unwrap();
    let mut dy = t.from_host(&y).unwrap();
    let mut d = t.zeros::<f64>(1).unwrap();
    t.synchronize().unwrap();
    let before = rt.counters();
    blas::dot(&t, &dx, &dx, &mut d).unwrap();
    blas::axpy_dev(&t, &d, &dx, &mut dy).unwrap();
    blas::scal_dev(&t, &d, &mut dy).unwrap();
    let waits = rt.counters().since(&before);
    assert_eq!(waits.host_syncs, 0, "a host wait in the chain: {waits:?}");
    let a: f64 = x.iter().map(|v| v * v).sum();
    let want: Vec<f64> = x.iter().zip(&y).map(|(x, y)| a * (a * x + y)).collect();
    close(&t.to_vec(&dy).unwrap(), &want, 1e-12);
    let two = t.zeros::<f64>(2).unwrap();
    shape(
        blas::axpy_dev(&t, &two, &dx, &mut dy).unwrap_err(),
        "the factor buffer has 2 elements",
    );
    shape(
        blas::scal_dev(&t, &two, &mut dy).unwrap_err(),
        "the factor buffer has 2 elements",
    );
}
backend_tests!(device_scalars_chain_without_a_host_wait);
