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
//! `cg-small-fused`, `cg-fused` and their `-graphed` rows: the same CG
//! with the vector updates in two kernels of the user's own (compiled by
//! NVRTC, as `gpu::kernel` users write them): `x += a p, r -= a q` with
//! `a = rr / pq` read on the device, and `p = r + b p` with
//! `b = rr_new / rr`, in place of the three one-thread kernels, the two
//! `axpy_dev`, `scal_dev` and `axpy`. A step is then `spmv`, two `dot`s
//! and these two kernels (5 operations, not 10), and moves two vector
//! passes less (`scal_dev` and `axpy` read and write `p` twice).
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

mod hand;

/// Steps of one CG run (restarted from `x = 0` after each).
const STEPS: u64 = 200;

const SRC: &str = r#"
extern "C" __global__ void b16_ratio(double* out, const double* num, const double* den, double sign) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = sign * num[0] / den[0];
}
"#;

type Ratio = gpu::kernel::Kernel<(Out<f64>, In<f64>, In<f64>, f64)>;

/// The fused step's kernels (see the module's docs): `u64` lengths, a
/// grid-stride loop, each factor computed by every thread from the two
/// scalars on the device.
const FUSED_SRC: &str = r#"
extern "C" __global__ void b16_update(double* x, double* r, const double* p, const double* q,
                                      const double* rr, const double* pq, unsigned long long n) {
    const double a = rr[0] / pq[0];
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        x[i] = fma(a, p[i], x[i]);
        r[i] = fma(-a, q[i], r[i]);
    }
}
extern "C" __global__ void b16_xpay(double* p, const double* r, const double* num,
                                    const double* den, unsigned long long n) {
    const double b = num[0] / den[0];
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        p[i] = fma(b, p[i], r[i]);
    }
}
"#;

type Update = gpu::kernel::Kernel<(Out<f64>, Out<f64>, In<f64>, In<f64>, In<f64>, In<f64>, u64)>;
type Xpay = gpu::kernel::Kernel<(Out<f64>, In<f64>, In<f64>, In<f64>, u64)>;

/// How a step updates the vectors: through the library (`Library`, with
/// the one-thread kernel for the factors) or the two fused kernels.
#[derive(Clone, Copy)]
enum Step<'k> {
    Library(&'k Ratio),
    Fused(&'k Update, &'k Xpay),
}

impl Step<'_> {
    /// The row name's suffix.
    fn suffix(self) -> &'static str {
        match self {
            Step::Library(_) => "",
            Step::Fused(..) => "-fused",
        }
    }
}

/// The fused kernels, with their host twins.
fn fused_kernels(rt: &Runtime) -> (Update, Xpay) {
    let m = rt.compile_cuda(FUSED_SRC, &[]).unwrap();
    let update: Update = m.kernel("b16_update").unwrap().with_host(
        |x: &mut [f64], r: &mut [f64], p: &[f64], q: &[f64], rr: &[f64], pq: &[f64], n: u64| {
            let a = rr[0] / pq[0];
            for i in 0..n as usize {
                x[i] = a.mul_add(p[i], x[i]);
                r[i] = (-a).mul_add(q[i], r[i]);
            }
        },
    );
    let xpay: Xpay = m.kernel("b16_xpay").unwrap().with_host(
        |p: &mut [f64], r: &[f64], num: &[f64], den: &[f64], n: u64| {
            let b = num[0] / den[0];
            for i in 0..n as usize {
                p[i] = b.mul_add(p[i], r[i]);
            }
        },
    );
    (update, xpay)
}

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

    /// One step, as `how` says; its dots through cuBLAS (in a graphed
    /// scope with a workspace of their own).
    fn step(&mut self, t: &TaskContext, how: Step<'_>) {
        match how {
            Step::Library(k) => self.library_step(t, k),
            Step::Fused(update, xpay) => self.fused_step(t, update, xpay),
        }
    }

    /// One step of the fused CG (see the module's docs).
    fn fused_step(&mut self, t: &TaskContext, update: &Update, xpay: &Xpay) {
        use gpu::blas;
        let [rr, rr_new, pq, ..] = &mut self.s;
        let n = self.x.len();
        let cfg = LaunchConfig::for_elements(n, 256);
        sparse::spmv(t, 1.0, &self.a, &self.p, 0.0, &mut self.q).unwrap();
        blas::dot(t, &self.p, &self.q, pq).unwrap();
        // SAFETY: the kernel reads element 0 of `rr` and `pq` and elements
        // `0..n` of `p` and `q`, and writes elements `0..n` of `x` and
        // `r`: every buffer has those elements.
        unsafe {
            update.launch(
                t,
                cfg,
                (
                    &mut self.x,
                    &mut self.r,
                    &self.p,
                    &self.q,
                    &*rr,
                    &*pq,
                    n as u64,
                ),
            )
        }
        .unwrap();
        blas::dot(t, &self.r, &self.r, rr_new).unwrap();
        // SAFETY: as above: `0..n` of `p` (written) and `r`, element 0 of
        // `rr_new` and `rr`.
        unsafe { xpay.launch(t, cfg, (&mut self.p, &self.r, &*rr_new, &*rr, n as u64)) }.unwrap();
        std::mem::swap(rr, rr_new);
    }

    /// One step through the library (see the module's docs).
    fn library_step(&mut self, t: &TaskContext, k: &Ratio) {
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
    k: Step<'_>,
    iters: u64,
) -> Duration {
    in_runs(iters.div_ceil(GRAPHED_STEPS) * GRAPHED_STEPS, |run| {
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
        start.elapsed()
    })
}

/// Times `iters` steps, in runs of `STEPS` from a restart (untimed).
fn steps(t: &TaskContext, cg: &mut Cg, k: Step<'_>, iters: u64) -> Duration {
    in_runs(iters, |run| {
        cg.restart(t);
        t.synchronize().unwrap();
        let start = Instant::now();
        for _ in 0..run {
            cg.step(t, k);
        }
        t.synchronize().unwrap();
        start.elapsed()
    })
}

/// `steps` steps in runs of at most [`STEPS`]: the sum of the times `run`
/// gives for each run's number of steps.
fn in_runs(steps: u64, mut run: impl FnMut(u64) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = steps;
    while left > 0 {
        let n = left.min(STEPS);
        total += run(n);
        left -= n;
    }
    total
}

/// B16's rows of one step kind `how` on `cg`: `name` (plain steps) and
/// `name-graphed`, each checked first (the first step's residual against
/// the host's; the graphed steps' against the plain ones').
fn plain_and_graphed(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    t: &TaskContext,
    cg: &mut Cg,
    how: Step<'_>,
    name: &str,
) {
    // Once, checked: the first step's residual is the host's (b = 1
    // lies near A's low modes, so 200 steps need not shrink it much:
    // convergence is not what is checked).
    cg.restart(t);
    cg.step(t, how);
    let rr = t.to_vec(&cg.s[0]).unwrap()[0];
    assert!(
        (rr - cg.rr1).abs() <= 1e-9 * cg.rr1,
        "B16 {name}: r . r after one step is {rr}, the host's {}",
        cg.rr1
    );
    g.bench_function(name, |b| b.iter_custom(|iters| steps(t, cg, how, iters)));
    // The same steps through a graphed scope (issue 38): checked
    // against the same plain steps' residual first, then timed.
    let mut graphed = gpu::Graphed::on(rt());
    cg.restart(t);
    for _ in 0..STEPS {
        cg.step(t, how);
    }
    let plain = t.to_vec(&cg.s[0]).unwrap()[0];
    graphed_steps(t, &mut graphed, cg, how, STEPS);
    let rr = t.to_vec(&cg.s[0]).unwrap()[0];
    assert!(
        (rr - plain).abs() <= 1e-9 * plain.abs(),
        "B16 {name}: r . r after {STEPS} graphed steps is {rr}, the plain steps' {plain}"
    );
    let st = graphed.stats();
    assert_eq!(st.builds, 1, "B16 {name}: {st:?}");
    g.bench_function(format!("{name}-graphed"), |b| {
        b.iter_custom(|iters| graphed_steps(t, &mut graphed, cg, how, iters))
    });
    let st = graphed.stats();
    println!(
        "B16 {name}-graphed: last run's body {:?}, its graph {:?} ({} nodes; {} builds, {} replays, {} nodes set in place)",
        st.last_body, st.last_graph, st.nodes, st.builds, st.replays, st.nodes_updated,
    );
}

/// `cg-small-fused-capture` (CUDA only): the fused steps captured by hand
/// ([`hand::Hand`]), checked against the library's plain steps' residual
/// after [`STEPS`] steps, then timed in runs as [`graphed_steps`] times
/// the graphed scope's.
fn hand_captured(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    t: &TaskContext,
    cg: &mut Cg,
    how: Step<'_>,
    n: usize,
) {
    cg.restart(t);
    for _ in 0..STEPS {
        cg.step(t, how);
    }
    let plain = t.to_vec(&cg.s[0]).unwrap()[0];
    // A task of its own: its stream is the hand capture's alone.
    let own = rt().begin_task().unwrap();
    let hand = hand::Hand::new(&own, n);
    let run = |h: &hand::Hand, steps: u64| {
        h.restart();
        h.sync();
        let start = Instant::now();
        for _ in 0..steps / GRAPHED_STEPS {
            h.launch();
        }
        h.sync();
        start.elapsed()
    };
    run(&hand, STEPS);
    let rr = hand.rr();
    assert!(
        (rr - plain).abs() <= 1e-9 * plain.abs(),
        "B16 hand capture: r . r after {STEPS} steps is {rr}, the plain steps' {plain}"
    );
    g.bench_function("cg-small-fused-capture", |b| {
        b.iter_custom(|iters| {
            in_runs(iters.div_ceil(GRAPHED_STEPS) * GRAPHED_STEPS, |n| {
                run(&hand, n)
            })
        })
    });
    drop(hand);
    drop(own);
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
    let (update, xpay) = fused_kernels(rt);
    let (small, large) = if cuda() { (1024, 4096) } else { (32, 64) };
    let mut g = c.benchmark_group("B16");
    g.sample_size(10);
    for (name, n) in [("cg-small", small), ("cg", large)] {
        let mut cg = Cg::new(&t, n);
        for how in [Step::Library(&k), Step::Fused(&update, &xpay)] {
            let name = format!("{name}{}", how.suffix());
            plain_and_graphed(&mut g, &t, &mut cg, how, &name);
        }
        if name == "cg-small" && cuda() {
            hand_captured(&mut g, &t, &mut cg, Step::Fused(&update, &xpay), n);
        }
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
