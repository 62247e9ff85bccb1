//! A library call queues its work and returns, on both backends (DESIGN "Numerical libraries and foreign work";
//! issue 36, item 6): behind a gate that the test opens only after the
//! calls returned, one wrapper of each library (`blas`, `solver`,
//! `sparse`, `fft`, `random`) and a foreign operation of the caller's own
//! return at once (but `random`'s fill on CUDA, which cuRAND makes wait:
//! see `gpu_libs::random`), and their results are right once the gate opened and
//! the task waited; a factorization's failure is reported at that wait. On
//! the host backend each call used to wait for its stream (the twin ran
//! while the caller waited), so it sat out the gate. The buffers a queued
//! twin uses outlive it even when the caller drops them at once.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::blas::{self, Gemm};
use gpu_libs::fft::{Complex32, Plan};
use gpu_libs::random::Rng;
use gpu_libs::solver::Potrf;
use gpu_libs::sparse::{self, Csr};
use gpu_sched::{Error, Runtime, TaskContext};

/// `A = [[0, 3], [5, 0]]`, as CSR.
fn csr(t: &TaskContext) -> Csr<f32> {
    Csr::from_host(t, 2, 2, &[0, 1, 2], &[1, 0], &[3.0, 5.0]).unwrap()
}

/// `y = 2 x` by a foreign operation: on CUDA no device work (the test
/// copies nothing there, so `y` stays as it was), on the host backend
/// the twin.
fn twice(t: &TaskContext, x: &gpu_sched::Buffer<f32>, y: &mut gpu_sched::Buffer<f32>) {
    let op = t
        .foreign("twice", (x,), (y,))
        .host(|(x,): (&[f32],), (y,): (&mut [f32],)| {
            y.iter_mut().zip(x).for_each(|(y, x)| *y = 2.0 * x);
            Ok(())
        });
    // SAFETY: the device closure queues nothing.
    unsafe { op.run(|_, _, _| Ok(())) }.unwrap();
}

/// Runs each step behind a gate of its own on `t`'s stream, which it
/// opens after the step returned, and names the steps that waited for the
/// gated stream (a step that waits sits there until the gate gives up).
struct Gated<'a> {
    rt: &'a Runtime,
    t: &'a TaskContext,
    waited: Vec<&'static str>,
}

impl<'a> Gated<'a> {
    fn new(rt: &'a Runtime, t: &'a TaskContext) -> Self {
        Gated {
            rt,
            t,
            waited: Vec::new(),
        }
    }

    fn step(&mut self, what: &'static str, call: impl FnOnce()) {
        let g = self.rt.gate().unwrap();
        k::gate(self.t, &g, OPENED_BY_TEST).unwrap();
        call();
        if g.timed_out() {
            self.waited.push(what);
        }
        g.open();
    }
}

/// Every call below returns while the gate ahead of it on the task's
/// stream is still closed: none waits for its stream. Each library is used
/// once before the gate (handles, plans and libraries loaded, which may
/// wait on CUDA), then again behind it; the results are checked after the
/// gate opened.
fn library_calls_behind_a_closed_gate_return_at_once(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut x = t.from_host(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let ident = t.from_host(&[1.0f32, 0.0, 0.0, 1.0]).unwrap();
    let mut c = t.zeros::<f32>(4).unwrap();
    let mut spd = t.from_host(&[4.0f64, 2.0, 2.0, 5.0]).unwrap();
    let a = csr(&t);
    let v = t.from_host(&[1.0f32, 2.0]).unwrap();
    let mut y = t.zeros::<f32>(2).unwrap();
    let impulse = [1.0f32, 0.0, 0.0, 0.0].map(|re| Complex32::new(re, 0.0));
    let sig = t.from_host(&impulse).unwrap();
    let mut spec = t.zeros::<Complex32>(4).unwrap();
    let mut u = t.zeros::<f32>(6).unwrap();
    let mut w = t.zeros::<f32>(4).unwrap();
    // Warm up each library, on scratch buffers.
    {
        let mut s = t.zeros::<f32>(4).unwrap();
        blas::scal(&t, 1.0f32, &mut s).unwrap();
        Gemm::new(2, 2, 2).run(&t, &ident, &ident, &mut s).unwrap();
        let mut m = t.from_host(&[1.0f64]).unwrap();
        Potrf::new(1).run(&t, &mut m).unwrap();
        sparse::spmv(&t, 1.0, &a, &v, 0.0, &mut s.slice_mut(..2).unwrap()).unwrap();
        let mut f = t.zeros::<Complex32>(4).unwrap();
        Plan::new(&[4]).forward(&t, &sig, &mut f).unwrap();
        Rng::new(1).uniform(&t, &mut s).unwrap();
        t.synchronize().unwrap();
    }
    let want_u = {
        let mut r = t.zeros::<f32>(6).unwrap();
        Rng::new(7).uniform(&t, &mut r).unwrap();
        t.to_vec(&r).unwrap()
    };

    // Each call behind a gate of its own, so that one that waits is named.
    let mut gated = Gated::new(rt, &t);
    gated.step("scal", || blas::scal(&t, 2.0f32, &mut x).unwrap());
    gated.step("gemm", || {
        Gemm::new(2, 2, 2).run(&t, &ident, &x, &mut c).unwrap()
    });
    gated.step("potrf", || Potrf::new(2).run(&t, &mut spd).unwrap());
    gated.step("spmv", || {
        sparse::spmv(&t, 1.0, &a, &v, 0.0, &mut y).unwrap()
    });
    gated.step("fft", || {
        Plan::new(&[4]).forward(&t, &sig, &mut spec).unwrap()
    });
    gated.step("rand", || Rng::new(7).uniform(&t, &mut u).unwrap());
    gated.step("foreign", || twice(&t, &x, &mut w));
    let waited = gated.waited;
    // cuRAND waits for the stream at a generation after a new seed or
    // offset, which every fill sets (`gpu_libs::random`'s docs; H100 runs
    // since 2026-12-06): on CUDA the fill may wait, no other call.
    let may_wait: &[&str] = match rt.backend() {
        gpu_sched::BackendKind::Cuda => &["rand"],
        _ => &[],
    };
    assert!(
        waited.iter().all(|w| may_wait.contains(w)),
        "library calls that waited for the gated stream: {waited:?}"
    );

    assert_eq!(t.to_vec(&x).unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!(t.to_vec(&c).unwrap(), [2.0, 4.0, 6.0, 8.0]);
    let l = t.to_vec(&spd).unwrap();
    assert_eq!([l[0], l[1], l[3]], [2.0, 1.0, 2.0], "the Cholesky factor");
    assert_eq!(t.to_vec(&y).unwrap(), [6.0, 5.0]);
    let s = t.to_vec(&spec).unwrap();
    assert!(s.iter().all(|z| *z == Complex32::new(1.0, 0.0)), "{s:?}");
    assert_eq!(t.to_vec(&u).unwrap(), want_u);
    if rt.backend() == gpu_sched::BackendKind::Host {
        assert_eq!(t.to_vec(&w).unwrap(), [4.0, 8.0, 12.0, 16.0]);
    }
}
backend_tests!(library_calls_behind_a_closed_gate_return_at_once);

/// A factorization that fails behind a closed gate: the call returns at
/// once with no error; the task's wait after the gate opened reports it.
fn a_failure_behind_a_gate_is_reported_at_the_next_wait(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    // Leading minors 1 and 1 * 1 - 2 * 2 < 0: the second fails.
    let mut a = t.from_host(&[1.0f64, 2.0, 2.0, 1.0]).unwrap();
    let mut warm = t.from_host(&[1.0f64]).unwrap();
    Potrf::new(1).run(&t, &mut warm).unwrap();
    t.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&t, &g, OPENED_BY_TEST).unwrap();
    Potrf::new(2).run(&t, &mut a).unwrap();
    assert!(!g.timed_out(), "potrf waited for the gated stream");
    assert!(t.has_unchecked_results());
    g.open();
    match t.synchronize() {
        Err(Error::NotPositiveDefinite {
            op: "potrf",
            minor: 2,
        }) => {}
        r => panic!("expected potrf's failure at the wait, got {r:?}"),
    }
    t.synchronize().unwrap();
    assert!(!g.timed_out());
}
backend_tests!(a_failure_behind_a_gate_is_reported_at_the_next_wait);

/// The caller drops what a queued call uses as soon as the call returned
/// (the twin has not run: a gate holds the stream): the buffers' frees are
/// ordered after the operation, so the twin still reads and writes live
/// memory (the host backend's detector sees no use after a free, and a
/// reader of the result on another task gets it).
fn buffers_dropped_at_once_outlive_the_queued_call(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let ident = t.from_host(&[1.0f32, 0.0, 0.0, 1.0]).unwrap();
    let mut s = t.zeros::<f32>(4).unwrap();
    // Each routine used once before the gate: a kernel's first launch may
    // load its module, which waits for the context under lazy loading.
    Gemm::new(2, 2, 2).run(&t, &ident, &ident, &mut s).unwrap();
    blas::scal(&t, 1.0f32, &mut s).unwrap();
    t.synchronize().unwrap();
    let mut c = t.zeros::<f32>(4).unwrap();
    // Made before the gate: a copy from pageable host memory waits for its
    // stream on CUDA (the driver's documented behaviour), so behind the
    // gate it would sit it out whatever the libraries do.
    let a = t.from_host(&[2.0f32, 0.0, 0.0, 2.0]).unwrap();
    let b = t.from_host(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut x = t.from_host(&[1.0f32; 64]).unwrap();
    // Each step behind a gate of its own, so that one that waits is named.
    let mut gated = Gated::new(rt, &t);
    gated.step("gemm", || {
        Gemm::new(2, 2, 2).run(&t, &a, &b, &mut c).unwrap()
    });
    gated.step("scal", || blas::scal(&t, 3.0f32, &mut x).unwrap());
    gated.step("drops", || drop((a, b, x)));
    let waited = gated.waited;
    assert!(
        waited.is_empty(),
        "steps that waited for the gated stream: {waited:?}"
    );
    let r = rt.begin_task().unwrap();
    assert_eq!(r.to_vec(&c).unwrap(), [2.0, 4.0, 6.0, 8.0]);
    t.synchronize().unwrap();
}
backend_tests!(buffers_dropped_at_once_outlive_the_queued_call);

/// Diagnostic of cuRAND on CUDA (issue 36): each raw step of a generation
/// behind a gate of its own (made, bound to the stream, seeded, offset,
/// generating, generating again without a new seed, freed), naming the
/// steps that wait for the gated stream. The library's fill re-seeds a
/// pooled generator at every call; this tells which step waits. On H100
/// runs the generations after a new seed or offset and the free waited
/// (the first generation not always), never the others: asserted, so a
/// cuRAND that waits at more steps shows, and one that waits at fewer is
/// printed.
#[test]
#[ignore = "CUDA only: run on the GPU machine with --ignored"]
fn curand_steps_behind_a_gate() {
    use gpu_sched::cudarc::curand::sys;
    use gpu_sched::raw::RawTask;
    let rt = common::runtime_with(gpu_sched::BackendKind::Cuda, Default::default());
    let t = rt.begin_task().unwrap();
    // cuRAND loaded and its kernels' modules too, by the library's fill.
    let mut u = t.zeros::<f32>(1 << 10).unwrap();
    Rng::new(3).uniform(&t, &mut u).unwrap();
    let p = t.raw_ptr(&mut u).unwrap() as usize as *mut f32;
    t.synchronize().unwrap();
    let ok = |r: sys::curandStatus_t, what: &str| {
        assert_eq!(r, sys::curandStatus_t::CURAND_STATUS_SUCCESS, "{what}")
    };
    let stream = t.cu_stream() as usize as sys::cudaStream_t;
    let mut g: sys::curandGenerator_t = std::ptr::null_mut();
    let mut gated = Gated::new(&rt, &t);
    let philox = sys::curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10;
    let gp: *mut sys::curandGenerator_t = &mut g;
    macro_rules! step {
        ($what:literal, $call:expr) => {
            gated.step($what, || {
                // SAFETY: `g` is the generator the first step made (through
                // `gp`, which points to it), used by this thread only; `p`
                // points to 1024 floats of a live buffer, marked escaped by
                // `raw_ptr`, whose task is waited for at the end.
                let r = unsafe { $call };
                ok(r, $what)
            })
        };
    }
    step!("create", sys::curandCreateGenerator(gp, philox));
    step!("set_stream", sys::curandSetStream(*gp, stream));
    step!("seed", sys::curandSetPseudoRandomGeneratorSeed(*gp, 7));
    step!("offset", sys::curandSetGeneratorOffset(*gp, 0));
    step!("generate", sys::curandGenerateUniform(*gp, p, 1 << 10));
    step!(
        "generate_again",
        sys::curandGenerateUniform(*gp, p, 1 << 10)
    );
    step!("offset_again", sys::curandSetGeneratorOffset(*gp, 4096));
    step!(
        "generate_at_offset",
        sys::curandGenerateUniform(*gp, p, 1 << 10)
    );
    step!("reseed", sys::curandSetPseudoRandomGeneratorSeed(*gp, 9));
    step!(
        "generate_reseeded",
        sys::curandGenerateUniform(*gp, p, 1 << 10)
    );
    step!("destroy", sys::curandDestroyGenerator(*gp));
    t.synchronize().unwrap();
    let waited = gated.waited;
    println!("cuRAND steps that waited for the gated stream: {waited:?}");
    let seen = [
        "generate",
        "generate_at_offset",
        "generate_reseeded",
        "destroy",
    ];
    assert!(
        waited.iter().all(|w| seen.contains(w)),
        "cuRAND steps that waited for the gated stream: {waited:?}"
    );
}
