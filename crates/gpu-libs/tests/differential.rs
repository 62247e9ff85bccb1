//! The host twins against the vendor libraries (issue 36, item 5): every
//! library wrapper (`blas`, `solver`, `sparse`, `fft`, `random`) on a
//! corpus of edge cases, compared with a reference written here that keeps
//! reference BLAS's and LAPACK's conventions. The same body runs on the
//! host backend (`::host`, in CI) and on CUDA (`::cuda`, ignored unless
//! asked for, run on the GPU machine), so each backend is held to the same
//! reference, and so to each other.
//!
//! The conventions (reference BLAS 3.12, LAPACK 3.12):
//!
//! - **Quick returns.** gemm: nothing for `m = 0` or `n = 0`, and `C`
//!   untouched for (`alpha = 0` or `k = 0`) with `beta = 1`. gemv: nothing
//!   at all for `m = 0` or `n = 0` (`y` untouched, even for `beta = 0`:
//!   gemv's documented exception, unlike gemm's `k = 0`). syrk: as gemm.
//!   trsm: nothing for `m = 0` or `n = 0`. axpy: nothing for `alpha = 0`.
//! - **`alpha = 0`** reads neither `A`, `B` nor `x`: NaNs and infinities
//!   there do not reach the result (gemm, gemv, syrk: `C = beta C`; trsm:
//!   `B = 0`, whatever `A` holds, a zero pivot included).
//! - **`beta = 0`** writes the output without reading it: a NaN there does
//!   not survive (gemm, gemv, syrk, the sparse products).
//! - **`nrm2`** is scaled (LAPACK's Blue algorithm): `||[1e30, 1e30]||` is
//!   `1.414e30` in `f32`, `||[1e-30]||` is `1e-30`; an infinity gives
//!   infinity, a NaN NaN.
//! - **`scal`** multiplies (reference BLAS): `0 x NaN` is NaN.
//! - Elements a call does not own (past a view, padding rows of `ld >
//!   rows`, the other triangle of trsm/syrk/potrf) are never written.
//!
//! Tolerances, relative to `1 + |reference|` unless said: exact for what
//! must not change and for the special values (NaN where NaN, the same
//! infinity, zeros); for computed values `64 (k + 1) eps` of the type
//! (gemm-like, `k` the inner dimension), `1e-9` (f64) and `2e-3` (f32) for
//! the solver's factors and solves (well-conditioned matrices of order
//! <= 6), `16 n eps` for nrm2 and dot, `n eps * 1e3` for the transforms.
//! `random` has no reference across backends (ChaCha8 on the host,
//! cuRAND's Philox on CUDA): there the test is that a fill's values depend
//! on the seed, the offset and the length only, never on where the output
//! lies (bit for bit).
//!
//! A test body collects every disagreement before failing, so one GPU run
//! lists them all (each line names the case and both values).

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, values};
use gpu_libs::blas::{self, Diag, Gemm, Gemv, Op, Side, Syrk, Trsm, Uplo};
use gpu_libs::fft::{Complex, Plan};
use gpu_libs::random::Rng;
use gpu_libs::solver::{Geqrf, Getrf, Getrs, Pivots, Potrf, Potrs};
use gpu_libs::sparse::{self, Csr, Spmm};
use gpu_sched::{Buffer, Error, Runtime, TaskContext};

/// The element types, as the test uses them.
trait E:
    gpu_libs::solver::Scalar
    + gpu_libs::fft::Real
    + gpu_libs::random::Float
    + Into<f64>
    + std::fmt::Debug
{
    const NAME: &'static str;
    const EPS: f64;
    /// The largest finite value, and the smallest normal one.
    const MAX: f64;
    const MIN: f64;
    fn of(x: f64) -> Self;
}
impl E for f32 {
    const NAME: &'static str = "f32";
    const EPS: f64 = f32::EPSILON as f64;
    const MAX: f64 = f32::MAX as f64;
    const MIN: f64 = f32::MIN_POSITIVE as f64;
    fn of(x: f64) -> Self {
        x as f32
    }
}
impl E for f64 {
    const NAME: &'static str = "f64";
    const EPS: f64 = f64::EPSILON;
    const MAX: f64 = f64::MAX;
    const MIN: f64 = f64::MIN_POSITIVE;
    fn of(x: f64) -> Self {
        x
    }
}

/// What must not be written: past a view, in padding.
const GUARD: f64 = 12345.0;

/// Whether `got` is `want` within `tol` (relative to `1 + |want|`): NaN
/// only where NaN, infinities exactly.
fn agrees(got: f64, want: f64, tol: f64) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        got.is_finite() && (got - want).abs() <= tol * (1.0 + want.abs())
    }
}

/// The disagreements of one test body, reported together at its end.
struct Diffs {
    backend: String,
    cases: usize,
    bad: Vec<String>,
}

impl Diffs {
    fn new(rt: &Runtime) -> Self {
        Diffs {
            backend: rt.backend().to_string(),
            cases: 0,
            bad: Vec::new(),
        }
    }

    /// Compares `got` with `want` element by element.
    fn cmp(&mut self, case: &str, got: &[f64], want: &[f64], tol: f64) {
        self.cases += 1;
        if got.len() != want.len() {
            self.bad.push(format!(
                "{case}: {} elements, {} expected",
                got.len(),
                want.len()
            ));
            return;
        }
        let wrong: Vec<String> = got
            .iter()
            .zip(want)
            .enumerate()
            .filter(|(_, (&g, &w))| !agrees(g, w, tol))
            .take(4)
            .map(|(i, (g, w))| format!("[{i}] = {g:e}, reference {w:e}"))
            .collect();
        if !wrong.is_empty() {
            self.bad.push(format!("{case}: {}", wrong.join("; ")));
        }
    }

    /// A condition that must hold.
    fn check(&mut self, case: &str, ok: bool, what: &str) {
        self.cases += 1;
        if !ok {
            self.bad.push(format!("{case}: {what}"));
        }
    }

    /// Fails with every disagreement, if any.
    fn finish(self, what: &str) {
        eprintln!(
            "{what} on {}: {} cases, {} disagree",
            self.backend,
            self.cases,
            self.bad.len()
        );
        assert!(
            self.bad.is_empty(),
            "{what} on {}: {} of {} cases disagree with the reference:\n{}",
            self.backend,
            self.bad.len(),
            self.cases,
            self.bad.join("\n")
        );
    }
}

/// `x` rounded to `T` and back: the values the device holds.
fn rounded<T: E>(x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| T::of(v).into()).collect()
}

/// `data` on the device at element `off` of a buffer with guards before
/// and after it.
struct Placed<T: E> {
    buf: Buffer<T>,
    off: usize,
    len: usize,
}

impl<T: E> Placed<T> {
    fn new(t: &TaskContext, data: &[f64], off: usize) -> Self {
        let mut all = vec![T::of(GUARD); off + data.len() + 2];
        for (a, &d) in all[off..].iter_mut().zip(data) {
            *a = T::of(d);
        }
        Placed {
            buf: t.from_host(&all).unwrap(),
            off,
            len: data.len(),
        }
    }

    fn view(&self) -> gpu_sched::View<'_, T> {
        self.buf.slice(self.off..self.off + self.len).unwrap()
    }

    fn view_mut(&mut self) -> gpu_sched::ViewMut<'_, T> {
        self.buf.slice_mut(self.off..self.off + self.len).unwrap()
    }

    /// The data, after checking (into `d`) that the guards are intact.
    fn read(&self, t: &TaskContext, d: &mut Diffs, case: &str) -> Vec<f64> {
        let all: Vec<f64> = t
            .to_vec(&self.buf)
            .unwrap()
            .into_iter()
            .map(Into::into)
            .collect();
        let guards = all[..self.off]
            .iter()
            .chain(&all[self.off + self.len..])
            .all(|&g| g == GUARD);
        d.check(case, guards, "an element outside the operand was written");
        all[self.off..self.off + self.len].to_vec()
    }
}

/// A tolerance of `T` for sums of `k` products.
fn tol_k<T: E>(k: usize) -> f64 {
    64.0 * (k as f64 + 1.0) * T::EPS
}

// ---------------------------------------------------------------- BLAS --

/// Element `(i, j)` of `op(X)`, `X` column-major with leading dimension
/// `ld`.
fn at(x: &[f64], op: Op, ld: usize, i: usize, j: usize) -> f64 {
    match op {
        Op::N => x[i + j * ld],
        Op::T => x[j + i * ld],
    }
}

/// Reference dgemm on `c` (`m x n`, leading dimension `ldc`).
#[allow(clippy::too_many_arguments)]
fn gemm_ref(
    (m, n, k): (usize, usize, usize),
    (oa, ob): (Op, Op),
    (alpha, beta): (f64, f64),
    (a, lda): (&[f64], usize),
    (b, ldb): (&[f64], usize),
    (c, ldc): (&mut [f64], usize),
) {
    if m == 0 || n == 0 || ((alpha == 0.0 || k == 0) && beta == 1.0) {
        return;
    }
    for j in 0..n {
        for i in 0..m {
            let old = if beta == 0.0 {
                0.0
            } else {
                beta * c[i + j * ldc]
            };
            c[i + j * ldc] = if alpha == 0.0 || k == 0 {
                old
            } else {
                let s: f64 = (0..k)
                    .map(|p| at(a, oa, lda, i, p) * at(b, ob, ldb, p, j))
                    .sum();
                alpha * s + old
            };
        }
    }
}

/// `len` values with NaN and infinities in them (an operand that must not
/// be read).
fn poisoned(len: usize, seed: u64) -> Vec<f64> {
    let mut v = values(len, seed);
    for (i, x) in v.iter_mut().enumerate() {
        match i % 3 {
            0 => *x = f64::NAN,
            1 => *x = f64::INFINITY,
            _ => {}
        }
    }
    v
}

fn gemm_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let ops = [
        (Op::N, Op::N),
        (Op::T, Op::N),
        (Op::N, Op::T),
        (Op::T, Op::T),
    ];
    let mut shapes = vec![(5, 4, 3)];
    shapes.extend([(0, 3, 2), (3, 0, 2), (3, 2, 0)]);
    let mut seed = 1;
    for &(m, n, k) in &shapes {
        for (oa, ob) in ops {
            for alpha in [0.0, 1.0, -2.5] {
                for beta in [0.0, 1.0, 0.5] {
                    seed += 1;
                    let (ra, ca) = if oa == Op::N { (m, k) } else { (k, m) };
                    let (rb, cb) = if ob == Op::N { (k, n) } else { (n, k) };
                    let (lda, ldb, ldc) = (ra + 2, rb + 1, m + 3);
                    let la = if ca == 0 { 0 } else { lda * (ca - 1) + ra };
                    let lb = if cb == 0 { 0 } else { ldb * (cb - 1) + rb };
                    let lc = if n == 0 { 0 } else { ldc * (n - 1) + m };
                    // alpha = 0: A and B must not be read; beta = 0: nor C.
                    let fill = |len, s| {
                        if alpha == 0.0 {
                            poisoned(len, s)
                        } else {
                            values(len, s)
                        }
                    };
                    let a = rounded::<T>(&fill(la, seed));
                    let b = rounded::<T>(&fill(lb, seed + 100));
                    let c0 = if beta == 0.0 {
                        poisoned(lc, seed + 200)
                    } else {
                        values(lc, seed + 200)
                    };
                    let c0 = rounded::<T>(&c0);
                    let case = format!(
                        "gemm {} {m}x{n}x{k} {oa:?}{ob:?} alpha {alpha} beta {beta}, ld {lda}/{ldb}/{ldc}, views at 1/2/3",
                        T::NAME
                    );
                    let pa = Placed::<T>::new(&t, &a, 1);
                    let pb = Placed::<T>::new(&t, &b, 2);
                    let mut pc = Placed::<T>::new(&t, &c0, 3);
                    let r = Gemm::new(m, n, k)
                        .op_a(oa)
                        .op_b(ob)
                        .alpha(T::of(alpha))
                        .beta(T::of(beta))
                        .ld(lda, ldb, ldc)
                        .run(&t, &pa.view(), &pb.view(), &mut pc.view_mut());
                    if let Err(e) = r {
                        d.check(&case, false, &format!("failed: {e}"));
                        continue;
                    }
                    let mut want = c0.clone();
                    gemm_ref(
                        (m, n, k),
                        (oa, ob),
                        (alpha, beta),
                        (&a, lda),
                        (&b, ldb),
                        (&mut want, ldc),
                    );
                    let got = pc.read(&t, d, &case);
                    d.cmp(&case, &got, &want, tol_k::<T>(k));
                }
            }
        }
    }
    // A strided batch of two, alpha = 0 and beta = 0 on poisoned operands.
    for (alpha, beta) in [(0.0, 0.0), (1.5, 0.0), (0.0, 2.0)] {
        let (m, n, k, count) = (3, 2, 4, 2);
        let (sa, sb, sc) = (m * k + 1, k * n + 2, m * n + 3);
        let a = rounded::<T>(&if alpha == 0.0 {
            poisoned(sa * 2, 7)
        } else {
            values(sa * 2, 7)
        });
        let b = rounded::<T>(&values(sb * 2, 8));
        let c0 = rounded::<T>(&if beta == 0.0 {
            poisoned(sc * 2, 9)
        } else {
            values(sc * 2, 9)
        });
        let case = format!(
            "gemm {} batched x{count} alpha {alpha} beta {beta}",
            T::NAME
        );
        let pa = Placed::<T>::new(&t, &a, 1);
        let pb = Placed::<T>::new(&t, &b, 0);
        let mut pc = Placed::<T>::new(&t, &c0, 1);
        Gemm::new(m, n, k)
            .alpha(T::of(alpha))
            .beta(T::of(beta))
            .batched(count, sa, sb, sc)
            .run(&t, &pa.view(), &pb.view(), &mut pc.view_mut())
            .unwrap();
        let mut want = c0.clone();
        for i in 0..count {
            gemm_ref(
                (m, n, k),
                (Op::N, Op::N),
                (alpha, beta),
                (&a[i * sa..], m),
                (&b[i * sb..], k),
                (&mut want[i * sc..], m),
            );
        }
        let got = pc.read(&t, d, &case);
        d.cmp(&case, &got, &want, tol_k::<T>(k));
    }
}

/// Reference dgemv: `y = alpha op(A) x + beta y`, `A` stored `m x n`.
#[allow(clippy::too_many_arguments)]
fn gemv_ref(
    (m, n, op): (usize, usize, Op),
    (alpha, beta): (f64, f64),
    (a, lda): (&[f64], usize),
    x: &[f64],
    y: &mut [f64],
) {
    if m == 0 || n == 0 || (alpha == 0.0 && beta == 1.0) {
        return;
    }
    let (rows, cols) = if op == Op::N { (m, n) } else { (n, m) };
    for (i, y) in y.iter_mut().enumerate().take(rows) {
        let old = if beta == 0.0 { 0.0 } else { beta * *y };
        *y = if alpha == 0.0 {
            old
        } else {
            let s: f64 = (0..cols).map(|j| at(a, op, lda, i, j) * x[j]).sum();
            alpha * s + old
        };
    }
}

fn gemv_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let mut seed = 1000;
    for (m, n) in [(5, 3), (0, 3), (3, 0), (1, 1)] {
        for op in [Op::N, Op::T] {
            for alpha in [0.0, 1.0, 2.0] {
                for beta in [0.0, 1.0, -0.5] {
                    seed += 1;
                    let lda = m + 2;
                    let la = if n == 0 { 0 } else { lda * (n - 1) + m };
                    let (xs, ys) = if op == Op::N { (n, m) } else { (m, n) };
                    let fill = |len, s| {
                        if alpha == 0.0 {
                            poisoned(len, s)
                        } else {
                            values(len, s)
                        }
                    };
                    let a = rounded::<T>(&fill(la, seed));
                    let x = rounded::<T>(&fill(xs, seed + 1));
                    let y0 = rounded::<T>(&if beta == 0.0 {
                        poisoned(ys, seed + 2)
                    } else {
                        values(ys, seed + 2)
                    });
                    let case = format!(
                        "gemv {} {m}x{n} {op:?} alpha {alpha} beta {beta}, lda {lda}, views at 3/1/1",
                        T::NAME
                    );
                    let pa = Placed::<T>::new(&t, &a, 3);
                    let px = Placed::<T>::new(&t, &x, 1);
                    let mut py = Placed::<T>::new(&t, &y0, 1);
                    let r = Gemv::new(m, n)
                        .op(op)
                        .alpha(T::of(alpha))
                        .beta(T::of(beta))
                        .lda(lda)
                        .run(&t, &pa.view(), &px.view(), &mut py.view_mut());
                    if let Err(e) = r {
                        d.check(&case, false, &format!("failed: {e}"));
                        continue;
                    }
                    let mut want = y0.clone();
                    gemv_ref((m, n, op), (alpha, beta), (&a, lda), &x, &mut want);
                    let got = py.read(&t, d, &case);
                    d.cmp(&case, &got, &want, tol_k::<T>(xs));
                }
            }
        }
    }
}

/// The `d x d` matrix `op(A)` of trsm: `A`'s `uplo` triangle (the rest
/// zero), ones on the diagonal for [`Diag::Unit`].
fn triangle(a: &[f64], lda: usize, dim: usize, (uplo, op, diag): (Uplo, Op, Diag)) -> Vec<f64> {
    let mut tm = vec![0.0; dim * dim];
    for i in 0..dim {
        for j in 0..dim {
            // op(A)(i, j) is A(r, c).
            let (r, c) = if op == Op::N { (i, j) } else { (j, i) };
            let stored = match uplo {
                Uplo::Lower => r >= c,
                Uplo::Upper => r <= c,
            };
            tm[i + j * dim] = if r == c && diag == Diag::Unit {
                1.0
            } else if stored {
                a[r + c * lda]
            } else {
                0.0
            };
        }
    }
    tm
}

/// Solves `tm x = rhs` in place for a triangular `tm` (`dim x dim`,
/// packed), lower or upper as its zeros say.
fn tri_solve(tm: &[f64], dim: usize, lower: bool, x: &mut [f64]) {
    if lower {
        for i in 0..dim {
            let s: f64 = (0..i).map(|j| tm[i + j * dim] * x[j]).sum();
            x[i] = (x[i] - s) / tm[i + i * dim];
        }
    } else {
        for i in (0..dim).rev() {
            let s: f64 = (i + 1..dim).map(|j| tm[i + j * dim] * x[j]).sum();
            x[i] = (x[i] - s) / tm[i + i * dim];
        }
    }
}

/// Reference dtrsm on `b` (`m x n`, leading dimension `ldb`).
#[allow(clippy::too_many_arguments)]
fn trsm_ref(
    (m, n): (usize, usize),
    (side, uplo, op, diag): (Side, Uplo, Op, Diag),
    alpha: f64,
    (a, lda): (&[f64], usize),
    (b, ldb): (&mut [f64], usize),
) {
    if m == 0 || n == 0 {
        return;
    }
    if alpha == 0.0 {
        for j in 0..n {
            b[j * ldb..j * ldb + m].fill(0.0);
        }
        return;
    }
    let dim = if side == Side::Left { m } else { n };
    let tm = triangle(a, lda, dim, (uplo, op, diag));
    // op(A) is lower when A is lower as stored, or upper transposed.
    let lower = (uplo == Uplo::Lower) == (op == Op::N);
    match side {
        Side::Left => {
            for j in 0..n {
                let mut x: Vec<f64> = (0..m).map(|i| alpha * b[i + j * ldb]).collect();
                tri_solve(&tm, dim, lower, &mut x);
                for i in 0..m {
                    b[i + j * ldb] = x[i];
                }
            }
        }
        Side::Right => {
            // X op(A) = alpha B: op(A)^T X^T = alpha B^T, row by row.
            let mut tt = vec![0.0; dim * dim];
            for i in 0..dim {
                for j in 0..dim {
                    tt[j + i * dim] = tm[i + j * dim];
                }
            }
            for i in 0..m {
                let mut x: Vec<f64> = (0..n).map(|j| alpha * b[i + j * ldb]).collect();
                tri_solve(&tt, dim, !lower, &mut x);
                for j in 0..n {
                    b[i + j * ldb] = x[j];
                }
            }
        }
    }
}

fn trsm_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let mut seed = 2000;
    for (m, n) in [(4, 3), (0, 2), (2, 0)] {
        for side in [Side::Left, Side::Right] {
            for uplo in [Uplo::Lower, Uplo::Upper] {
                for op in [Op::N, Op::T] {
                    for diag in [Diag::NonUnit, Diag::Unit] {
                        for alpha in [0.0, 1.0, -1.5] {
                            seed += 1;
                            let dim = if side == Side::Left { m } else { n };
                            let (lda, ldb) = (dim + 1, m + 2);
                            let la = if dim == 0 { 0 } else { lda * (dim - 1) + dim };
                            let lb = if n == 0 { 0 } else { ldb * (n - 1) + m };
                            // A well-conditioned triangle (a diagonal of 2 to
                            // 3, small off it), NaN in the other triangle
                            // (never read); alpha = 0: a zero pivot and NaN
                            // in the triangle too, and in B.
                            let mut a = values(la, seed);
                            for c in 0..dim {
                                for r in 0..dim {
                                    let x = &mut a[r + c * lda];
                                    let inside = match uplo {
                                        Uplo::Lower => r >= c,
                                        Uplo::Upper => r <= c,
                                    };
                                    if r == c {
                                        *x = 2.5 + *x / 2.0;
                                    } else if inside {
                                        *x *= 0.5;
                                    } else {
                                        *x = f64::NAN;
                                    }
                                }
                            }
                            if alpha == 0.0 && dim > 1 {
                                a[0] = 0.0;
                                a[1 + lda] = f64::NAN;
                            }
                            let a = rounded::<T>(&a);
                            let b0 = rounded::<T>(&if alpha == 0.0 {
                                poisoned(lb, seed + 1)
                            } else {
                                values(lb, seed + 1)
                            });
                            let case = format!(
                                "trsm {} {m}x{n} {side:?} {uplo:?} {op:?} {diag:?} alpha {alpha}, ld {lda}/{ldb}, views at 1/3",
                                T::NAME
                            );
                            let pa = Placed::<T>::new(&t, &a, 1);
                            let mut pb = Placed::<T>::new(&t, &b0, 3);
                            let r = Trsm::new(m, n)
                                .side(side)
                                .uplo(uplo)
                                .op(op)
                                .diag(diag)
                                .alpha(T::of(alpha))
                                .ld(lda, ldb)
                                .run(&t, &pa.view(), &mut pb.view_mut());
                            if let Err(e) = r {
                                d.check(&case, false, &format!("failed: {e}"));
                                continue;
                            }
                            let mut want = b0.clone();
                            trsm_ref(
                                (m, n),
                                (side, uplo, op, diag),
                                alpha,
                                (&a, lda),
                                (&mut want, ldb),
                            );
                            let got = pb.read(&t, d, &case);
                            d.cmp(&case, &got, &want, tol_k::<T>(dim));
                        }
                    }
                }
            }
        }
    }
}

/// Reference dsyrk on `C`'s `uplo` triangle.
#[allow(clippy::too_many_arguments)]
fn syrk_ref(
    (n, k, uplo, op): (usize, usize, Uplo, Op),
    (alpha, beta): (f64, f64),
    (a, lda): (&[f64], usize),
    (c, ldc): (&mut [f64], usize),
) {
    if n == 0 || ((alpha == 0.0 || k == 0) && beta == 1.0) {
        return;
    }
    for j in 0..n {
        for i in 0..n {
            if (uplo == Uplo::Lower && i < j) || (uplo == Uplo::Upper && i > j) {
                continue;
            }
            let old = if beta == 0.0 {
                0.0
            } else {
                beta * c[i + j * ldc]
            };
            c[i + j * ldc] = if alpha == 0.0 || k == 0 {
                old
            } else {
                // op(A) is n x k: A (N) or A^T (T).
                let s: f64 = (0..k)
                    .map(|p| at(a, op, lda, i, p) * at(a, op, lda, j, p))
                    .sum();
                alpha * s + old
            };
        }
    }
}

fn syrk_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let mut seed = 3000;
    for (n, k) in [(4, 3), (0, 2), (3, 0)] {
        for uplo in [Uplo::Lower, Uplo::Upper] {
            for op in [Op::N, Op::T] {
                for alpha in [0.0, 1.0, 0.5] {
                    for beta in [0.0, 1.0, -2.0] {
                        seed += 1;
                        let (ra, ca) = if op == Op::N { (n, k) } else { (k, n) };
                        let (lda, ldc) = (ra + 1, n + 2);
                        let la = if ca == 0 { 0 } else { lda * (ca - 1) + ra };
                        let lc = if n == 0 { 0 } else { ldc * (n - 1) + n };
                        let a = rounded::<T>(&if alpha == 0.0 {
                            poisoned(la, seed)
                        } else {
                            values(la, seed)
                        });
                        let c0 = rounded::<T>(&if beta == 0.0 {
                            poisoned(lc, seed + 1)
                        } else {
                            values(lc, seed + 1)
                        });
                        let case = format!(
                            "syrk {} n {n} k {k} {uplo:?} {op:?} alpha {alpha} beta {beta}, ld {lda}/{ldc}, views at 1/1",
                            T::NAME
                        );
                        let pa = Placed::<T>::new(&t, &a, 1);
                        let mut pc = Placed::<T>::new(&t, &c0, 1);
                        let r = Syrk::new(n, k)
                            .uplo(uplo)
                            .op(op)
                            .alpha(T::of(alpha))
                            .beta(T::of(beta))
                            .ld(lda, ldc)
                            .run(&t, &pa.view(), &mut pc.view_mut());
                        if let Err(e) = r {
                            d.check(&case, false, &format!("failed: {e}"));
                            continue;
                        }
                        let mut want = c0.clone();
                        syrk_ref((n, k, uplo, op), (alpha, beta), (&a, lda), (&mut want, ldc));
                        let got = pc.read(&t, d, &case);
                        d.cmp(&case, &got, &want, tol_k::<T>(k));
                    }
                }
            }
        }
    }
}

/// Reference nrm2: scaled by the largest magnitude, in f64 (exact enough
/// for both types' inputs).
fn nrm2_ref(x: &[f64]) -> f64 {
    if x.iter().any(|v| v.is_infinite()) {
        return f64::INFINITY;
    }
    if x.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let big = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if big == 0.0 {
        return 0.0;
    }
    big * x.iter().map(|v| (v / big) * (v / big)).sum::<f64>().sqrt()
}

fn vector_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    // nrm2: magnitudes whose squares overflow or underflow the type.
    let (big, small) = (T::MAX.sqrt() * 4.0, T::MIN.sqrt() / 4.0);
    let sub = T::MIN * T::EPS * 4.0; // subnormal
    let mut corpus: Vec<(String, Vec<f64>)> = vec![
        ("empty".into(), vec![]),
        ("[0]".into(), vec![0.0]),
        ("[3, -4]".into(), vec![3.0, -4.0]),
        ("[1e30, 1e30]".into(), vec![1e30, 1e30]),
        ("[1e-30]".into(), vec![1e-30]),
        ("[big, big]".into(), vec![big, -big]),
        ("[small]".into(), vec![small]),
        ("[small, small, small]".into(), vec![small, -small, small]),
        ("[big, 1, small]".into(), vec![big, 1.0, small]),
        ("[1, small]".into(), vec![1.0, small]),
        ("[subnormal, subnormal]".into(), vec![sub, sub]),
        ("[max/2, max/2]".into(), vec![T::MAX / 2.0, T::MAX / 2.0]),
        ("[inf, 1]".into(), vec![f64::INFINITY, 1.0]),
        ("[1, -inf, 2]".into(), vec![1.0, f64::NEG_INFINITY, 2.0]),
        ("[NaN, 1]".into(), vec![f64::NAN, 1.0]),
        ("[1, NaN]".into(), vec![1.0, f64::NAN]),
    ];
    corpus.push((
        "1000 near max/100".into(),
        values(1000, 5).iter().map(|v| v * T::MAX / 100.0).collect(),
    ));
    corpus.push((
        "333 near min".into(),
        values(333, 6).iter().map(|v| v * T::MIN * 8.0).collect(),
    ));
    corpus.push(("257 of [-1, 1)".into(), values(257, 7)));
    if T::NAME == "f64" {
        corpus.push(("[1e300, 1e300]".into(), vec![1e300, 1e300]));
        corpus.push(("[1e-300]".into(), vec![1e-300]));
    }
    for (name, x) in &corpus {
        let x = rounded::<T>(x);
        for off in [0, 1] {
            let case = format!("nrm2 {} {name}, view at {off}", T::NAME);
            let px = Placed::<T>::new(&t, &x, off);
            let mut out = Placed::<T>::new(&t, &[GUARD], 1);
            blas::nrm2(&t, &px.view(), &mut out.view_mut()).unwrap();
            let got = out.read(&t, d, &case);
            d.cmp(
                &case,
                &got,
                &[T::of(nrm2_ref(&x)).into()],
                16.0 * (x.len() as f64 + 1.0) * T::EPS,
            );
        }
    }

    // dot: empty, NaN, infinities, magnitudes; views at odd elements.
    let dots: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("empty", vec![], vec![]),
        ("100 of [-1, 1)", values(100, 11), values(100, 12)),
        ("NaN", vec![1.0, f64::NAN, 2.0], vec![1.0, 1.0, 1.0]),
        ("inf", vec![1.0, f64::INFINITY], vec![1.0, 2.0]),
        ("small", vec![T::MIN * 4.0; 3], vec![0.5; 3]),
    ];
    for (name, x, y) in dots {
        let (x, y) = (rounded::<T>(&x), rounded::<T>(&y));
        let case = format!("dot {} {name}, views at 1/2", T::NAME);
        let px = Placed::<T>::new(&t, &x, 1);
        let py = Placed::<T>::new(&t, &y, 2);
        let mut out = Placed::<T>::new(&t, &[GUARD], 0);
        blas::dot(&t, &px.view(), &py.view(), &mut out.view_mut()).unwrap();
        let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
        let got = out.read(&t, d, &case);
        d.cmp(&case, &got, &[T::of(want).into()], tol_k::<T>(x.len()));
    }

    // axpy (host factor and device factor) and scal, alpha of 0, 1 and 2.
    for alpha in [0.0, 1.0, 2.0] {
        for n in [0, 1, 7] {
            let x = rounded::<T>(&if alpha == 0.0 {
                poisoned(n, 20)
            } else {
                values(n, 20)
            });
            let y0 = rounded::<T>(&values(n, 21));
            let mut want = y0.clone();
            if alpha != 0.0 {
                for (w, xv) in want.iter_mut().zip(&x) {
                    *w = T::of(alpha * xv + *w).into();
                }
            }
            for dev in [false, true] {
                let case = format!(
                    "axpy{} {} n {n} alpha {alpha}, views at 1/3",
                    if dev { "_dev" } else { "" },
                    T::NAME
                );
                let px = Placed::<T>::new(&t, &x, 1);
                let mut py = Placed::<T>::new(&t, &y0, 3);
                if dev {
                    let a = t.from_host(&[T::of(alpha)]).unwrap();
                    blas::axpy_dev(&t, &a, &px.view(), &mut py.view_mut()).unwrap();
                } else {
                    blas::axpy(&t, T::of(alpha), &px.view(), &mut py.view_mut()).unwrap();
                }
                let got = py.read(&t, d, &case);
                d.cmp(&case, &got, &want, 4.0 * T::EPS);
            }
            // scal: reference BLAS multiplies, NaN and infinities included
            // (0 x inf is NaN): only alpha = 1 leaves x as it is.
            let x = rounded::<T>(&poisoned(n, 22));
            let want: Vec<f64> = x
                .iter()
                .map(|&v| {
                    if alpha == 1.0 {
                        v
                    } else {
                        T::of(alpha * v).into()
                    }
                })
                .collect();
            for dev in [false, true] {
                let case = format!(
                    "scal{} {} n {n} alpha {alpha} (NaN, inf in x), view at 1",
                    if dev { "_dev" } else { "" },
                    T::NAME
                );
                let mut px = Placed::<T>::new(&t, &x, 1);
                if dev {
                    let a = t.from_host(&[T::of(alpha)]).unwrap();
                    blas::scal_dev(&t, &a, &mut px.view_mut()).unwrap();
                } else {
                    blas::scal(&t, T::of(alpha), &mut px.view_mut()).unwrap();
                }
                let got = px.read(&t, d, &case);
                d.cmp(&case, &got, &want, 0.0);
            }
        }
    }
}

/// Every BLAS wrapper against reference BLAS, in `f32` and `f64`.
fn blas_agrees_with_reference_blas(rt: &Runtime) {
    let mut d = Diffs::new(rt);
    gemm_cases::<f32>(rt, &mut d);
    gemm_cases::<f64>(rt, &mut d);
    gemv_cases::<f32>(rt, &mut d);
    gemv_cases::<f64>(rt, &mut d);
    trsm_cases::<f32>(rt, &mut d);
    trsm_cases::<f64>(rt, &mut d);
    syrk_cases::<f32>(rt, &mut d);
    syrk_cases::<f64>(rt, &mut d);
    vector_cases::<f32>(rt, &mut d);
    vector_cases::<f64>(rt, &mut d);
    d.finish("blas");
}
backend_tests!(blas_agrees_with_reference_blas);

// -------------------------------------------------------------- solver --

/// A symmetric positive definite `n x n` matrix (`M M^T + n I`) in
/// leading dimension `lda`, NaN in the padding and the `uplo`'s other
/// triangle (never read).
fn spd(n: usize, lda: usize, uplo: Uplo, seed: u64) -> Vec<f64> {
    let m = values(n * n, seed);
    let len = if n == 0 { 0 } else { lda * (n - 1) + n };
    let mut a = vec![f64::NAN; len];
    for j in 0..n {
        for i in 0..n {
            let inside = match uplo {
                Uplo::Lower => i >= j,
                Uplo::Upper => i <= j,
            };
            if inside {
                let s: f64 = (0..n).map(|p| m[i + p * n] * m[j + p * n]).sum();
                a[i + j * lda] = s + if i == j { n as f64 } else { 0.0 };
            }
        }
    }
    a
}

/// Reference dpotrf: the factor in the `uplo` triangle, the rest as it
/// was.
fn potrf_ref(n: usize, lda: usize, uplo: Uplo, a: &mut [f64]) {
    // Work on L (lower); the upper case is its transpose in place.
    let idx = |i: usize, j: usize| match uplo {
        Uplo::Lower => i + j * lda,
        Uplo::Upper => j + i * lda,
    };
    for j in 0..n {
        let s: f64 = (0..j).map(|p| a[idx(j, p)] * a[idx(j, p)]).sum();
        let djj = (a[idx(j, j)] - s).sqrt();
        a[idx(j, j)] = djj;
        for i in j + 1..n {
            let s: f64 = (0..j).map(|p| a[idx(i, p)] * a[idx(j, p)]).sum();
            a[idx(i, j)] = (a[idx(i, j)] - s) / djj;
        }
    }
}

/// Reference dgetf2: LU with partial pivoting (the first largest
/// magnitude), `ipiv` 1-based.
fn getrf_ref(m: usize, n: usize, lda: usize, a: &mut [f64]) -> Vec<i32> {
    let mut ipiv = Vec::new();
    for j in 0..m.min(n) {
        let p = (j..m).fold(j, |p, i| {
            if a[i + j * lda].abs() > a[p + j * lda].abs() {
                i
            } else {
                p
            }
        });
        ipiv.push(p as i32 + 1);
        if p != j {
            for c in 0..n {
                a.swap(j + c * lda, p + c * lda);
            }
        }
        let piv = a[j + j * lda];
        if piv != 0.0 {
            for i in j + 1..m {
                a[i + j * lda] /= piv;
            }
        }
        for c in j + 1..n {
            let u = a[j + c * lda];
            for i in j + 1..m {
                a[i + c * lda] -= a[i + j * lda] * u;
            }
        }
    }
    ipiv
}

/// Reference dgeqr2 (Householder reflectors as dlarfg makes them: `beta =
/// -sign(alpha) ||(alpha, x)||`, `tau = 0` for a column already zero below
/// the diagonal); returns `tau`.
fn geqrf_ref(m: usize, n: usize, lda: usize, a: &mut [f64]) -> Vec<f64> {
    let mut tau = Vec::new();
    for i in 0..m.min(n) {
        let alpha = a[i + i * lda];
        let xnorm = (i + 1..m)
            .map(|r| a[r + i * lda] * a[r + i * lda])
            .sum::<f64>()
            .sqrt();
        if xnorm == 0.0 {
            tau.push(0.0);
            continue;
        }
        let beta = -alpha.signum() * alpha.hypot(xnorm);
        let t = (beta - alpha) / beta;
        for r in i + 1..m {
            a[r + i * lda] /= alpha - beta;
        }
        a[i + i * lda] = beta;
        tau.push(t);
        // H = I - t v v^T (v_i = 1) on the columns to the right.
        for c in i + 1..n {
            let w = a[i + c * lda]
                + (i + 1..m)
                    .map(|r| a[r + i * lda] * a[r + c * lda])
                    .sum::<f64>();
            a[i + c * lda] -= t * w;
            for r in i + 1..m {
                a[r + c * lda] -= t * a[r + i * lda] * w;
            }
        }
    }
    tau
}

/// Solves `op(A) X = B` (`A` `n x n` in `lda`, `B` `n x nrhs` in `ldb`)
/// by Gaussian elimination with partial pivoting, in f64.
fn solve_ref(
    n: usize,
    op: Op,
    (a, lda): (&[f64], usize),
    (b, ldb): (&mut [f64], usize),
    nrhs: usize,
) {
    let mut m: Vec<f64> = (0..n * n).map(|x| at(a, op, lda, x % n, x / n)).collect();
    let mut piv = getrf_ref(n, n, n, &mut m);
    for j in 0..nrhs {
        let mut x: Vec<f64> = (0..n).map(|i| b[i + j * ldb]).collect();
        for (i, p) in piv.iter_mut().enumerate() {
            x.swap(i, *p as usize - 1);
        }
        for i in 0..n {
            let s: f64 = (0..i).map(|c| m[i + c * n] * x[c]).sum();
            x[i] -= s;
        }
        for i in (0..n).rev() {
            let s: f64 = (i + 1..n).map(|c| m[i + c * n] * x[c]).sum();
            x[i] = (x[i] - s) / m[i + i * n];
        }
        for i in 0..n {
            b[i + j * ldb] = x[i];
        }
    }
}

fn solver_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let tol = if T::NAME == "f64" { 1e-9 } else { 2e-3 };
    // potrf and potrs: each triangle, lda > n, n = 0, nrhs = 0, views at
    // odd elements.
    for (n, nrhs) in [(5, 2), (1, 1), (0, 1), (3, 0)] {
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let (lda, ldb) = (n + 2, n + 1);
            let a0 = rounded::<T>(&spd(n, lda, uplo, 40 + n as u64));
            let lb = if nrhs == 0 { 0 } else { ldb * (nrhs - 1) + n };
            let b0 = rounded::<T>(&values(lb, 41));
            let case = format!(
                "potrf/potrs {} n {n} nrhs {nrhs} {uplo:?}, ld {lda}/{ldb}, views at 1/3",
                T::NAME
            );
            let mut pa = Placed::<T>::new(&t, &a0, 1);
            let mut pb = Placed::<T>::new(&t, &b0, 3);
            let r = Potrf::new(n)
                .uplo(uplo)
                .ld(lda)
                .run(&t, &mut pa.view_mut())
                .and_then(|()| {
                    Potrs::new(n, nrhs).uplo(uplo).ld(lda, ldb).run(
                        &t,
                        &pa.view(),
                        &mut pb.view_mut(),
                    )
                })
                .and_then(|()| t.synchronize());
            if let Err(e) = r {
                d.check(&case, false, &format!("failed: {e}"));
                continue;
            }
            let mut fa = a0.clone();
            potrf_ref(n, lda, uplo, &mut fa);
            let got = pa.read(&t, d, &case);
            d.cmp(&format!("{case}: the factor"), &got, &fa, tol);
            // The solution: A X = B with A symmetric (both triangles).
            let full: Vec<f64> = (0..n * n)
                .map(|x| {
                    let (i, j) = (x % n, x / n);
                    let (r, c) = match uplo {
                        Uplo::Lower => (i.max(j), i.min(j)),
                        Uplo::Upper => (i.min(j), i.max(j)),
                    };
                    a0[r + c * lda]
                })
                .collect();
            let mut x = b0.clone();
            solve_ref(n, Op::N, (&full, n), (&mut x, ldb), nrhs);
            let got = pb.read(&t, d, &case);
            d.cmp(&format!("{case}: the solution"), &got, &x, tol);
        }
    }
    // getrf: square and rectangular, lda > m, zero dimensions; getrs on
    // the square one, each op.
    for (m, n) in [(5, 5), (6, 3), (3, 5), (0, 3), (3, 0)] {
        let lda = m + 1;
        let la = if n == 0 { 0 } else { lda * (n - 1) + m };
        let a0 = rounded::<T>(&values(la, 50 + m as u64 * 7 + n as u64));
        let case = format!("getrf {} {m}x{n}, lda {lda}, view at 1", T::NAME);
        let mut pa = Placed::<T>::new(&t, &a0, 1);
        let mut piv = Pivots::new(&t, m.min(n)).unwrap();
        let r = Getrf::new(m, n)
            .ld(lda)
            .run(&t, &mut pa.view_mut(), &mut piv)
            .and_then(|()| t.synchronize());
        if let Err(e) = r {
            d.check(&case, false, &format!("failed: {e}"));
            continue;
        }
        let mut fa = a0.clone();
        let want_piv = getrf_ref(m, n, lda, &mut fa);
        let got = pa.read(&t, d, &case);
        d.cmp(&format!("{case}: the factors"), &got, &fa, tol);
        let got_piv = t.to_vec(piv.as_buffer()).unwrap();
        d.check(
            &case,
            got_piv == want_piv,
            &format!("pivots {got_piv:?}, reference {want_piv:?}"),
        );
        if m == n {
            for op in [Op::N, Op::T] {
                let (nrhs, ldb) = (2, n + 3);
                let b0 = rounded::<T>(&values(ldb + n, 60));
                let case = format!("getrs {} n {n} {op:?}, ldb {ldb}, view at 1", T::NAME);
                let mut pb = Placed::<T>::new(&t, &b0, 1);
                let r = Getrs::new(n, nrhs)
                    .op(op)
                    .ld(lda, ldb)
                    .run(&t, &pa.view(), &piv, &mut pb.view_mut())
                    .and_then(|()| t.synchronize());
                if let Err(e) = r {
                    d.check(&case, false, &format!("failed: {e}"));
                    continue;
                }
                let mut x = b0.clone();
                solve_ref(n, op, (&a0, lda), (&mut x, ldb), nrhs);
                let got = pb.read(&t, d, &case);
                d.cmp(&case, &got, &x, tol * 10.0);
            }
        }
    }
    // geqrf: tall, wide, a column already triangular (tau = 0), zero
    // dimensions.
    for (m, n, zeros) in [
        (5, 3, false),
        (3, 4, false),
        (4, 3, true),
        (0, 2, false),
        (2, 0, false),
    ] {
        let lda = m + 2;
        let la = if n == 0 { 0 } else { lda * (n - 1) + m };
        let mut a0 = values(la, 70 + m as u64);
        if zeros {
            a0[1..m].fill(0.0);
        }
        let a0 = rounded::<T>(&a0);
        let k = m.min(n);
        let case = format!(
            "geqrf {} {m}x{n}{}, lda {lda}, views at 1/1",
            T::NAME,
            if zeros {
                " (first column triangular)"
            } else {
                ""
            }
        );
        let mut pa = Placed::<T>::new(&t, &a0, 1);
        let mut ptau = Placed::<T>::new(&t, &vec![GUARD; k], 1);
        let r = Geqrf::new(m, n)
            .ld(lda)
            .run(&t, &mut pa.view_mut(), &mut ptau.view_mut())
            .and_then(|()| t.synchronize());
        if let Err(e) = r {
            d.check(&case, false, &format!("failed: {e}"));
            continue;
        }
        let mut fa = a0.clone();
        let tau = geqrf_ref(m, n, lda, &mut fa);
        let got = pa.read(&t, d, &case);
        d.cmp(&format!("{case}: R and the reflectors"), &got, &fa, tol);
        let got = ptau.read(&t, d, &case);
        d.cmp(&format!("{case}: tau"), &got, &tau, tol);
    }
}

/// Every solver wrapper against LAPACK's algorithms, in `f32` and `f64`.
fn solver_agrees_with_lapack(rt: &Runtime) {
    let mut d = Diffs::new(rt);
    solver_cases::<f32>(rt, &mut d);
    solver_cases::<f64>(rt, &mut d);
    d.finish("solver");
}
backend_tests!(solver_agrees_with_lapack);

// -------------------------------------------------------------- sparse --

fn sparse_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    // A 4 x 5 matrix with an empty row, unsorted and repeated columns;
    // one without entries; an empty one.
    type Mat = (&'static str, usize, usize, Vec<i32>, Vec<i32>);
    let mats: Vec<Mat> = vec![
        (
            "4x5",
            4,
            5,
            vec![0, 3, 3, 6, 8],
            vec![4, 0, 2, 1, 1, 3, 0, 4],
        ),
        ("3x2 nnz 0", 3, 2, vec![0, 0, 0, 0], vec![]),
        ("0x3", 0, 3, vec![0], vec![]),
    ];
    for (name, m, n, rp, ci) in mats {
        let vals = rounded::<T>(&values(ci.len(), 80));
        let tv: Vec<T> = vals.iter().map(|&v| T::of(v)).collect();
        let a = Csr::from_host(&t, m, n, &rp, &ci, &tv).unwrap();
        // (i, j) of the dense A.
        let mut dense = vec![0.0; m * n];
        for i in 0..m {
            for p in rp[i] as usize..rp[i + 1] as usize {
                dense[i + ci[p] as usize * m] += vals[p];
            }
        }
        for op in [Op::N, Op::T] {
            let (rows, cols) = if op == Op::N { (m, n) } else { (n, m) };
            for alpha in [0.0, 1.0, -1.5] {
                for beta in [0.0, 1.0, 0.5] {
                    // spmv at views of odd elements; beta = 0: NaN in y.
                    let x = rounded::<T>(&values(cols, 81));
                    let y0 = rounded::<T>(&if beta == 0.0 {
                        poisoned(rows, 82)
                    } else {
                        values(rows, 82)
                    });
                    let case = format!(
                        "spmv {} {name} {op:?} alpha {alpha} beta {beta}, views at 1/1",
                        T::NAME
                    );
                    let px = Placed::<T>::new(&t, &x, 1);
                    let mut py = Placed::<T>::new(&t, &y0, 1);
                    if let Err(e) = sparse::spmv_op(
                        &t,
                        op,
                        T::of(alpha),
                        &a,
                        &px.view(),
                        T::of(beta),
                        &mut py.view_mut(),
                    ) {
                        d.check(&case, false, &format!("failed: {e}"));
                        continue;
                    }
                    let mut want = y0.clone();
                    gemv_ref((m, n, op), (alpha, beta), (&dense, m.max(1)), &x, &mut want);
                    if m == 0 || n == 0 {
                        // Not gemv's quick return: a product with no
                        // entries is `beta y` (the module's docs).
                        want = y0
                            .iter()
                            .map(|&v| if beta == 0.0 { 0.0 } else { beta * v })
                            .collect();
                    }
                    let got = py.read(&t, d, &case);
                    d.cmp(&case, &got, &want, tol_k::<T>(cols));
                    // spmm of 3 columns, ld > rows.
                    let k = 3;
                    let (ldb, ldc) = (cols + 1, rows + 2);
                    let b = rounded::<T>(&values(ldb * (k - 1) + cols, 83));
                    let c0 = rounded::<T>(&if beta == 0.0 {
                        poisoned(ldc * (k - 1) + rows, 84)
                    } else {
                        values(ldc * (k - 1) + rows, 84)
                    });
                    let case = format!("spmm {} {name} {op:?} k {k} alpha {alpha} beta {beta}, ld {ldb}/{ldc}, views at 1/3", T::NAME);
                    let pb = Placed::<T>::new(&t, &b, 1);
                    let mut pc = Placed::<T>::new(&t, &c0, 3);
                    let r = Spmm::new(k)
                        .op(op)
                        .alpha(T::of(alpha))
                        .beta(T::of(beta))
                        .ld(ldb, ldc)
                        .run(&t, &a, &pb.view(), &mut pc.view_mut());
                    if let Err(e) = r {
                        d.check(&case, false, &format!("failed: {e}"));
                        continue;
                    }
                    let mut want = c0.clone();
                    if rows > 0 {
                        for j in 0..k {
                            let col = &mut want[j * ldc..j * ldc + rows];
                            if m == 0 || n == 0 || a.nnz() == 0 {
                                col.iter_mut()
                                    .for_each(|v| *v = if beta == 0.0 { 0.0 } else { beta * *v });
                            } else {
                                gemv_ref(
                                    (m, n, op),
                                    (alpha, beta),
                                    (&dense, m),
                                    &b[j * ldb..j * ldb + cols],
                                    col,
                                );
                            }
                        }
                    }
                    let got = pc.read(&t, d, &case);
                    d.cmp(&case, &got, &want, tol_k::<T>(cols));
                }
            }
        }
    }
}

/// The sparse products against dense reference products, in `f32` and
/// `f64`.
fn sparse_agrees_with_dense_reference(rt: &Runtime) {
    let mut d = Diffs::new(rt);
    sparse_cases::<f32>(rt, &mut d);
    sparse_cases::<f64>(rt, &mut d);
    d.finish("sparse");
}
backend_tests!(sparse_agrees_with_dense_reference);

// ----------------------------------------------------------------- fft --

/// The unnormalized DFT of each of `batch` row-major arrays of `dims`
/// (`sign` -1 forward, +1 inverse), in f64.
fn dft(dims: &[usize], batch: usize, sign: f64, x: &[Complex<f64>]) -> Vec<Complex<f64>> {
    let mut data = x.to_vec();
    let total: usize = dims.iter().product();
    for axis in 0..dims.len() {
        let n = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        for b in 0..batch * total / (n * inner) {
            for i in 0..inner {
                let at = |k: usize| b * n * inner + k * inner + i;
                let line: Vec<Complex<f64>> = (0..n).map(|k| data[at(k)]).collect();
                for k in 0..n {
                    data[at(k)] = (0..n)
                        .map(|j| {
                            let ph = sign * std::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
                            line[j] * Complex::new(ph.cos(), ph.sin())
                        })
                        .sum();
                }
            }
        }
    }
    data
}

fn fft_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    let c = |v: &Complex<f64>| Complex::new(T::of(v.re), T::of(v.im));
    let back = |v: &Complex<T>| Complex::new(v.re.into(), v.im.into());
    let flat = |v: &[Complex<f64>]| v.iter().flat_map(|z| [z.re, z.im]).collect::<Vec<f64>>();
    for (dims, batch) in [
        (vec![1], 1),
        (vec![2], 1),
        (vec![5], 2),
        (vec![8], 1),
        (vec![3, 4], 2),
        (vec![2, 3, 2], 1),
    ] {
        let n: usize = dims.iter().product();
        let last = *dims.last().unwrap();
        let half = n / last * (last / 2 + 1);
        let plan = Plan::new(&dims).batch(batch);
        let tol = 1e3 * T::EPS * n as f64;
        let raw = values(2 * n * batch, 90 + n as u64);
        let x: Vec<Complex<f64>> = raw
            .chunks(2)
            .map(|p| Complex::new(T::of(p[0]).into(), T::of(p[1]).into()))
            .collect();
        let xs: Vec<Complex<T>> = x.iter().map(c).collect();
        for (inverse, sign) in [(false, -1.0), (true, 1.0)] {
            let want = flat(&dft(&dims, batch, sign, &x));
            // Out of place, both at odd (complex) elements.
            let case = format!(
                "fft c2c {} {dims:?} x{batch} inverse {inverse}, views at 1/3",
                T::NAME
            );
            let mut inb = t.zeros::<Complex<T>>(n * batch + 2).unwrap();
            t.copy_from_host(&mut inb.slice_mut(1..1 + n * batch).unwrap(), &xs)
                .unwrap();
            let mut out = t.zeros::<Complex<T>>(n * batch + 4).unwrap();
            {
                let i = inb.slice(1..1 + n * batch).unwrap();
                let mut o = out.slice_mut(3..3 + n * batch).unwrap();
                let r = if inverse {
                    plan.inverse(&t, &i, &mut o)
                } else {
                    plan.forward(&t, &i, &mut o)
                };
                if let Err(e) = r {
                    d.check(&case, false, &format!("failed: {e}"));
                    continue;
                }
            }
            let got: Vec<Complex<f64>> = t.to_vec(&out).unwrap().iter().map(back).collect();
            d.check(
                &case,
                got[..3]
                    .iter()
                    .chain(&got[3 + n * batch..])
                    .all(|z| z.re == 0.0 && z.im == 0.0),
                "written outside the output",
            );
            d.cmp(&case, &flat(&got[3..3 + n * batch]), &want, tol);
            // In place.
            let case = format!(
                "fft c2c in place {} {dims:?} x{batch} inverse {inverse}, view at 1",
                T::NAME
            );
            {
                let mut v = inb.slice_mut(1..1 + n * batch).unwrap();
                let r = if inverse {
                    plan.inverse_in_place(&t, &mut v)
                } else {
                    plan.forward_in_place(&t, &mut v)
                };
                if let Err(e) = r {
                    d.check(&case, false, &format!("failed: {e}"));
                    continue;
                }
            }
            let got: Vec<Complex<f64>> = t.to_vec(&inb).unwrap().iter().map(back).collect();
            d.cmp(&case, &flat(&got[1..1 + n * batch]), &want, tol);
        }
        // Real to complex from a real view at an even element, complex out
        // at an odd one; complex to real back (both variants).
        let r: Vec<f64> = rounded::<T>(&values(n * batch, 95));
        let spec = dft(
            &dims,
            batch,
            -1.0,
            &r.iter().map(|&v| Complex::new(v, 0.0)).collect::<Vec<_>>(),
        );
        // The half spectrum: the last axis' first last/2 + 1 points.
        let hs: Vec<Complex<f64>> = (0..batch * n / last)
            .flat_map(|line| spec[line * last..line * last + last / 2 + 1].to_vec())
            .collect();
        let case = format!("fft r2c {} {dims:?} x{batch}, views at 2/1", T::NAME);
        let rb = Placed::<T>::new(&t, &r, 2);
        let mut out = t.zeros::<Complex<T>>(half * batch + 1).unwrap();
        {
            let mut o = out.slice_mut(1..).unwrap();
            if let Err(e) = plan.forward_real(&t, &rb.view(), &mut o) {
                d.check(&case, false, &format!("failed: {e}"));
                continue;
            }
        }
        let got: Vec<Complex<f64>> = t.to_vec(&out).unwrap().iter().map(back).collect();
        d.cmp(&case, &flat(&got[1..]), &flat(&hs), tol);
        let want: Vec<f64> = r.iter().map(|v| v * n as f64).collect();
        for overwriting in [false, true] {
            let case = format!(
                "fft c2r {} {dims:?} x{batch} overwriting {overwriting}, views at 1/2",
                T::NAME
            );
            let mut inb = t.zeros::<Complex<T>>(half * batch + 1).unwrap();
            let hst: Vec<Complex<T>> = hs.iter().map(c).collect();
            t.copy_from_host(&mut inb.slice_mut(1..).unwrap(), &hst)
                .unwrap();
            let mut ob = Placed::<T>::new(&t, &vec![GUARD; n * batch], 2);
            let r = if overwriting {
                plan.inverse_real_overwriting(
                    &t,
                    &mut inb.slice_mut(1..).unwrap(),
                    &mut ob.view_mut(),
                )
            } else {
                plan.inverse_real(&t, &inb.slice(1..).unwrap(), &mut ob.view_mut())
            };
            if let Err(e) = r {
                d.check(&case, false, &format!("failed: {e}"));
                continue;
            }
            let got = ob.read(&t, d, &case);
            d.cmp(&case, &got, &want, tol);
        }
        // A real operand at an odd element is refused on both backends.
        let case = format!("fft r2c {} {dims:?} from an odd element", T::NAME);
        let odd = Placed::<T>::new(&t, &r, 1);
        let mut o = t.zeros::<Complex<T>>(half * batch).unwrap();
        let r = plan.forward_real(&t, &odd.view(), &mut o);
        d.check(
            &case,
            matches!(r, Err(Error::Shape { .. })),
            &format!("{r:?}, a shape error expected"),
        );
    }
}

/// The transforms against a direct DFT, in `f32` and `f64`.
fn fft_agrees_with_direct_dft(rt: &Runtime) {
    let mut d = Diffs::new(rt);
    fft_cases::<f32>(rt, &mut d);
    fft_cases::<f64>(rt, &mut d);
    d.finish("fft");
}
backend_tests!(fft_agrees_with_direct_dft);

// -------------------------------------------------------------- random --

/// What a fill gives: the same seed, offset and length give the same
/// values, bit for bit, wherever the output lies (a buffer of its own, or
/// a view at any element of a larger one).
fn random_cases<T: E>(rt: &Runtime, d: &mut Diffs) {
    let t = rt.begin_task().unwrap();
    for normal in [false, true] {
        for len in (1..10).chain([64, 65]) {
            for offset in [0, 1, 6] {
                let rng = Rng::new(99).with_offset(offset);
                let fill = |rng: &mut Rng, v: &mut gpu_sched::ViewMut<'_, T>| {
                    if normal {
                        rng.normal(&t, T::of(1.0), T::of(2.0), v)
                    } else {
                        rng.uniform(&t, v)
                    }
                };
                let mut own = t.zeros::<T>(len).unwrap();
                fill(&mut rng.clone(), &mut own.slice_mut(..).unwrap()).unwrap();
                let want: Vec<f64> = t
                    .to_vec(&own)
                    .unwrap()
                    .into_iter()
                    .map(Into::into)
                    .collect();
                for start in 1..4 {
                    let case = format!(
                        "{} {} {len} at offset {offset}, a view at element {start}",
                        if normal { "normal" } else { "uniform" },
                        T::NAME
                    );
                    let mut p = Placed::<T>::new(&t, &vec![GUARD; len], start);
                    let mut r = rng;
                    fill(&mut r, &mut p.view_mut()).unwrap();
                    d.check(
                        &case,
                        r.offset() == offset + len as u64,
                        "the offset moved otherwise",
                    );
                    let got = p.read(&t, d, &case);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    d.check(
                        &case,
                        same,
                        &format!("{got:?} != {want:?} (the allocation's)"),
                    );
                }
            }
        }
    }
}

/// `random`'s fills depend on the seed, offset and length only.
fn random_values_do_not_depend_on_the_address(rt: &Runtime) {
    let mut d = Diffs::new(rt);
    random_cases::<f32>(rt, &mut d);
    random_cases::<f64>(rt, &mut d);
    d.finish("random");
}
backend_tests!(random_values_do_not_depend_on_the_address);
