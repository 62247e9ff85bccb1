//! B16: conjugate gradients on a sparse matrix through the library: the
//! time of one CG step (runs of 200 steps from `x = 0`, no host read in
//! between, as `benches/cupy_cg.py` runs CuPy's `cg` with `maxiter=200,
//! tol=0`) on the 2D Poisson matrix (5-point stencil, Dirichlet) of a
//! 1024 x 1024 grid (`cg-small`) and a 4096 x 4096 one (`cg`), f64, the
//! matrix a `gpu::sparse::Csr` and each step `spmv`, two `dot`s, three
//! one-thread kernels for the factors, two `axpy_dev`, `scal_dev`, `axpy`
//! (as `examples/12-cg-sparse.rs`). `cg-small-graphed` and `cg-graphed`:
//! the same steps through a `gpu::Graphed` of 10 steps a run (issue 38:
//! its library calls captured into child graphs, the SpMV's workspace and
//! the dots' reused from run to run).
//!
//! `copy-bound` is the memory-traffic bound of a step of the large grid:
//! a device-to-device copy of half the bytes a step moves (the copy reads
//! and writes them), i.e. the step's bytes at the measured copy
//! bandwidth. A step moves, each once: the matrix (`4 (N + 1) + 12 nnz`
//! bytes, `nnz` about `5 N`), and 14 vector passes of `8 N` bytes (SpMV
//! reads `p`, writes `q`; the dots read 2 + 1; the two axpys read 2 and
//! write 1 each; scal reads and writes `p`; the last axpy reads 2, writes
//! 1): `4 (N + 1) + 12 nnz + 184 N` bytes, with `N` unknowns.

use super::*;
use gpu::sparse::{self, Csr};

/// Steps of one CG run (restarted from `x = 0` after each).
const STEPS: u64 = 200;

const SRC: &str = r#"
extern "C" __global__ void b16_ratio(double* out, const double* num, const double* den, double sign) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = sign * num[0] / den[0];
}
"#;

type Ratio = gpu::kernel::Kernel<(Out<f64>, In<f64>, In<f64>, f64)>;

/// One CG solve's state on the device.
struct Cg {
    a: Csr<f64>,
    b: Buffer<f64>,
    x: Buffer<f64>,
    r: Buffer<f64>,
    p: Buffer<f64>,
    q: Buffer<f64>,
    /// rr, rr_new, pq, alpha, -alpha, beta.
    s: [Buffer<f64>; 6],
    /// `r . r` after the first step, computed on the host.
    rr1: f64,
}

impl Cg {
    fn new(t: &TaskContext, n: usize) -> Cg {
        let (rp, ci, v) = common::poisson::poisson(n);
        let len = n * n;
        // The first step from x = 0, b = 1: alpha = (b . b) / (b . A b),
        // r = b - alpha A b (A b: the row sums).
        let ab: Vec<f64> = rp
            .windows(2)
            .map(|w| v[w[0] as usize..w[1] as usize].iter().sum())
            .collect();
        let alpha = len as f64 / ab.iter().sum::<f64>();
        let rr1 = ab.iter().map(|a| (1.0 - alpha * a).powi(2)).sum();
        let a = Csr::from_host(t, len, len, &rp, &ci, &v).unwrap();
        let b = t.from_host(&vec![1.0f64; len]).unwrap();
        let z = || t.zeros::<f64>(len).unwrap();
        let one = || t.zeros::<f64>(1).unwrap();
        Cg {
            a,
            b,
            x: z(),
            r: z(),
            p: z(),
            q: z(),
            s: [one(), one(), one(), one(), one(), one()],
            rr1,
        }
    }

    /// `x = 0`, `r = p = b`, `rr = r . r`.
    fn restart(&mut self, t: &TaskContext) {
        t.memset_zero(&mut self.x).unwrap();
        t.copy(&self.b, &mut self.r).unwrap();
        t.copy(&self.b, &mut self.p).unwrap();
        gpu::blas::dot(t, &self.r, &self.r, &mut self.s[0]).unwrap();
    }

    /// One step; its dots through cuBLAS (in a graphed scope with a
    /// workspace of their own).
    fn step(&mut self, t: &TaskContext, k: &Ratio) {
        use gpu::blas;
        let [rr, rr_new, pq, alpha, neg, beta] = &mut self.s;
        let ratio = |out: &mut Buffer<f64>, num: &Buffer<f64>, den: &Buffer<f64>, sign: f64| {
            // SAFETY: one thread reads element 0 of two one-element
            // buffers and writes element 0 of a third.
            unsafe { k.launch(t, LaunchConfig::for_elements(1, 32), (out, num, den, sign)) }
                .unwrap()
        };
        sparse::spmv(t, 1.0, &self.a, &self.p, 0.0, &mut self.q).unwrap();
        let dot = |x: &Buffer<f64>, y: &Buffer<f64>, out: &mut Buffer<f64>| {
            blas::dot(t, x, y, out).unwrap()
        };
        dot(&self.p, &self.q, pq);
        ratio(alpha, rr, pq, 1.0);
        ratio(neg, rr, pq, -1.0);
        blas::axpy_dev(t, alpha, &self.p, &mut self.x).unwrap();
        blas::axpy_dev(t, neg, &self.q, &mut self.r).unwrap();
        dot(&self.r, &self.r, rr_new);
        ratio(beta, rr_new, rr, 1.0);
        blas::scal_dev(t, beta, &mut self.p).unwrap();
        blas::axpy(t, 1.0, &self.r, &mut self.p).unwrap();
        std::mem::swap(rr, rr_new);
    }
}

/// Steps of one run of the graphed scope (even: `rr` and `rr_new` swap
/// back, so every run has the same pointers and replays as it is).
const GRAPHED_STEPS: u64 = 10;

/// Times `iters` steps through `g`, a graphed scope of
/// [`GRAPHED_STEPS`] steps (built at its first run, before the timing),
/// in runs of `STEPS` from a restart (untimed), as [`steps`].
fn graphed_steps(
    t: &TaskContext,
    g: &mut gpu::Graphed,
    cg: &mut Cg,
    k: &Ratio,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters.div_ceil(GRAPHED_STEPS) * GRAPHED_STEPS;
    while left > 0 {
        let run = left.min(STEPS);
        cg.restart(t);
        t.synchronize().unwrap();
        let start = Instant::now();
        for _ in 0..run / GRAPHED_STEPS {
            g.scope(|s| {
                for _ in 0..GRAPHED_STEPS {
                    cg.step(s, k);
                }
                Ok(())
            })
            .unwrap();
        }
        // The graphs run on the graphed scope's own stream, not `t`'s:
        // every stream's work waited for.
        gpu::synchronize().unwrap();
        total += start.elapsed();
        left -= run;
    }
    total
}

/// Times `iters` steps, in runs of `STEPS` from a restart (untimed).
fn steps(t: &TaskContext, cg: &mut Cg, k: &Ratio, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let run = left.min(STEPS);
        cg.restart(t);
        t.synchronize().unwrap();
        let start = Instant::now();
        for _ in 0..run {
            cg.step(t, k);
        }
        t.synchronize().unwrap();
        total += start.elapsed();
        left -= run;
    }
    total
}

pub(crate) fn b16_cg(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let k: Ratio = rt
        .compile_cuda(SRC, &[])
        .unwrap()
        .kernel("b16_ratio")
        .unwrap()
        .with_host(|out: &mut [f64], num: &[f64], den: &[f64], sign: f64| {
            out[0] = sign * num[0] / den[0];
        });
    let (small, large) = if cuda() { (1024, 4096) } else { (32, 64) };
    let mut g = c.benchmark_group("B16");
    g.sample_size(10);
    for (name, n) in [("cg-small", small), ("cg", large)] {
        let mut cg = Cg::new(&t, n);
        // Once, checked: the first step's residual is the host's (b = 1
        // lies near A's low modes, so 200 steps need not shrink it much:
        // convergence is not what is checked).
        cg.restart(&t);
        cg.step(&t, &k);
        let rr = t.to_vec(&cg.s[0]).unwrap()[0];
        assert!(
            (rr - cg.rr1).abs() <= 1e-9 * cg.rr1,
            "B16 {name}: r . r after one step is {rr}, the host's {}",
            cg.rr1
        );
        g.bench_function(name, |b| {
            b.iter_custom(|iters| steps(&t, &mut cg, &k, iters))
        });
        // The same steps through a graphed scope (issue 38): checked
        // against the same plain steps' residual first, then timed.
        let mut graphed = gpu::Graphed::on(rt);
        cg.restart(&t);
        for _ in 0..STEPS {
            cg.step(&t, &k);
        }
        let plain = t.to_vec(&cg.s[0]).unwrap()[0];
        graphed_steps(&t, &mut graphed, &mut cg, &k, STEPS);
        let rr = t.to_vec(&cg.s[0]).unwrap()[0];
        assert!(
            (rr - plain).abs() <= 1e-9 * plain.abs(),
            "B16 {name}: r . r after {STEPS} graphed steps is {rr}, the plain steps' {plain}"
        );
        let st = graphed.stats();
        assert_eq!(st.builds, 1, "B16 {name}: {st:?}");
        g.bench_function(format!("{name}-graphed"), |b| {
            b.iter_custom(|iters| graphed_steps(&t, &mut graphed, &mut cg, &k, iters))
        });
        println!(
            "B16 {name}-graphed: last run's body {:?}, its graph {:?} ({} nodes; {} builds, {} replays, {} nodes set in place)",
            graphed.stats().last_body,
            graphed.stats().last_graph,
            graphed.stats().nodes,
            graphed.stats().builds,
            graphed.stats().replays,
            graphed.stats().nodes_updated,
        );
        drop(graphed);
        if name == "cg" {
            // The bound: a copy of half a step's bytes.
            let len = n * n;
            let bytes = 4 * (len + 1) + 12 * cg.a.nnz() + 184 * len;
            let src = t.zeros::<u8>(bytes / 2).unwrap();
            let mut dst = t.zeros::<u8>(bytes / 2).unwrap();
            drop(cg);
            t.synchronize().unwrap();
            g.bench_function("copy-bound", |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        t.copy(&src, &mut dst).unwrap();
                    }
                    t.synchronize().unwrap();
                    start.elapsed()
                })
            });
        }
    }
    g.finish();
}
