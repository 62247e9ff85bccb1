//! # 13: a repeated time step as one graph (`gpu::Graphed`)
//!
//! Two populations on a ring of cells, each with two fields: `u` (not yet
//! reached) and `v` (reached), which both diffuse to the neighbouring cells
//! while `u` turns into `v` at the rate `r u v`, so a front runs around the
//! ring (the total `u + v` of a ring stays what it was). One time step of a
//! population is a kernel of our own, in CUDA C compiled at run time, with
//! a host implementation in safe Rust; after two steps (a ping-pong of two
//! pairs of buffers) a built-in kernel of `gpu-kernels` adds `v` to the
//! population's exposure (`exposure += dt v`).
//!
//! The step of both populations is a `gpu::Graphed` scope run again and
//! again, each population a task of its own (two branches of one graph).
//! The first run records the kernels and builds the graph; every later run
//! of the same shape launches that graph again (a *replay*), after setting
//! in place the arguments that changed (here: one population's rate,
//! halfway). No capture by hand, no list of buffers: `stats()` says what
//! happened. A host read inside the body is refused (`Error::Capturing`):
//! the body records work, nothing runs until it returns.
//!
//! The fields are checked against the same steps on the CPU; exits non-zero
//! if they differ, or if the runs did not replay one graph.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 13-graphed
//! ```

use gpu::kernel::{In, Kernel, LaunchConfig, Out};
use gpu::prelude::*;
use gpu::BackendKind;
use gpu_kernels as k;
use std::time::Instant;

const SRC: &str = r#"
// One step of both fields of a ring of n cells (periodic).
extern "C" __global__ void exchange(float* u_out, float* v_out,
                                    const float* u, const float* v,
                                    unsigned long long n, float d, float r) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long l = i == 0 ? n - 1 : i - 1;
    unsigned long long h = i + 1 == n ? 0 : i + 1;
    float ui = u[i], vi = v[i];
    float flow = r * ui * vi;
    u_out[i] = ui + d * (u[l] - 2.0f * ui + u[h]) - flow;
    v_out[i] = vi + d * (v[l] - 2.0f * vi + v[h]) + flow;
}
"#;

/// `(float* u_out, float* v_out, const float* u, const float* v,
/// unsigned long long n, float d, float r)`.
type Exchange = Kernel<(Out<f32>, Out<f32>, In<f32>, In<f32>, u64, f32, f32)>;

/// The diffusion number (stable up to 1/2 on a ring).
const D: f32 = 0.2;
/// The time step of the exposure.
const DT: f32 = 0.5;

/// The kernel's cells, on the CPU: the host implementation, and the
/// reference the example checks against.
fn exchange_host(
    u_out: &mut [f32],
    v_out: &mut [f32],
    u: &[f32],
    v: &[f32],
    n: u64,
    d: f32,
    r: f32,
) {
    let n = n as usize;
    for i in 0..n {
        let (l, h) = ((i + n - 1) % n, (i + 1) % n);
        let (ui, vi) = (u[i], v[i]);
        let flow = r * ui * vi;
        u_out[i] = ui + d * (u[l] - 2.0 * ui + u[h]) - flow;
        v_out[i] = vi + d * (v[l] - 2.0 * vi + v[h]) + flow;
    }
}

/// One population on the device: its fields, the spare pair the odd steps
/// write, its exposure, and its rate.
struct Ring {
    u: Buffer<f32>,
    v: Buffer<f32>,
    u2: Buffer<f32>,
    v2: Buffer<f32>,
    exposure: Buffer<f32>,
    r: f32,
}

/// The starting fields: `v` a bump of width `n / 64` at `at`, `u = 1 - v`.
fn initial(n: usize, at: usize) -> (Vec<f32>, Vec<f32>) {
    let w = (n / 64).max(1);
    let v: Vec<f32> = (0..n)
        .map(|i| if i.abs_diff(at) < w { 0.5 } else { 0.0 })
        .collect();
    (v.iter().map(|v| 1.0 - v).collect(), v)
}

impl Ring {
    fn new(n: usize, at: usize, r: f32) -> Result<Ring> {
        let (u, v) = initial(n, at);
        Ok(Ring {
            u: Buffer::from_host(&u)?,
            v: Buffer::from_host(&v)?,
            u2: Buffer::zeros(n)?,
            v2: Buffer::zeros(n)?,
            exposure: Buffer::zeros(n)?,
            r,
        })
    }

    /// Two steps and the exposure, on `t`: three launches.
    fn advance(&mut self, t: &TaskContext, k: &Exchange) -> Result<()> {
        let n = self.u.len();
        let cfg = LaunchConfig::for_elements(n, 256);
        // SAFETY: the four buffers of each launch hold `n` elements (made
        // so in `Ring::new`), and a thread `i < n` reads cells `i - 1`,
        // `i`, `i + 1` (mod `n`) of the inputs and writes cell `i` of the
        // two outputs, distinct buffers passed `&mut`.
        unsafe {
            k.launch(
                t,
                cfg,
                (
                    &mut self.u2,
                    &mut self.v2,
                    &self.u,
                    &self.v,
                    n as u64,
                    D,
                    self.r,
                ),
            )?;
            k.launch(
                t,
                cfg,
                (
                    &mut self.u,
                    &mut self.v,
                    &self.u2,
                    &self.v2,
                    n as u64,
                    D,
                    self.r,
                ),
            )?;
        }
        gpu_kernels::axpy(t, DT, &self.v, &mut self.exposure)
    }
}

/// The same steps on the CPU: the fields and the exposure after `runs`
/// runs, the rate `r` for the first `change` runs and `r2` after.
fn reference(
    n: usize,
    at: usize,
    (r, r2, change): (f32, f32, usize),
    runs: usize,
) -> [Vec<f32>; 3] {
    let (mut u, mut v) = initial(n, at);
    let (mut u2, mut v2, mut e) = (vec![0.0; n], vec![0.0; n], vec![0.0f32; n]);
    for run in 0..runs {
        let r = if run < change { r } else { r2 };
        exchange_host(&mut u2, &mut v2, &u, &v, n as u64, D, r);
        exchange_host(&mut u, &mut v, &u2, &v2, n as u64, D, r);
        e.iter_mut().zip(&v).for_each(|(e, v)| *e += DT * v);
    }
    [u, v, e]
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // (The bundle passes an output folder; this example writes nothing.)
    let rt = gpu::runtime()?;
    let (n, runs) = match rt.backend() {
        BackendKind::Cuda => (1 << 20, 400),
        BackendKind::Host => (2048, 60),
    };
    println!(
        "13-graphed: backend {} ({}); 2 rings of {n} cells, {runs} runs of 2 steps each",
        rt.backend(),
        rt.device_name()
    );
    // `--fmad=false`: the GPU rounds as the CPU loop does.
    let module = rt.compile_cuda(SRC, &["--fmad=false"])?;
    let kernel: Exchange = module.kernel("exchange")?.with_host(exchange_host);
    println!(
        "  kernel: {}",
        if module.is_compiled() {
            "CUDA C compiled by NVRTC"
        } else {
            "host implementation (no NVRTC: the name and parameters read from the source)"
        }
    );

    let (ra, rb, rb2) = (0.5f32, 0.25f32, 0.5f32);
    let mut a = Ring::new(n, n / 4, ra)?;
    let mut b = Ring::new(n, 3 * n / 4, rb)?;

    // Inside the body work is recorded, not run: a host read is refused
    // before anything is queued, and the error reaches the caller.
    let mut refused = gpu::Graphed::new()?;
    let e = refused
        .scope(|s| {
            k::fill(s, &mut a.exposure, 0.0)?;
            s.to_vec(&a.u).map(drop)
        })
        .unwrap_err();
    if !matches!(e, Error::Capturing { .. }) {
        return Err(format!("a host read in a graphed scope gave {e:?}").into());
    }
    println!("  a host read in the body is refused: {e}");

    let mut step = gpu::Graphed::new()?;
    let k = &kernel;
    let start = Instant::now();
    for run in 0..runs {
        if run == runs / 2 {
            b.r = rb2; // a changed scalar: set in place, the same graph
        }
        let (a, b) = (&mut a, &mut b);
        step.scope(|s| {
            s.spawn(move |t| a.advance(t, k)); // two branches of one graph
            s.spawn(move |t| b.advance(t, k));
            Ok(())
        })?; // launched, not waited for
    }
    gpu::synchronize()?;
    let took = start.elapsed();
    let st = step.stats();
    println!(
        "  {runs} runs in {took:.2?} ({:.2?} a run): {} graph built, {} replays, \
         {} of them after setting {} kernel nodes' arguments in place; \
         {} nodes, {} edges",
        took / runs as u32,
        st.builds,
        st.replays,
        st.updates,
        st.nodes_updated,
        st.nodes,
        st.edges
    );

    let mut worst = 0.0f32;
    for (name, ring, at, rates) in [
        ("a", &a, n / 4, (ra, ra, runs)),
        ("b", &b, 3 * n / 4, (rb, rb2, runs / 2)),
    ] {
        let want = reference(n, at, rates, runs);
        let got = [ring.u.to_vec()?, ring.v.to_vec()?, ring.exposure.to_vec()?];
        for (g, w) in got.iter().zip(&want) {
            let scale = w.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            let d = g
                .iter()
                .zip(w)
                .fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
            worst = worst.max(d / scale);
        }
        let total: f64 = got[0].iter().chain(&got[1]).map(|&x| f64::from(x)).sum();
        let reached = got[1].iter().filter(|&&v| v > 0.5).count();
        println!(
            "  ring {name}: {reached} of {n} cells reached (v > 0.5); u + v sums to {total:.3} ({n} cells)"
        );
        if (total - n as f64).abs() > 1e-3 * n as f64 {
            return Err(format!("ring {name}: u + v sums to {total}, not {n}").into());
        }
    }
    println!("  largest difference from the CPU steps: {worst:.2e} (relative)");
    if worst > 1e-4 {
        return Err(format!("the fields differ from the CPU steps by {worst:e}").into());
    }
    if (st.builds, st.replays) != (1, runs as u64 - 1) || st.updates == 0 {
        return Err(format!("expected one graph, replayed {} times: {st:?}", runs - 1).into());
    }
    println!("  matches the CPU steps; one graph, replayed");
    Ok(())
}
