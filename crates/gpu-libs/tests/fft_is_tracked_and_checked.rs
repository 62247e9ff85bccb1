//! `gpu_libs::fft` (DESIGN "Numerical libraries and foreign work"): cuFFT on the CUDA backend, `rustfft` on the
//! host backend. Every transform (1D, 2D, 3D; complex, real to complex,
//! complex to real; `f32` and `f64`; batched) matches a naive DFT within
//! stated tolerances, is ordered as a launch (a gated writer before it, a
//! reader on another stream after it), and has its shape checked against
//! the buffers before anything is queued; plans are cached per stream.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, values, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::fft::{self, Complex, Complex32, Plan, Real};
use gpu_sched::{BackendKind, Error, Runtime};
use std::f64::consts::PI;
use std::time::Duration;

/// The element types, with their tolerance: `|got - want| <= TOL * (1 +
/// max |want|)` per element (the error of an FFT grows with the norm of
/// the data, not with each element's size).
trait F: Real + Default + Into<f64> {
    const TOL: f64;
    fn of(x: f64) -> Self;
}
impl F for f32 {
    const TOL: f64 = 2e-5;
    fn of(x: f64) -> Self {
        x as f32
    }
}
impl F for f64 {
    const TOL: f64 = 1e-12;
    fn of(x: f64) -> Self {
        x
    }
}

type C = Complex<f64>;

/// The naive DFT of each of the batch's arrays of shape `dims` (row-major),
/// with `e^(sign 2 pi i ...)`, unnormalized.
fn dft(x: &[C], dims: &[usize], sign: f64) -> Vec<C> {
    let n: usize = dims.iter().product();
    let index = |mut i: usize| {
        let mut idx = vec![0; dims.len()];
        for a in (0..dims.len()).rev() {
            idx[a] = i % dims[a];
            i /= dims[a];
        }
        idx
    };
    let mut out = vec![C::default(); x.len()];
    for (xs, os) in x.chunks(n).zip(out.chunks_mut(n)) {
        for (kk, o) in os.iter_mut().enumerate() {
            let ki = index(kk);
            *o = xs
                .iter()
                .enumerate()
                .map(|(j, &v)| {
                    let ji = index(j);
                    let phase: f64 = (0..dims.len())
                        .map(|a| (ji[a] * ki[a]) as f64 / dims[a] as f64)
                        .sum();
                    v * C::from_polar(1.0, sign * 2.0 * PI * phase)
                })
                .sum();
        }
    }
    out
}

fn close(got: &[C], want: &[C], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = 1.0 + want.iter().map(|w| w.norm()).fold(0.0, f64::max);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).norm() <= tol * scale,
            "{what}: element {i}: {g} != {w}"
        );
    }
}

fn to_t<T: F>(x: &[C]) -> Vec<Complex<T>> {
    x.iter()
        .map(|c| Complex::new(T::of(c.re), T::of(c.im)))
        .collect()
}

fn to_c<T: F>(x: &[Complex<T>]) -> Vec<C> {
    x.iter().map(|c| C::new(c.re.into(), c.im.into())).collect()
}

const SHAPES: &[&[usize]] = &[&[16], &[7], &[5, 6], &[4, 3, 5], &[2, 2, 8]];

/// Complex to complex, each shape, batches of 1 and 3: forward and inverse
/// against the DFT, `inverse(forward(x)) = N x`, in place as out of place.
fn c2c_case<T: F>(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for (s, &dims) in SHAPES.iter().enumerate() {
        for batch in [1, 3] {
            let n: usize = dims.iter().product();
            let re = values(n * batch, 10 + s as u64);
            let im = values(n * batch, 20 + s as u64);
            let x = to_t::<T>(
                &re.iter()
                    .zip(&im)
                    .map(|(&r, &i)| C::new(r, i))
                    .collect::<Vec<_>>(),
            );
            let xc = to_c(&x);
            let what = format!("{dims:?} x {batch}");
            let plan = Plan::new(dims).batch(batch);
            let dx = t.from_host(&x).unwrap();
            let mut dy = t.zeros::<Complex<T>>(n * batch).unwrap();
            plan.forward(&t, &dx, &mut dy).unwrap();
            let want = dft(&xc, dims, -1.0);
            close(&to_c(&t.to_vec(&dy).unwrap()), &want, T::TOL, &what);
            let mut dz = t.zeros::<Complex<T>>(n * batch).unwrap();
            plan.inverse(&t, &dy, &mut dz).unwrap();
            let nx: Vec<C> = xc.iter().map(|v| v * n as f64).collect();
            close(&to_c(&t.to_vec(&dz).unwrap()), &nx, T::TOL, &what);
            plan.inverse(&t, &dx, &mut dz).unwrap();
            let want_inv = dft(&xc, dims, 1.0);
            close(&to_c(&t.to_vec(&dz).unwrap()), &want_inv, T::TOL, &what);
            // In place: the same two transforms in one buffer.
            let mut dw = t.from_host(&x).unwrap();
            plan.forward_in_place(&t, &mut dw).unwrap();
            close(&to_c(&t.to_vec(&dw).unwrap()), &want, T::TOL, &what);
            plan.inverse_in_place(&t, &mut dw).unwrap();
            close(&to_c(&t.to_vec(&dw).unwrap()), &nx, T::TOL, &what);
        }
    }
}

fn complex_transforms_match_the_dft(rt: &Runtime) {
    c2c_case::<f32>(rt);
    c2c_case::<f64>(rt);
}
backend_tests!(complex_transforms_match_the_dft);

const REAL_SHAPES: &[&[usize]] = &[&[16], &[7], &[6, 5], &[3, 4], &[2, 3, 4], &[3, 2, 5]];

/// Real to complex and back, each shape (odd and even last dimensions),
/// batches of 1 and 2: the half spectrum against the DFT's first `n/2 + 1`
/// points along the last axis, `inverse_real(forward_real(x)) = N x`, the
/// input of `inverse_real` kept.
fn real_case<T: F>(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for (s, &dims) in REAL_SHAPES.iter().enumerate() {
        for batch in [1, 2] {
            let n: usize = dims.iter().product();
            let last = dims[dims.len() - 1];
            let h = last / 2 + 1;
            let half = n / last * h;
            let x: Vec<T> = values(n * batch, 30 + s as u64)
                .into_iter()
                .map(T::of)
                .collect();
            let xc: Vec<C> = x.iter().map(|&v| C::new(v.into(), 0.0)).collect();
            let what = format!("{dims:?} x {batch}");
            let full = dft(&xc, dims, -1.0);
            let want: Vec<C> = full
                .chunks(last)
                .flat_map(|line| line[..h].to_vec())
                .collect();
            let plan = Plan::new(dims).batch(batch);
            let dx = t.from_host(&x).unwrap();
            let mut dy = t.zeros::<Complex<T>>(half * batch).unwrap();
            plan.forward_real(&t, &dx, &mut dy).unwrap();
            let y = t.to_vec(&dy).unwrap();
            close(&to_c(&y), &want, T::TOL, &what);
            let mut dz = t.zeros::<T>(n * batch).unwrap();
            plan.inverse_real(&t, &dy, &mut dz).unwrap();
            let z: Vec<C> = t
                .to_vec(&dz)
                .unwrap()
                .into_iter()
                .map(|v| C::new(v.into(), 0.0))
                .collect();
            let nx: Vec<C> = xc.iter().map(|v| v * n as f64).collect();
            close(&z, &nx, T::TOL, &what);
            assert!(
                t.to_vec(&dy).unwrap() == y,
                "{what}: inverse_real changed its input"
            );
            let mut dz2 = t.zeros::<T>(n * batch).unwrap();
            plan.inverse_real_overwriting(&t, &mut dy, &mut dz2)
                .unwrap();
            assert!(t.to_vec(&dz2).unwrap() == t.to_vec(&dz).unwrap(), "{what}");
        }
    }
}

fn real_transforms_match_the_dft(rt: &Runtime) {
    real_case::<f32>(rt);
    real_case::<f64>(rt);
}
backend_tests!(real_transforms_match_the_dft);

/// Views work as operands: a real transform from a view starting at an
/// even element into one half of a split buffer (a real operand at an odd
/// element is refused: cuFFT wants it aligned as its complex type); a
/// batch of 0 queues nothing.
fn views_and_empty_batches(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[9.0f32, 9.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut y = t.from_host(&[Complex32::new(7.0, 7.0); 6]).unwrap();
    {
        let mut hi = y.slice_mut(3..).unwrap();
        let odd = Plan::new(&[4]).forward_real(&t, &x.slice(1..5).unwrap(), &mut hi);
        match odd {
            Err(gpu_sched::Error::Shape { problem, .. }) => {
                assert!(problem.contains("odd element"), "{problem}")
            }
            r => panic!("an odd real view was not refused: {r:?}"),
        }
        Plan::new(&[4])
            .forward_real(&t, &x.slice(2..).unwrap(), &mut hi)
            .unwrap();
    }
    let got = t.to_vec(&y).unwrap();
    assert_eq!(got[..3], [Complex32::new(7.0, 7.0); 3]);
    let want = [
        Complex32::new(10.0, 0.0),
        Complex32::new(-2.0, 2.0),
        Complex32::new(-2.0, 0.0),
    ];
    for (g, w) in got[3..].iter().zip(&want) {
        assert!((g - w).norm() < 1e-5, "{g} != {w}");
    }
    let e = t.zeros::<Complex32>(0).unwrap();
    let mut e2 = t.zeros::<Complex32>(0).unwrap();
    Plan::new(&[8]).batch(0).forward(&t, &e, &mut e2).unwrap();
}
backend_tests!(views_and_empty_batches);

/// A real transform on one task reads a buffer a gated kernel of another
/// task writes, and a third task's inverse reads its output: each waits
/// for the one before, on the device.
fn fft_is_ordered_between_its_writer_and_its_reader(rt: &Runtime) {
    let (rows, cols) = (32, 64);
    let n = rows * cols;
    let h = cols / 2 + 1;
    let plan = Plan::new(&[rows, cols]);
    let w = rt.begin_task().unwrap();
    let mut a = w.zeros::<f32>(n).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::fill(&w, &mut a, 2.0).unwrap();
    let r = rt.begin_task().unwrap();
    let mut c = r.zeros::<Complex32>(rows * h).unwrap();
    let before = rt.counters();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        plan.forward_real(&r, &a, &mut c).unwrap();
    });
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(n).unwrap();
    plan.inverse_real(&u, &c, &mut z).unwrap();
    let got = u.to_vec(&z).unwrap();
    let want = 2.0 * n as f32;
    assert!(
        got.iter().all(|&v| (v - want).abs() <= 1e-3 * want),
        "z[0] = {}",
        got[0]
    );
    let spectrum = r.to_vec(&c).unwrap();
    assert!((spectrum[0].re - want).abs() <= 1e-3 * want);
    assert!(spectrum[1..].iter().all(|v| v.norm() <= 1e-3 * want));
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert!(
        d.device_waits >= 2,
        "the transform and its reader each wait: {d:?}"
    );
}
backend_tests!(fft_is_ordered_between_its_writer_and_its_reader);

fn shape(e: Error, needle: &str) {
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
}

/// Every shape error is refused before anything is queued: the outputs
/// keep their values.
fn bad_shapes_are_refused_before_anything_is_queued(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let seven = Complex32::new(7.0, 7.0);
    let x = t.from_host(&[Complex32::new(1.0, 0.0); 12]).unwrap();
    let mut y = t.from_host(&[seven; 12]).unwrap();
    let r = t.from_host(&[1.0f32; 12]).unwrap();
    let mut ry = t.from_host(&[7.0f32; 12]).unwrap();
    shape(
        Plan::new(&[4, 4]).forward(&t, &x, &mut y).unwrap_err(),
        "the input has 12 elements, 16 expected",
    );
    shape(
        Plan::new(&[4])
            .batch(3)
            .forward(&t, &x, &mut y.slice_mut(..8).unwrap())
            .unwrap_err(),
        "the output has 8 elements, 12 expected (3 transforms of [4])",
    );
    shape(
        Plan::new(&[]).forward(&t, &x, &mut y).unwrap_err(),
        "0 dimensions given, 1 to 3 supported",
    );
    shape(
        Plan::new(&[1, 2, 3, 2])
            .forward(&t, &x, &mut y)
            .unwrap_err(),
        "4 dimensions given",
    );
    shape(
        Plan::new(&[12, 0]).forward(&t, &x, &mut y).unwrap_err(),
        "dimension 1 is 0",
    );
    shape(
        Plan::new(&[usize::MAX / 2, 4])
            .forward(&t, &x, &mut y)
            .unwrap_err(),
        "overflows",
    );
    let e = t.zeros::<Complex32>(0).unwrap();
    let mut e2 = t.zeros::<Complex32>(0).unwrap();
    shape(
        Plan::new(&[3, 1 << 31])
            .batch(0)
            .inverse(&t, &e, &mut e2)
            .unwrap_err(),
        "dimension 1 = 2147483648 does not fit cuFFT's 32-bit int",
    );
    // Real to complex: 12 reals give 2 x (6/2 + 1) = 8 complex numbers.
    shape(
        Plan::new(&[2, 6]).forward_real(&t, &r, &mut y).unwrap_err(),
        "the output has 12 elements, 8 expected",
    );
    shape(
        Plan::new(&[2, 6])
            .inverse_real(&t, &x, &mut ry)
            .unwrap_err(),
        "the input has 12 elements, 8 expected",
    );
    shape(
        Plan::new(&[12])
            .forward_in_place(&t, &mut y.slice_mut(..5).unwrap())
            .unwrap_err(),
        "the input has 5 elements, 12 expected",
    );
    assert_eq!(t.to_vec(&y).unwrap(), [seven; 12]);
    assert_eq!(t.to_vec(&ry).unwrap(), [7.0; 12]);
}
backend_tests!(bad_shapes_are_refused_before_anything_is_queued);

/// A second transform of the same shape on the same stream reuses the
/// first's plan (CUDA; the host backend makes none): many calls of two
/// shapes make two plans, and every plan is idle after.
fn plans_are_cached_per_stream_and_shape(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[Complex32::new(1.0, 0.0); 64]).unwrap();
    let mut y = t.zeros::<Complex32>(64).unwrap();
    let (made0, _) = fft::plan_counts(rt);
    for _ in 0..20 {
        Plan::new(&[64]).forward(&t, &x, &mut y).unwrap();
        Plan::new(&[8, 8]).forward(&t, &x, &mut y).unwrap();
    }
    Plan::new(&[64]).inverse(&t, &x, &mut y).unwrap(); // the same cuFFT plan
    t.synchronize().unwrap();
    let (made, idle) = fft::plan_counts(rt);
    match rt.backend() {
        BackendKind::Cuda => {
            assert_eq!(made - made0, 2, "two shapes, two plans");
            assert!(idle >= 2, "the plans went back: {idle} idle");
        }
        BackendKind::Host => assert_eq!((made, idle), (0, 0)),
    }
}
backend_tests!(plans_are_cached_per_stream_and_shape);

/// A transform is a task's first operation, on buffers another task made:
/// the task binds its stream for it (it once reached for a stream it did
/// not have yet, a panic on the CUDA backend).
fn a_transform_can_be_a_tasks_first_operation(rt: &Runtime) {
    let maker = rt.begin_task().unwrap();
    let x = maker.from_host(&[Complex32::new(1.0, 0.0); 4]).unwrap();
    let mut y = maker.zeros::<Complex32>(4).unwrap();
    drop(maker);
    let t = rt.begin_task().unwrap();
    assert!(!t.has_stream());
    Plan::new(&[4]).forward(&t, &x, &mut y).unwrap();
    let got = t.to_vec(&y).unwrap();
    assert!((got[0] - Complex32::new(4.0, 0.0)).norm() < 1e-6, "{got:?}");
    assert!(got[1..].iter().all(|v| v.norm() < 1e-6), "{got:?}");
}
backend_tests!(a_transform_can_be_a_tasks_first_operation);
