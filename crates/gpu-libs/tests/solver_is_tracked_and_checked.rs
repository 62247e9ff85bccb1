//! `gpu_libs::solver` (DESIGN "Numerical libraries and foreign work"): cuSOLVER on the CUDA backend, `faer` on the
//! host backend. Each factorization and solve against its defining
//! identity (`L L^T = A`, `P A = L U`, `Q R = A`, `A X = B`) with stated
//! tolerances; a factorization's `info` reported at the next wait, never
//! at the call (no host wait on the fast path), and never lost; shapes
//! refused before anything is queued; ordering with a gated writer.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, spd, values, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::solver::{Geqrf, Getrf, Getrs, Op, Pivots, Potrf, Potrs, Uplo};
use gpu_sched::plumbing::TaskHooks;
use gpu_sched::{Error, Runtime};
use std::time::Duration;

/// `max |x - y| / max |y|` over the entries `(i, j)` of two `rows x cols`
/// matrices with leading dimensions `lx`, `ly`.
fn rel_err(x: &[f64], lx: usize, y: &[f64], ly: usize, rows: usize, cols: usize) -> f64 {
    let (mut d, mut s) = (0f64, 0f64);
    for j in 0..cols {
        for i in 0..rows {
            d = d.max((x[i + j * lx] - y[i + j * ly]).abs());
            s = s.max(y[i + j * ly].abs());
        }
    }
    d / s.max(f64::MIN_POSITIVE)
}

/// `A B` for column-major `A` (`m x k`, `lda`) and `B` (`k x n`, `ldb`),
/// packed.
fn matmul(
    a: &[f64],
    lda: usize,
    b: &[f64],
    ldb: usize,
    (m, k, n): (usize, usize, usize),
) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            c[i + j * m] = (0..k).map(|p| a[i + p * lda] * b[p + j * ldb]).sum();
        }
    }
    c
}

/// potrf then potrs, both triangles, f64 and f32, with a padded leading
/// dimension: the factor reproduces `A` (relative 1e-12 in f64, 1e-4 in
/// f32), the other triangle is untouched, and the solve's residual is
/// small.
fn cholesky_factors_and_solves(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for (n, nrhs) in [(1, 1), (17, 3), (64, 5)] {
        let ld = n + 3;
        let a = spd(n, ld, n as u64);
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let mut da = t.from_host(&a).unwrap();
            Potrf::new(n).uplo(uplo).ld(ld).run(&t, &mut da).unwrap();
            let f = t.to_vec(&da).unwrap();
            // L (or U^T) packed, zeros in the other triangle.
            let mut l = vec![0.0; n * n];
            for j in 0..n {
                for i in j..n {
                    l[i + j * n] = match uplo {
                        Uplo::Lower => f[i + j * ld],
                        Uplo::Upper => f[j + i * ld],
                    };
                }
            }
            let mut lt = vec![0.0; n * n];
            for j in 0..n {
                for i in 0..n {
                    lt[i + j * n] = l[j + i * n];
                }
            }
            let llt = matmul(&l, n, &lt, n, (n, n, n));
            let e = rel_err(&llt, n, &a, ld, n, n);
            assert!(e < 1e-12, "n = {n}, {uplo:?}: L L^T off by {e}");
            for j in 0..n {
                for i in 0..n {
                    let other = match uplo {
                        Uplo::Lower => i < j,
                        Uplo::Upper => i > j,
                    };
                    if other || i >= n {
                        assert_eq!(f[i + j * ld], a[i + j * ld], "({i}, {j}) was written");
                    }
                }
            }
            let b = values(n * nrhs, 99);
            let mut db = t.from_host(&b).unwrap();
            Potrs::new(n, nrhs)
                .uplo(uplo)
                .ld(ld, n)
                .run(&t, &da, &mut db)
                .unwrap();
            let x = t.to_vec(&db).unwrap();
            let ax = matmul(&a, ld, &x, n, (n, n, nrhs));
            let e = rel_err(&ax, n, &b, n, n, nrhs);
            assert!(e < 1e-10, "n = {n}, {uplo:?}: A X - B off by {e}");
        }
        // f32: the same factorization, looser.
        let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let mut da = t.from_host(&a32).unwrap();
        Potrf::new(n).ld(ld).run(&t, &mut da).unwrap();
        let f: Vec<f64> = t.to_vec(&da).unwrap().into_iter().map(f64::from).collect();
        let l: Vec<f64> = (0..n * n)
            .map(|q| {
                let (i, j) = (q % n, q / n);
                if i >= j {
                    f[i + j * ld]
                } else {
                    0.0
                }
            })
            .collect();
        let lt: Vec<f64> = (0..n * n).map(|q| l[q / n + (q % n) * n]).collect();
        let e = rel_err(&matmul(&l, n, &lt, n, (n, n, n)), n, &a, ld, n, n);
        assert!(e < 1e-4, "f32, n = {n}: L L^T off by {e}");
    }
}
backend_tests!(cholesky_factors_and_solves);

/// getrf then getrs (as stored and transposed), square and not: `P A = L
/// U` from the pivots (relative 1e-12), pivots in range, and the solve's
/// residual small.
fn lu_factors_and_solves(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for (m, n) in [(1, 1), (12, 12), (40, 40), (30, 20), (20, 30)] {
        let ld = m + 2;
        let a = values(ld * n, (m * 100 + n) as u64);
        let k = m.min(n);
        let mut da = t.from_host(&a).unwrap();
        let mut ipiv = Pivots::new(&t, k).unwrap();
        Getrf::new(m, n).ld(ld).run(&t, &mut da, &mut ipiv).unwrap();
        let f = t.to_vec(&da).unwrap();
        let p = t.to_vec(ipiv.as_buffer()).unwrap();
        assert!(
            p.iter()
                .enumerate()
                .all(|(i, &v)| v as usize > i && v as usize <= m),
            "{p:?}"
        );
        // P A: the swaps applied to A's rows in order.
        let mut pa: Vec<f64> = (0..m * n).map(|q| a[q % m + (q / m) * ld]).collect();
        for (i, &v) in p.iter().enumerate() {
            let j = v as usize - 1;
            for c in 0..n {
                pa.swap(i + c * m, j + c * m);
            }
        }
        let l: Vec<f64> = (0..m * k)
            .map(|q| {
                let (i, j) = (q % m, q / m);
                match i.cmp(&j) {
                    std::cmp::Ordering::Greater => f[i + j * ld],
                    std::cmp::Ordering::Equal => 1.0,
                    std::cmp::Ordering::Less => 0.0,
                }
            })
            .collect();
        let u: Vec<f64> = (0..k * n)
            .map(|q| {
                let (i, j) = (q % k, q / k);
                if i <= j {
                    f[i + j * ld]
                } else {
                    0.0
                }
            })
            .collect();
        let lu = matmul(&l, m, &u, k, (m, k, n));
        let e = rel_err(&lu, m, &pa, m, m, n);
        assert!(e < 1e-12, "{m} x {n}: L U - P A off by {e}");
        if m != n {
            continue;
        }
        for op in [Op::N, Op::T] {
            let b = values(n * 2, 7);
            let mut db = t.from_host(&b).unwrap();
            Getrs::new(n, 2)
                .op(op)
                .ld(ld, n)
                .run(&t, &da, &ipiv, &mut db)
                .unwrap();
            let x = t.to_vec(&db).unwrap();
            let at: Vec<f64> = match op {
                Op::N => (0..n * n).map(|q| a[q % n + (q / n) * ld]).collect(),
                Op::T => (0..n * n).map(|q| a[q / n + (q % n) * ld]).collect(),
            };
            let ax = matmul(&at, n, &x, n, (n, n, 2));
            let e = rel_err(&ax, n, &b, n, n, 2);
            assert!(e < 1e-9, "{n}, {op:?}: A X - B off by {e}");
        }
    }
}
backend_tests!(lu_factors_and_solves);

/// geqrf: `Q = H_1 ... H_k` (from the vectors below the diagonal and
/// `tau`, LAPACK's convention) times `R` gives back `A` (relative 1e-12),
/// and `Q` is orthogonal.
fn qr_factors(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for (m, n) in [(1, 1), (25, 10), (16, 16), (10, 25)] {
        let a = values(m * n, (m * 7 + n) as u64);
        let k = m.min(n);
        let mut da = t.from_host(&a).unwrap();
        let mut tau = t.zeros::<f64>(k).unwrap();
        Geqrf::new(m, n).run(&t, &mut da, &mut tau).unwrap();
        let f = t.to_vec(&da).unwrap();
        let tau = t.to_vec(&tau).unwrap();
        // Q, m x m: H_1 (H_2 (... (H_k I))).
        let mut q: Vec<f64> = (0..m * m)
            .map(|x| if x % (m + 1) == 0 { 1.0 } else { 0.0 })
            .collect();
        for i in (0..k).rev() {
            let v: Vec<f64> = (0..m)
                .map(|r| match r.cmp(&i) {
                    std::cmp::Ordering::Less => 0.0,
                    std::cmp::Ordering::Equal => 1.0,
                    std::cmp::Ordering::Greater => f[r + i * m],
                })
                .collect();
            for c in 0..m {
                let d: f64 = (0..m).map(|r| v[r] * q[r + c * m]).sum();
                for r in 0..m {
                    q[r + c * m] -= tau[i] * v[r] * d;
                }
            }
        }
        let r: Vec<f64> = (0..m * n)
            .map(|x| if x % m <= x / m { f[x] } else { 0.0 })
            .collect();
        let qr = matmul(&q, m, &r, m, (m, m, n));
        let e = rel_err(&qr, m, &a, m, m, n);
        assert!(e < 1e-12, "{m} x {n}: Q R - A off by {e}");
        let mut qt = vec![0.0; m * m];
        for j in 0..m {
            for i in 0..m {
                qt[i + j * m] = q[j + i * m];
            }
        }
        let id: Vec<f64> = (0..m * m)
            .map(|x| if x % (m + 1) == 0 { 1.0 } else { 0.0 })
            .collect();
        let e = rel_err(&matmul(&qt, m, &q, m, (m, m, m)), m, &id, m, m, m);
        assert!(e < 1e-12, "{m} x {n}: Q^T Q - I off by {e}");
    }
}
backend_tests!(qr_factors);

/// An indefinite matrix: potrf returns `Ok` with no host wait; the next
/// synchronize says which minor failed, and the one after it is clean. A
/// singular one: getrf's zero pivot, reported by the next `to_vec` (of
/// another buffer).
fn info_is_reported_at_the_next_wait(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    // Leading minors: 4 > 0, 4*1 - 2*2 = 0: the second fails.
    let mut a = t
        .from_host(&[4.0f64, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 5.0])
        .unwrap();
    let other = t.from_host(&[1.0f64]).unwrap();
    t.synchronize().unwrap();
    let before = rt.counters();
    Potrf::new(3).run(&t, &mut a).unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.host_syncs, 0, "potrf waited on the host: {d:?}");
    assert!(t.has_unchecked_results());
    match t.synchronize() {
        Err(Error::NotPositiveDefinite {
            op: "potrf",
            minor: 2,
        }) => {}
        r => panic!("expected minor 2 not positive definite, got {r:?}"),
    }
    assert!(!t.has_unchecked_results());
    t.synchronize().unwrap();
    // Column 2 is twice column 1: U(2, 2) is exactly 0.
    let mut s = t.from_host(&[1.0f64, 2.0, 2.0, 4.0]).unwrap();
    let mut ipiv = Pivots::new(&t, 2).unwrap();
    Getrf::new(2, 2).run(&t, &mut s, &mut ipiv).unwrap();
    match t.to_vec(&other) {
        Err(Error::Singular {
            op: "getrf",
            pivot: 2,
        }) => {}
        r => panic!("expected a zero pivot at 2, got {r:?}"),
    }
    assert_eq!(t.to_vec(&other).unwrap(), [1.0]);
}
backend_tests!(info_is_reported_at_the_next_wait);

/// A task dropped with a failed result unchecked: its drop does not wait
/// on the host, the failure is not handed to an unrelated task's wait
/// (which keeps its data), and the runtime's next synchronize reports it,
/// once. The same for a final fence dropped with the results it carries.
fn an_unwaited_failure_is_not_lost(rt: &Runtime) {
    let u = rt.begin_task().unwrap();
    let x = u.from_host(&[1.0f32]).unwrap();
    u.synchronize().unwrap();
    let before = rt.counters();
    {
        let t = rt.begin_task().unwrap();
        let mut a = t.from_host(&[-1.0f64]).unwrap();
        Potrf::new(1).run(&t, &mut a).unwrap();
    }
    let d = rt.counters().since(&before);
    assert_eq!(d.host_syncs, 0, "the drop waited on the host: {d:?}");
    assert_eq!(u.to_vec(&x).unwrap(), [1.0]);
    match rt.synchronize() {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the dropped task's failure, got {r:?}"),
    }
    rt.synchronize().unwrap();
    {
        let t = rt.begin_task().unwrap();
        let mut a = t.from_host(&[-4.0f64]).unwrap();
        Potrf::new(1).run(&t, &mut a).unwrap();
        let f = t.final_fence().unwrap();
        drop(t);
        drop(f);
    }
    assert_eq!(u.to_vec(&x).unwrap(), [1.0]);
    match rt.synchronize() {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the dropped fence's failure, got {r:?}"),
    }
}
backend_tests!(an_unwaited_failure_is_not_lost);

/// The fence a task ends with carries its results: a joiner that waits for
/// the fence on the device reports them at its own next wait.
fn results_travel_with_the_final_fence(rt: &Runtime) {
    let c = rt.begin_task().unwrap();
    let mut a = c.from_host(&[1.0f64, 2.0, 2.0, 1.0]).unwrap();
    Potrf::new(2).run(&c, &mut a).unwrap();
    let f = c.final_fence().unwrap();
    assert!(!c.has_unchecked_results());
    drop(c);
    let p = rt.begin_task().unwrap();
    p.after_fence(f).unwrap();
    assert!(p.has_unchecked_results());
    match p.check_results() {
        Err(Error::NotPositiveDefinite { minor: 2, .. }) => {}
        r => panic!("expected the child's failure, got {r:?}"),
    }
}
backend_tests!(results_travel_with_the_final_fence);

fn shape(e: Error, needle: &str) {
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
}

/// Shapes, leading dimensions and vector lengths refused before anything
/// is queued: the buffers keep their values.
fn bad_shapes_are_refused_before_anything_is_queued(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[3.0f64; 15]).unwrap();
    let mut b = t.from_host(&[3.0f64; 4]).unwrap();
    let mut ipiv = Pivots::new(&t, 2).unwrap();
    shape(
        Potrf::new(4).run(&t, &mut a).unwrap_err(),
        "A has 15 elements, 16 needed",
    );
    shape(
        Potrf::new(3).ld(2).run(&t, &mut a).unwrap_err(),
        "leading dimension 2",
    );
    shape(
        Potrs::new(3, 2).run(&t, &a, &mut b).unwrap_err(),
        "B has 4 elements, 6 needed",
    );
    shape(
        Getrf::new(3, 3).run(&t, &mut a, &mut ipiv).unwrap_err(),
        "ipiv has 2 elements, 3 needed",
    );
    shape(
        Getrs::new(3, 1).run(&t, &a, &ipiv, &mut b).unwrap_err(),
        "the pivots (2 of them",
    );
    shape(
        Geqrf::new(5, 4).run(&t, &mut a, &mut b).unwrap_err(),
        "A has 15 elements, 20 needed",
    );
    let mut tau = t.zeros::<f64>(2).unwrap();
    shape(
        Geqrf::new(5, 3).run(&t, &mut a, &mut tau).unwrap_err(),
        "tau has 2 elements, 3 needed",
    );
    assert!(t.to_vec(&a).unwrap().iter().all(|&v| v == 3.0));
    assert!(t.to_vec(&b).unwrap().iter().all(|&v| v == 3.0));
    assert!(!t.has_unchecked_results());
}
backend_tests!(bad_shapes_are_refused_before_anything_is_queued);

/// potrf reads and writes `A` while its writer (another task) is held by
/// a gate: ordered after it (no host wait), and a reader on a third task
/// sees the factor.
fn potrf_is_ordered_between_its_writer_and_its_reader(rt: &Runtime) {
    let n = 32;
    let w = rt.begin_task().unwrap();
    let ident: Vec<f64> = (0..n * n)
        .map(|x| if x % (n + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    let mut a = w.from_host(&ident).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    // 4 I once the gate opens: its factor is 2 I.
    k::scale(&w, &mut a, 4.0).unwrap();
    let r = rt.begin_task().unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        Potrf::new(n).run(&r, &mut a).unwrap();
    });
    let u = rt.begin_task().unwrap();
    let got = u.to_vec(&a).unwrap();
    assert!(!g.timed_out(), "the gate timed out");
    for j in 0..n {
        assert_eq!(got[j + j * n], 2.0, "L({j}, {j})");
    }
    r.synchronize().unwrap();
}
backend_tests!(potrf_is_ordered_between_its_writer_and_its_reader);

/// Pivots that may name a row the solve does not have are refused: a tall
/// factorization's (rows up to 5) for a 3 x 3 solve, and pivots of another
/// count. Safe code cannot write pivots (`Pivots` has no `&mut` access), so
/// cuSOLVER's getrs, which reads them as given, stays within `B`.
fn foreign_pivots_are_refused(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut tall = t.from_host(&values(15, 3)).unwrap();
    let mut p = Pivots::new(&t, 3).unwrap();
    Getrf::new(5, 3).run(&t, &mut tall, &mut p).unwrap();
    let a = t.from_host(&values(9, 4)).unwrap();
    let mut b = t.from_host(&[1.0f64; 3]).unwrap();
    shape(
        Getrs::new(3, 1).run(&t, &a, &p, &mut b).unwrap_err(),
        "naming rows up to 5",
    );
    let four = Pivots::new(&t, 4).unwrap();
    shape(
        Getrs::new(3, 1).run(&t, &a, &four, &mut b).unwrap_err(),
        "(4 of them",
    );
    assert_eq!(t.to_vec(&b).unwrap(), [1.0; 3]);
    // The identity of the right count is accepted: B as it was (A = LU
    // read as given; here only that nothing is refused or out of range).
    let id = Pivots::new(&t, 3).unwrap();
    Getrs::new(3, 1).run(&t, &a, &id, &mut b).unwrap();
    t.synchronize().unwrap();
}
backend_tests!(foreign_pivots_are_refused);

/// Results taken over from a joined task travel on with the taker's own
/// final fence (a grandchild's failure reaches the grandparent), next to
/// the taker's own results.
fn taken_over_results_travel_on(rt: &Runtime) {
    let c = rt.begin_task().unwrap();
    let mut a = c.from_host(&[-1.0f64]).unwrap();
    Potrf::new(1).run(&c, &mut a).unwrap();
    let f = c.final_fence().unwrap();
    drop(c);
    let p = rt.begin_task().unwrap();
    p.after_fence(f).unwrap();
    let mut b = p.from_host(&[4.0f64]).unwrap();
    Potrf::new(1).run(&p, &mut b).unwrap();
    let g = p.final_fence().unwrap();
    assert!(!p.has_unchecked_results());
    drop(p);
    let q = rt.begin_task().unwrap();
    q.after_fence(g).unwrap();
    match q.check_results() {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the grandchild's failure, got {r:?}"),
    }
    assert!(!q.has_unchecked_results());
    assert_eq!(q.to_vec(&b).unwrap(), [2.0]);
}
backend_tests!(taken_over_results_travel_on);

/// A call with a zero dimension is LAPACK's quick return: it succeeds and
/// leaves nothing behind for the next call. Each case runs on a thread of
/// its own (the CUDA runtime keeps its last error per thread): the zero-
/// dimension call, then a tall QR and an LU, which must succeed. Seen on
/// an H100 before the quick returns: the first tall `geqrf` after a
/// `getrf` with a zero dimension was `CUSOLVER_STATUS_EXECUTION_FAILED`.
/// The first case has no zero-dimension call: the QR alone.
fn zero_dimensions_leave_nothing_behind(rt: &Runtime) {
    type Case = fn(&gpu_sched::TaskContext) -> gpu_sched::Result<()>;
    let cases: [(&str, Case); 9] = [
        ("nothing before", |_| Ok(())),
        ("potrf n 0", |t| {
            Potrf::new(0).run(t, &mut t.alloc::<f64>(1)?)
        }),
        ("potrs n 0", |t| {
            Potrs::new(0, 2).run(t, &t.alloc::<f64>(1)?, &mut t.alloc::<f64>(1)?)
        }),
        ("potrs nrhs 0", |t| {
            Potrs::new(3, 0).run(t, &t.from_host(&spd(3, 3, 9))?, &mut t.alloc::<f64>(3)?)
        }),
        ("getrf 3x0", |t| {
            Getrf::new(3, 0)
                .ld(3)
                .run(t, &mut t.alloc::<f64>(1)?, &mut Pivots::new(t, 0)?)
        }),
        ("getrf 0x3", |t| {
            Getrf::new(0, 3).run(t, &mut t.alloc::<f64>(1)?, &mut Pivots::new(t, 0)?)
        }),
        ("getrs nrhs 0", |t| {
            let mut a = t.from_host(&values(9, 5))?;
            let mut p = Pivots::new(t, 3)?;
            Getrf::new(3, 3).run(t, &mut a, &mut p)?;
            Getrs::new(3, 0).run(t, &a, &p, &mut t.alloc::<f64>(3)?)
        }),
        ("geqrf 0x2", |t| {
            Geqrf::new(0, 2).run(t, &mut t.alloc::<f64>(1)?, &mut t.alloc::<f64>(1)?)
        }),
        ("geqrf 2x0", |t| {
            Geqrf::new(2, 0).run(t, &mut t.alloc::<f64>(1)?, &mut t.alloc::<f64>(1)?)
        }),
    ];
    for (name, case) in cases {
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = rt.begin_task().unwrap();
                let r = case(&t).and_then(|()| t.synchronize());
                assert!(r.is_ok(), "{name}: {r:?}");
                for f32_too in [false, true] {
                    let r = if f32_too {
                        let mut a = t
                            .from_host(
                                &values(19, 70).iter().map(|&x| x as f32).collect::<Vec<_>>(),
                            )
                            .unwrap();
                        let mut tau = t.alloc::<f32>(3).unwrap();
                        Geqrf::new(5, 3).ld(7).run(&t, &mut a, &mut tau)
                    } else {
                        let mut a = t.from_host(&values(19, 70)).unwrap();
                        let mut tau = t.alloc::<f64>(3).unwrap();
                        Geqrf::new(5, 3).ld(7).run(&t, &mut a, &mut tau)
                    };
                    let r = r.and_then(|()| t.synchronize());
                    assert!(r.is_ok(), "{name}, then geqrf 5x3 (f32: {f32_too}): {r:?}");
                }
                let mut a = t.from_host(&values(25, 71)).unwrap();
                let mut p = Pivots::new(&t, 5).unwrap();
                let r = Getrf::new(5, 5)
                    .run(&t, &mut a, &mut p)
                    .and_then(|()| t.synchronize());
                assert!(r.is_ok(), "{name}, then getrf 5x5: {r:?}");
            });
        });
    }
}
backend_tests!(zero_dimensions_leave_nothing_behind);
