//! `gpu_libs::sparse` (DESIGN "Numerical libraries and foreign work"): cuSPARSE on the CUDA backend, loops on the
//! host backend. Products match a dense reference on random sparse
//! matrices (empty rows, no entries at all, transposed, padded leading
//! dimensions); every rule of the CSR structure is enforced at upload and
//! every shape before anything is queued; a product is ordered after a
//! gated writer of its input and before a reader of its output on other
//! tasks.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, values, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::blas::{Op, Scalar};
use gpu_libs::sparse::{self, Csr, Spmm};
use gpu_sched::{Error, Runtime};
use std::time::Duration;

/// A random `m x n` CSR matrix of about `density` (every third row
/// empty), and the same matrix dense, column-major.
fn random(m: usize, n: usize, density: f64, seed: u64) -> (Vec<i32>, Vec<i32>, Vec<f64>, Vec<f64>) {
    let coin = values(m * n, seed);
    let vals = values(m * n, seed + 1);
    let (mut rp, mut ci, mut v) = (vec![0i32], vec![], vec![]);
    let mut dense = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            if i % 3 != 1 && (coin[i * n + j] + 1.0) / 2.0 < density {
                ci.push(j as i32);
                v.push(vals[i * n + j]);
                dense[i + j * m] = vals[i * n + j];
            }
        }
        rp.push(ci.len() as i32);
    }
    (rp, ci, v, dense)
}

/// `C = alpha op(A) B + beta C` on dense column-major operands (`A` is
/// `m x n`, `B` `cols x k` with `ldb`, `C` `rows x k` with `ldc`).
#[allow(clippy::too_many_arguments)]
fn reference(
    (m, n): (usize, usize),
    op: Op,
    (alpha, beta): (f64, f64),
    a: &[f64],
    (b, ldb): (&[f64], usize),
    (c, ldc): (&mut [f64], usize),
    k: usize,
) {
    let (rows, cols) = if op == Op::N { (m, n) } else { (n, m) };
    for j in 0..k {
        for i in 0..rows {
            let s: f64 = (0..cols)
                .map(|p| {
                    let aip = if op == Op::N {
                        a[i + p * m]
                    } else {
                        a[p + i * m]
                    };
                    aip * b[p + j * ldb]
                })
                .sum();
            let old = if beta == 0.0 {
                0.0
            } else {
                beta * c[i + j * ldc]
            };
            c[i + j * ldc] = alpha * s + old;
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

/// SpMV of `T` against the dense reference: several shapes and
/// densities, both ops, `beta = 0` over NaNs (never read) and `beta != 0`.
fn spmv_case<T: Scalar + Into<f64> + Default>(rt: &Runtime, from: fn(f64) -> T, tol: f64) {
    let t = rt.begin_task().unwrap();
    let conv = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<T>>();
    let back = |v: Vec<T>| v.into_iter().map(Into::into).collect::<Vec<f64>>();
    for (seed, (m, n, density)) in [(40, 33, 0.2), (7, 50, 0.5), (64, 64, 0.05), (1, 1, 1.0)]
        .into_iter()
        .enumerate()
    {
        let seed = seed as u64 * 10;
        let (rp, ci, v, dense) = random(m, n, density, seed);
        let a = Csr::from_host(&t, m, n, &rp, &ci, &conv(&v)).unwrap();
        assert_eq!((a.m(), a.n(), a.nnz()), (m, n, v.len()));
        for op in [Op::N, Op::T] {
            let (rows, cols) = if op == Op::N { (m, n) } else { (n, m) };
            let x = values(cols, seed + 2);
            let dx = t.from_host(&conv(&x)).unwrap();
            for (alpha, beta) in [(1.0, 0.0), (-0.5, 2.0)] {
                let mut y = values(rows, seed + 3);
                let mut dy = if beta == 0.0 {
                    t.from_host(&vec![from(f64::NAN); rows]).unwrap()
                } else {
                    t.from_host(&conv(&y)).unwrap()
                };
                sparse::spmv_op(&t, op, from(alpha), &a, &dx, from(beta), &mut dy).unwrap();
                reference(
                    (m, n),
                    op,
                    (alpha, beta),
                    &dense,
                    (&x, cols),
                    (&mut y, rows),
                    1,
                );
                close(&back(t.to_vec(&dy).unwrap()), &y, tol);
            }
        }
    }
}

/// f32 within 1e-5 and f64 within 1e-12, relative to `1 + |want|`.
fn spmv_matches_a_dense_reference(rt: &Runtime) {
    spmv_case::<f32>(rt, |x| x as f32, 1e-5);
    spmv_case::<f64>(rt, |x| x, 1e-12);
}
backend_tests!(spmv_matches_a_dense_reference);

/// SpMM of `T` against the reference: both ops, padded leading
/// dimensions (the padding of `C` is never written).
fn spmm_case<T: Scalar + Into<f64> + Default>(rt: &Runtime, from: fn(f64) -> T, tol: f64) {
    let t = rt.begin_task().unwrap();
    let conv = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<T>>();
    let (m, n, kk) = (30, 21, 5);
    let (rp, ci, v, dense) = random(m, n, 0.25, 7);
    let a = Csr::from_host(&t, m, n, &rp, &ci, &conv(&v)).unwrap();
    for op in [Op::N, Op::T] {
        let (rows, cols) = if op == Op::N { (m, n) } else { (n, m) };
        let (ldb, ldc) = (cols + 3, rows + 2);
        let b = values(ldb * kk, 8);
        let mut c = values(ldc * kk, 9);
        let db = t.from_host(&conv(&b)).unwrap();
        let mut dc = t.from_host(&conv(&c)).unwrap();
        Spmm::new(kk)
            .op(op)
            .alpha(from(1.5))
            .beta(from(-0.5))
            .ld(ldb, ldc)
            .run(&t, &a, &db, &mut dc)
            .unwrap();
        reference(
            (m, n),
            op,
            (1.5, -0.5),
            &dense,
            (&b, ldb),
            (&mut c, ldc),
            kk,
        );
        let got: Vec<f64> = t.to_vec(&dc).unwrap().into_iter().map(Into::into).collect();
        close(&got, &c, tol);
    }
    // Packed, through the function.
    let b = values(n * kk, 10);
    let db = t.from_host(&conv(&b)).unwrap();
    let mut dc = t.zeros::<T>(m * kk).unwrap();
    sparse::spmm(&t, kk, from(1.0), &a, &db, from(0.0), &mut dc).unwrap();
    let mut c = vec![0.0; m * kk];
    reference((m, n), Op::N, (1.0, 0.0), &dense, (&b, n), (&mut c, m), kk);
    let got: Vec<f64> = t.to_vec(&dc).unwrap().into_iter().map(Into::into).collect();
    close(&got, &c, tol);
}

fn spmm_matches_a_dense_reference(rt: &Runtime) {
    spmm_case::<f32>(rt, |x| x as f32, 1e-5);
    spmm_case::<f64>(rt, |x| x, 1e-12);
}
backend_tests!(spmm_matches_a_dense_reference);

/// A matrix without entries gives `beta y` (zeros over NaNs for `beta =
/// 0`), an SpMM's padding untouched; empty outputs and `n = 0` work.
fn empty_matrices_and_shapes(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let a = Csr::<f64>::from_host(&t, 3, 4, &[0, 0, 0, 0], &[], &[]).unwrap();
    assert_eq!(a.nnz(), 0);
    let x = t.from_host(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut y = t.from_host(&[1.0, 2.0, 3.0]).unwrap();
    sparse::spmv(&t, 1.0, &a, &x, 2.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [2.0, 4.0, 6.0]);
    let mut y = t.from_host(&[f64::NAN; 3]).unwrap();
    sparse::spmv(&t, 1.0, &a, &x, 0.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [0.0; 3]);
    // SpMM, C of 3 x 2 with ldc 4: the padding keeps its 9s.
    let b = t.from_host(&[1.0; 8]).unwrap();
    let mut c = t.from_host(&[9.0; 8]).unwrap();
    Spmm::new(2)
        .beta(0.5)
        .ld(4, 4)
        .run(&t, &a, &b, &mut c)
        .unwrap();
    assert_eq!(
        t.to_vec(&c).unwrap(),
        [4.5, 4.5, 4.5, 9.0, 4.5, 4.5, 4.5, 9.0]
    );
    // 3 x 0: x is empty, y = beta y.
    let z = Csr::<f64>::from_host(&t, 3, 0, &[0, 0, 0, 0], &[], &[]).unwrap();
    let e = t.zeros::<f64>(0).unwrap();
    let mut y = t.from_host(&[1.0, 2.0, 3.0]).unwrap();
    sparse::spmv(&t, 1.0, &z, &e, -1.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [-1.0, -2.0, -3.0]);
    // 0 x 3: y is empty, nothing to do; transposed, y = beta y.
    let w = Csr::<f64>::from_host(&t, 0, 3, &[0], &[], &[]).unwrap();
    let mut e2 = t.zeros::<f64>(0).unwrap();
    let x3 = t.from_host(&[1.0; 3]).unwrap();
    sparse::spmv(&t, 1.0, &w, &x3, 0.0, &mut e2).unwrap();
    let mut y = t.from_host(&[5.0; 3]).unwrap();
    sparse::spmv_op(&t, Op::T, 1.0, &w, &e2, 3.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [15.0; 3]);
    // k = 0: nothing.
    Spmm::new(0).run(&t, &a, &e, &mut e2).unwrap();
}
backend_tests!(empty_matrices_and_shapes);

fn shape(e: Error, needle: &str) {
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
}

/// Every rule of the structure, refused at upload.
fn bad_structures_are_refused(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let v = [1.0f32, 2.0, 3.0];
    let bad = |m: usize, n: usize, rp: &[i32], ci: &[i32], v: &[f32]| {
        Csr::from_host(&t, m, n, rp, ci, v).unwrap_err()
    };
    shape(
        bad(2, 3, &[0, 1, 2, 3], &[0, 1, 2], &v),
        "row_ptr has 4 elements, m + 1 = 3",
    );
    shape(
        bad(2, 3, &[0, 1, 3], &[0, 1], &v),
        "col_idx has 2 elements, values 3",
    );
    shape(
        bad(2, 3, &[1, 2, 3], &[0, 1, 2], &v),
        "row_ptr[0] = 1, not 0",
    );
    shape(
        bad(3, 3, &[0, 2, 1, 3], &[0, 1, 2], &v),
        "row_ptr decreases",
    );
    shape(
        bad(2, 3, &[0, 1, 2], &[0, 1, 2], &v),
        "row_ptr[m] = 2, nnz = 3",
    );
    shape(
        bad(2, 3, &[0, 1, 4], &[0, 1, 2], &v),
        "row_ptr[m] = 4, nnz = 3",
    );
    shape(
        bad(2, 3, &[0, 1, 3], &[0, 3, 2], &v),
        "col_idx[1] = 3 is not in 0..n",
    );
    shape(
        bad(2, 3, &[0, 1, 3], &[0, -1, 2], &v),
        "col_idx[1] = -1 is not in 0..n",
    );
    shape(
        bad(1, 0, &[0, 1], &[0], &v[..1]),
        "col_idx[0] = 0 is not in 0..n = 0..0",
    );
    shape(
        bad(1, 1 << 31, &[0, 0], &[], &[]),
        "does not fit cuSPARSE's 32-bit indices",
    );
    // A good one, with an empty row, unsorted and repeated columns.
    let a = Csr::from_host(
        &t,
        3,
        3,
        &[0, 3, 3, 4],
        &[2, 0, 2, 1],
        &[1.0f32, 2.0, 3.0, 4.0],
    )
    .unwrap();
    let x = t.from_host(&[1.0f32, 10.0, 100.0]).unwrap();
    let mut y = t.zeros::<f32>(3).unwrap();
    sparse::spmv(&t, 1.0, &a, &x, 0.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [402.0, 0.0, 40.0]);
}
backend_tests!(bad_structures_are_refused);

/// Every shape error is refused before anything is queued: the outputs
/// keep their values.
fn bad_shapes_are_refused_before_anything_is_queued(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let (rp, ci, v, _) = random(4, 3, 0.7, 3);
    let a = Csr::from_host(&t, 4, 3, &rp, &ci, &v).unwrap();
    let x3 = t.from_host(&[1.0; 3]).unwrap();
    let x4 = t.from_host(&[1.0; 4]).unwrap();
    let mut y3 = t.from_host(&[7.0; 3]).unwrap();
    let mut y4 = t.from_host(&[7.0; 4]).unwrap();
    let mut y5 = t.from_host(&[7.0; 5]).unwrap();
    shape(
        sparse::spmv(&t, 1.0, &a, &x4, 0.0, &mut y4).unwrap_err(),
        "x has 4 elements, op(A) takes 3",
    );
    shape(
        sparse::spmv(&t, 1.0, &a, &x3, 0.0, &mut y5).unwrap_err(),
        "y has 5 elements, op(A) gives 4",
    );
    shape(
        sparse::spmv_op(&t, Op::T, 1.0, &a, &x3, 0.0, &mut y3).unwrap_err(),
        "x has 3 elements, op(A) takes 4",
    );
    let b = t.from_host(&[1.0; 6]).unwrap();
    let mut c = t.from_host(&[7.0; 8]).unwrap();
    shape(
        Spmm::new(3).run(&t, &a, &b, &mut c).unwrap_err(),
        "B has 6 elements, 9 needed",
    );
    shape(
        Spmm::new(2).run(&t, &a, &b, &mut y5).unwrap_err(),
        "C has 5 elements, 8 needed",
    );
    shape(
        Spmm::new(2).ld(2, 4).run(&t, &a, &b, &mut c).unwrap_err(),
        "B: leading dimension 2 < max(1, rows = 3)",
    );
    shape(
        Spmm::new(2).ld(3, 3).run(&t, &a, &b, &mut c).unwrap_err(),
        "C: leading dimension 3 < max(1, rows = 4)",
    );
    let mut a = a;
    shape(
        a.set_values(&t, &[1.0]).unwrap_err(),
        &format!("1 values for {} entries", v.len()),
    );
    assert_eq!(t.to_vec(&y4).unwrap(), [7.0; 4]);
    assert_eq!(t.to_vec(&y5).unwrap(), [7.0; 5]);
    assert_eq!(t.to_vec(&y3).unwrap(), [7.0; 3]);
    assert_eq!(t.to_vec(&c).unwrap(), [7.0; 8]);
    assert_eq!(t.to_vec(a.values()).unwrap(), v);
}
backend_tests!(bad_shapes_are_refused_before_anything_is_queued);

/// The values can change, the structure cannot: new values by copy and
/// by a kernel through the view give the products they should.
fn values_change_in_place(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = Csr::from_host(&t, 2, 2, &[0, 1, 2], &[1, 0], &[1.0f32, 2.0]).unwrap();
    let x = t.from_host(&[1.0f32, 10.0]).unwrap();
    let mut y = t.zeros::<f32>(2).unwrap();
    a.set_values(&t, &[3.0, 4.0]).unwrap();
    sparse::spmv(&t, 1.0, &a, &x, 0.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [30.0, 4.0]);
    k::fill(&t, &mut a.values_mut().unwrap(), 0.5).unwrap();
    sparse::spmv(&t, 1.0, &a, &x, 0.0, &mut y).unwrap();
    assert_eq!(t.to_vec(&y).unwrap(), [5.0, 0.5]);
    assert_eq!(t.to_vec(a.row_ptr()).unwrap(), [0, 1, 2]);
    assert_eq!(t.to_vec(a.col_idx()).unwrap(), [1, 0]);
}
backend_tests!(values_change_in_place);

/// An SpMV reads `x` while its writer (another task) is held by a gate:
/// it is ordered after the writer (the gate opened in time, nothing
/// waited for it on the host), and a reader on a third task sees `y`. The
/// matrix was made on a fourth task: its arrays are ordered too.
fn spmv_is_ordered_between_its_writer_and_its_reader(rt: &Runtime) {
    let n = 4096;
    // A = 2 I.
    let rp: Vec<i32> = (0..=n as i32).collect();
    let ci: Vec<i32> = (0..n as i32).collect();
    let m = rt.begin_task().unwrap();
    let a = Csr::from_host(&m, n, n, &rp, &ci, &vec![2.0f32; n]).unwrap();
    let w = rt.begin_task().unwrap();
    let mut x = w.zeros::<f32>(n).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut x, 3.0).unwrap();
    let r = rt.begin_task().unwrap();
    let mut y = r.zeros::<f32>(n).unwrap();
    let before = rt.counters();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        sparse::spmv(&r, 1.0, &a, &x, 0.0, &mut y).unwrap();
    });
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(n).unwrap();
    k::axpy(&u, 1.0, &y, &mut z).unwrap();
    let got = u.to_vec(&z).unwrap();
    assert!(got.iter().all(|&v| v == 6.0), "z[0] = {}", got[0]);
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert!(
        d.device_waits >= 2,
        "the writer and the reader each wait: {d:?}"
    );
}
backend_tests!(spmv_is_ordered_between_its_writer_and_its_reader);

/// Streams come and go with bursts of tasks (DESIGN "Streams are a resource"); the handles do not pile
/// up with them: 300 bursts of 16 tasks, each an SpMV on a stream of its
/// own, leave the device's free memory where 10 bursts left it (within
/// 256 MiB).
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
    let (rp, ci, v, _) = random(128, 128, 0.1, 5);
    let t = rt.begin_task().unwrap();
    let a = Csr::from_host(&t, 128, 128, &rp, &ci, &v).unwrap();
    let x = t.from_host(&vec![1.0f64; 128]).unwrap();
    let mut outs: Vec<_> = (0..16).map(|_| t.zeros::<f64>(128).unwrap()).collect();
    rt.synchronize().unwrap();
    let burst = |outs: &mut Vec<gpu_sched::Buffer<f64>>| {
        let mut tasks: Vec<_> = outs
            .iter_mut()
            .map(|c| (rt.begin_task().unwrap(), c))
            .collect();
        for (u, c) in &mut tasks {
            sparse::spmv(u, 1.0, &a, &x, 0.0, &mut **c).unwrap();
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
    let want: Vec<f64> = (0..128)
        .map(|i| v[rp[i] as usize..rp[i + 1] as usize].iter().sum())
        .collect();
    close(&t.to_vec(&outs[3]).unwrap(), &want, 1e-12);
}
