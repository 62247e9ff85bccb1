//! Every `gpu_kernels` wrapper, `f32` and `f64`, against the plain-Rust
//! references in `gpu_kernels::host`, on random data of sizes that are not
//! multiples of the block size, on both backends.
//!
//! Element-wise kernels round exactly as the references do, so results are
//! compared bit for bit. `sum` and the scan add in another order on the
//! device; they get small integers, whose partial sums are exact.

mod common;

use common::backend_tests;
use gpu_kernels::{self as k, host};
use gpu_sched::{Runtime, TaskContext};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ops::{Add, Mul};
use std::time::Duration;

/// 0 and 1, around one block (256), around one scan tile (1024), and large.
const SIZES: [usize; 7] = [0, 1, 255, 257, 1023, 1025, 100_003];

/// An element type with kernels and the references' arithmetic.
trait Elem: k::Float + Add<Output = Self> + Mul<Output = Self> + From<i8> {
    fn from_f64(v: f64) -> Self;
    fn bits(self) -> u64;
}

impl Elem for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Elem for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

fn random<T: Elem>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| T::from_f64(rng.gen_range(-4.0..4.0)))
        .collect()
}

fn small_ints<T: Elem>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from(rng.gen_range(-8i8..=8))).collect()
}

/// Bit-for-bit equality, reporting the first difference.
#[track_caller]
fn assert_same<T: Elem>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        panic!(
            "{what}: element {i} of {} is {:?}, the reference gives {:?}",
            got.len(),
            got[i],
            want[i]
        );
    }
}

/// Runs `op` on a device copy of `start` and compares with `reference` on a
/// host copy.
#[track_caller]
fn check_in_place<T: Elem>(
    t: &TaskContext,
    start: &[T],
    what: &str,
    op: impl FnOnce(&mut gpu_sched::Buffer<T>),
    reference: impl FnOnce(&mut [T]),
) {
    let mut d = t.from_host(start).unwrap();
    op(&mut d);
    let mut want = start.to_vec();
    reference(&mut want);
    assert_same(&t.to_vec(&d).unwrap(), &want, what);
}

fn wrappers<T: Elem>(rt: &Runtime, seed: u64) {
    let t = rt.begin_task().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let ty = std::any::type_name::<T>();
    for n in SIZES {
        let x = random::<T>(&mut rng, n);
        let y = random::<T>(&mut rng, n);
        let v = T::from_f64(rng.gen_range(-2.0..2.0));

        check_in_place(
            &t,
            &y,
            &format!("fill {ty} n={n}"),
            |d| k::fill(&t, d, v).unwrap(),
            |h| host::fill(h, v),
        );
        check_in_place(
            &t,
            &y,
            &format!("add_scalar {ty} n={n}"),
            |d| k::add_scalar(&t, d, v).unwrap(),
            |h| host::add_scalar(h, v),
        );
        check_in_place(
            &t,
            &y,
            &format!("scale {ty} n={n}"),
            |d| k::scale(&t, d, v).unwrap(),
            |h| host::scale(h, v),
        );

        let dx = t.from_host(&x).unwrap();
        check_in_place(
            &t,
            &y,
            &format!("axpy {ty} n={n}"),
            |d| k::axpy(&t, v, &dx, d).unwrap(),
            |h| host::axpy(v, &x, h),
        );
        check_in_place(
            &t,
            &y,
            &format!("copy {ty} n={n}"),
            |d| k::copy(&t, &dx, d).unwrap(),
            |h| host::copy(&x, h),
        );
        check_in_place(
            &t,
            &y,
            &format!("scale_into {ty} n={n}"),
            |d| k::scale_into(&t, &dx, d, v).unwrap(),
            |h| host::scale_into(&x, h, v),
        );

        // Small integers: every partial sum is exact in any order.
        let ints = small_ints::<T>(&mut rng, n);
        let di = t.from_host(&ints).unwrap();
        // `sum` zeroes its output first: start from garbage.
        let mut out = t.from_host(&[T::from(99)]).unwrap();
        k::sum_atomic_into(&t, &di, &mut out).unwrap();
        assert_same(
            &t.to_vec(&out).unwrap(),
            &[host::sum(&ints)],
            &format!("sum {ty} n={n}"),
        );
        let mut scanned = t.from_host(&y).unwrap();
        k::inclusive_scan(&t, &di, &mut scanned).unwrap();
        let mut want = vec![T::default(); n];
        host::inclusive_scan(&ints, &mut want);
        assert_same(
            &t.to_vec(&scanned).unwrap(),
            &want,
            &format!("inclusive_scan {ty} n={n}"),
        );
        // The inputs were only read.
        assert_same(
            &t.to_vec(&di).unwrap(),
            &ints,
            &format!("scan input {ty} n={n}"),
        );
        assert_same(
            &t.to_vec(&dx).unwrap(),
            &x,
            &format!("axpy/copy/scale_into input {ty} n={n}"),
        );
    }
}

fn wrappers_f32(rt: &Runtime) {
    wrappers::<f32>(rt, 0x5eed_0032);
}
backend_tests!(wrappers_f32);

fn wrappers_f64(rt: &Runtime) {
    wrappers::<f64>(rt, 0x5eed_0064);
}
backend_tests!(wrappers_f64);

/// `scale_into` with `x` and `y` of different lengths: the typed error of
/// the other two-buffer wrappers, and nothing written.
fn scale_into_length_mismatch(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[1.0f32; 3]).unwrap();
    let mut y = t.from_host(&[2.0f32; 4]).unwrap();
    let e = k::scale_into(&t, &x, &mut y, 2.0).unwrap_err();
    assert!(
        matches!(
            e,
            gpu_sched::Error::LengthMismatch {
                what: "scale_into's x",
                expected: 4,
                got: 3
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    for part in ["scale_into's x", "3 elements", "4 expected"] {
        assert!(
            msg.contains(part),
            "the message {msg:?} does not say {part:?}"
        );
    }
    assert_eq!(t.to_vec(&y).unwrap(), [2.0; 4], "the failed call wrote y");
}
backend_tests!(scale_into_length_mismatch);

/// `spin`, `spin_touch` and `gate`: the timed kernels finish and
/// `spin_touch` adds one; a gate opened before it is reached passes without
/// timing out, a closed one times out and sets its flag.
fn timed_kernels(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    k::spin(&t, Duration::from_micros(200)).unwrap();
    t.synchronize().unwrap();

    let mut rng = StdRng::seed_from_u64(7);
    for n in [1, 257, 100_003] {
        let start = random::<f32>(&mut rng, n);
        check_in_place(
            &t,
            &start,
            &format!("spin_touch n={n}"),
            |d| k::spin_touch(&t, d, Duration::from_micros(100)).unwrap(),
            |h| host::add_scalar(h, 1.0),
        );
    }

    let open = rt.gate().unwrap();
    open.open();
    k::gate(&t, &open, Duration::from_secs(20)).unwrap();
    t.synchronize().unwrap();
    assert!(open.is_open() && !open.timed_out(), "{open:?}");

    let closed = rt.gate().unwrap();
    k::gate(&t, &closed, Duration::from_millis(1)).unwrap();
    t.synchronize().unwrap();
    assert!(!closed.is_open() && closed.timed_out(), "{closed:?}");
}
backend_tests!(timed_kernels);

/// The sizes of the deterministic reductions' tests: none, one, less than a
/// warp, less than a part, and many parts.
const REDUCE_SIZES: [usize; 5] = [0, 1, 31, 1000, (1 << 20) + 3];

/// `sum`, `min`, `max` and `dot` of `reduce`, as host values and as device
/// scalars: bit for bit the references of `host::reduce` (which follow the
/// kernels' order), the same on a second run, and close to an `f64` sum.
fn reductions<T: Elem + host::reduce::Real>(rt: &Runtime, seed: u64)
where
    f64: From<T>,
{
    use k::reduce as r;
    let t = rt.begin_task().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let ty = std::any::type_name::<T>();
    for n in REDUCE_SIZES {
        let mut x = random::<T>(&mut rng, n);
        let y = random::<T>(&mut rng, n);
        // Some NaN, which min and max skip (never the extremes).
        let mut xn = x.clone();
        for i in (3..n).step_by(101) {
            xn[i] = T::from_f64(f64::NAN);
        }
        if n > 0 {
            x[n / 2] = T::from_f64(-0.0);
        }
        let (dx, dy, dxn) = (
            t.from_host(&x).unwrap(),
            t.from_host(&y).unwrap(),
            t.from_host(&xn).unwrap(),
        );
        let what = |op: &str| format!("{op} {ty} n={n}");
        let cases: [(&str, T, T); 4] = [
            ("sum", r::sum(&t, &dx).unwrap(), host::reduce::sum(&x)),
            ("min", r::min(&t, &dxn).unwrap(), host::reduce::min(&xn)),
            ("max", r::max(&t, &dxn).unwrap(), host::reduce::max(&xn)),
            (
                "dot",
                r::dot(&t, &dx, &dy).unwrap(),
                host::reduce::dot(&x, &y),
            ),
        ];
        for (op, got, want) in cases {
            assert_same(&[got], &[want], &what(op));
        }
        // The same again, into device scalars (starting from garbage).
        let mut out = t.from_host(&[T::from(99); 4]).unwrap();
        {
            let mut split = out.split_chunks(1).unwrap();
            let mut v = split.views();
            r::sum_into(&t, &dx, &mut v[0]).unwrap();
            r::min_into(&t, &dxn, &mut v[1]).unwrap();
            r::max_into(&t, &dxn, &mut v[2]).unwrap();
            r::dot_into(&t, &dx, &dy, &mut v[3]).unwrap();
            drop(v);
            t.rejoin(split).unwrap();
        }
        let again: Vec<T> = cases.iter().map(|c| c.1).collect();
        assert_same(&t.to_vec(&out).unwrap(), &again, &what("second run"));

        // Close to the exact result (the references' own tests bound it).
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let scale: f64 = x.iter().map(|&v| f64::from(v).abs()).sum::<f64>() + 1.0;
        let got = f64::from(cases[0].1);
        assert!(
            (got - exact).abs() <= 1e-5 * scale,
            "{}",
            what("sum accuracy")
        );
        // NaN skipped, and so the same as without them unless an extreme
        // was replaced.
        assert!(!f64::from(cases[1].1).is_nan() && !f64::from(cases[2].1).is_nan());
        if n == 0 {
            assert_eq!(f64::from(cases[1].1), f64::INFINITY);
            assert_eq!(f64::from(cases[2].1), f64::NEG_INFINITY);
            assert_eq!(T::bits(cases[0].1), 0);
            assert_eq!(T::bits(cases[3].1), 0);
        }
    }
}

fn reductions_f32(rt: &Runtime) {
    reductions::<f32>(rt, 0x5eed_1432);
}
backend_tests!(reductions_f32);

fn reductions_f64(rt: &Runtime) {
    reductions::<f64>(rt, 0x5eed_1464);
}
backend_tests!(reductions_f64);

/// `f32` input with an `f64` accumulator: bit for bit the references, and a
/// relative error below 1e-12 on 200 000 elements of magnitudes 1e-3 to 1e3
/// (the issue measured 1.6e-5 for an `f32` accumulator).
fn reductions_f32_in_f64(rt: &Runtime) {
    use k::reduce as r;
    let t = rt.begin_task().unwrap();
    let mut rng = StdRng::seed_from_u64(0xacc_f64);
    let mut varied = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (rng.gen_range(1.0..2.0) * 10f64.powf(rng.gen_range(-3.0..3.0))) as f32)
            .collect()
    };
    for n in REDUCE_SIZES.into_iter().chain([200_000]) {
        let (x, y) = (varied(n), varied(n));
        let (dx, dy) = (t.from_host(&x).unwrap(), t.from_host(&y).unwrap());
        let s = r::sum_f64(&t, &dx).unwrap();
        let d = r::dot_f64(&t, &dx, &dy).unwrap();
        assert_same(
            &[s],
            &[host::reduce::sum_f64(&x)],
            &format!("sum_f64 n={n}"),
        );
        assert_same(
            &[d],
            &[host::reduce::dot_f64(&x, &y)],
            &format!("dot_f64 n={n}"),
        );
        let mut out = t.alloc::<f64>(1).unwrap();
        r::sum_f64_into(&t, &dx, &mut out).unwrap();
        assert_same(
            &t.to_vec(&out).unwrap(),
            &[s],
            &format!("sum_f64_into n={n}"),
        );
        r::dot_f64_into(&t, &dx, &dy, &mut out).unwrap();
        assert_same(
            &t.to_vec(&out).unwrap(),
            &[d],
            &format!("dot_f64_into n={n}"),
        );

        // Against a compensated f64 sum.
        let neumaier = |terms: &mut dyn Iterator<Item = f64>| {
            let (mut s, mut c) = (0.0_f64, 0.0_f64);
            for v in terms {
                let t = s + v;
                c += if s.abs() >= v.abs() {
                    (s - t) + v
                } else {
                    (v - t) + s
                };
                s = t;
            }
            s + c
        };
        let want_s = neumaier(&mut x.iter().map(|&v| f64::from(v)));
        let want_d = neumaier(&mut x.iter().zip(&y).map(|(&a, &b)| f64::from(a) * f64::from(b)));
        if n > 0 {
            let (es, ed) = (((s - want_s) / want_s).abs(), ((d - want_d) / want_d).abs());
            assert!(
                es < 1e-12 && ed < 1e-12,
                "n={n}: relative errors {es:e}, {ed:e}"
            );
        } else {
            assert_eq!((s.to_bits(), d.to_bits()), (0, 0));
        }
    }
}
backend_tests!(reductions_f32_in_f64);

/// A device scalar feeds the next kernel on the stream without a host round
/// trip; the wrappers' length errors come before anything is submitted.
fn reduction_chaining_and_errors(rt: &Runtime) {
    use k::reduce as r;
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[3.0f32, -1.0, 2.0]).unwrap();
    let mut d = t.alloc::<f32>(1).unwrap();
    r::dot_into(&t, &x, &x, &mut d).unwrap(); // 14, on the device
    let mut e = t.alloc::<f32>(1).unwrap();
    r::max_into(&t, &d, &mut e).unwrap();
    assert_eq!(r::sum(&t, &e).unwrap(), 14.0);

    let short = t.from_host(&[1.0f32; 2]).unwrap();
    let err = r::dot(&t, &x, &short).unwrap_err();
    assert!(
        matches!(
            err,
            gpu_sched::Error::LengthMismatch {
                what: "dot's y",
                expected: 3,
                got: 2
            }
        ),
        "{err:?}"
    );
    let mut wide = t.from_host(&[7.0f32; 2]).unwrap();
    let err = r::sum_into(&t, &x, &mut wide).unwrap_err();
    assert!(
        matches!(
            err,
            gpu_sched::Error::LengthMismatch {
                what: "sum's output",
                expected: 1,
                got: 2
            }
        ),
        "{err:?}"
    );
    assert_eq!(t.to_vec(&wide).unwrap(), [7.0; 2], "the failed call wrote");
    let mut wide64 = t.alloc::<f64>(2).unwrap();
    assert!(r::dot_f64_into(&t, &x, &x, &mut wide64).is_err());
    assert!(r::sum_f64_into(&t, &x, &mut wide64).is_err());
    assert!(r::min_into(&t, &x, &mut wide).is_err());
    assert!(r::max_into(&t, &x, &mut wide).is_err());
    assert!(r::dot_into(&t, &x, &x, &mut wide).is_err());
}
backend_tests!(reduction_chaining_and_errors);

/// Element-wise kernels from expressions (`gpu_kernels::Elementwise`):
/// on CUDA compiled by NVRTC, on the host run by the expression's
/// program; each against the same expression in Rust, on random data of
/// every size above. Exact bodies bit for bit; those calling CUDA's
/// transcendental functions within a few units in the last place.
fn elementwise_kernels(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut rng = StdRng::seed_from_u64(17);
    type F = fn(f32, f32, f32) -> f32;
    let cases: [(&str, F, bool); 5] = [
        ("z = a * x + z", |x, _, z| 2.5 * x + z, true),
        (
            "d = x - y; z = d > 0 ? sqrt(d) : fma(d, d, -z) / 3",
            |x, y, z| {
                let d = x - y;
                if d > 0.0 {
                    d.sqrt()
                } else {
                    d.mul_add(d, -z) / 3.0
                }
            },
            true,
        ),
        (
            "z = min(max(x, -1), 1) + floor(y) * (x < y) - abs(z)",
            |x, y, z| x.clamp(-1.0, 1.0) + y.floor() * f32::from(x < y) - z.abs(),
            true,
        ),
        (
            "z = exp(x / 4) - log(abs(y) + 1)",
            |x, y, _| (x / 4.0).exp() - (y.abs() + 1.0).ln(),
            false,
        ),
        (
            "z = tanh(x) * sin(y) + cos(z)",
            |x, y, z| x.tanh() * y.sin() + z.cos(),
            false,
        ),
    ];
    for (body, f, exact) in cases {
        let k = k::Elementwise::<f32>::new("ew", &["x", "y"], &["a"], &["z"], body).unwrap();
        assert_eq!(k.is_exact(), exact, "{body}");
        for n in SIZES {
            let gen = |rng: &mut StdRng| {
                (0..n)
                    .map(|_| rng.gen_range(-8.0f32..8.0))
                    .collect::<Vec<_>>()
            };
            let (x, y, z0) = (gen(&mut rng), gen(&mut rng), gen(&mut rng));
            let (bx, by) = (t.from_host(&x).unwrap(), t.from_host(&y).unwrap());
            let mut bz = t.from_host(&z0).unwrap();
            k.run(&t, &[&bx, &by], &[2.5], &mut [&mut bz]).unwrap();
            let got = t.to_vec(&bz).unwrap();
            for i in 0..n {
                let want = f(x[i], y[i], z0[i]);
                if exact {
                    assert_eq!(
                        got[i].to_bits(),
                        want.to_bits(),
                        "{body}, n {n}, at {i}: {} vs {want}",
                        got[i]
                    );
                } else {
                    let tol = 4.0 * f32::EPSILON * want.abs().max(1.0);
                    assert!(
                        (got[i] - want).abs() <= tol,
                        "{body}, n {n}, at {i}: {} vs {want}",
                        got[i]
                    );
                }
            }
        }
    }
    // f64, and a kernel of the most parameters: 4 inputs, 3 outputs, 4
    // scalars.
    let k = k::Elementwise::<f64>::new(
        "wide",
        &["p", "q", "r", "s"],
        &["a", "b", "c", "d"],
        &["u", "v", "w"],
        "u = a * p + b * q; v = c * r - d * s; w = u * v",
    )
    .unwrap();
    let n = 1000;
    let ins: Vec<Vec<f64>> = (0..4)
        .map(|j| (0..n).map(|i| (i * (j + 1)) as f64 * 0.1).collect())
        .collect();
    let bufs: Vec<_> = ins.iter().map(|v| t.from_host(v).unwrap()).collect();
    let (mut u, mut v, mut w) = (
        t.zeros::<f64>(n).unwrap(),
        t.zeros::<f64>(n).unwrap(),
        t.zeros::<f64>(n).unwrap(),
    );
    k.run(
        &t,
        &[&bufs[0], &bufs[1], &bufs[2], &bufs[3]],
        &[1.0, 2.0, 3.0, 4.0],
        &mut [&mut u, &mut v, &mut w],
    )
    .unwrap();
    let (u, v, w) = (
        t.to_vec(&u).unwrap(),
        t.to_vec(&v).unwrap(),
        t.to_vec(&w).unwrap(),
    );
    for i in 0..n {
        let (eu, ev) = (
            ins[0][i] + 2.0 * ins[1][i],
            3.0 * ins[2][i] - 4.0 * ins[3][i],
        );
        assert_eq!((u[i], v[i], w[i]), (eu, ev, eu * ev), "at {i}");
    }
}
backend_tests!(elementwise_kernels);

/// The diagonal helpers (`gpu_kernels::diag`), `f32` and `f64`, against
/// the host: the identity, a diagonal set, read back and shifted, the
/// other elements untouched; shapes that are not square refused.
fn diagonal_helpers(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    for n in [1usize, 3, 257] {
        let mut a = t.from_host(&vec![5.0f64; n * n]).unwrap();
        k::identity(&t, &mut a).unwrap();
        let got = t.to_vec(&a).unwrap();
        for (idx, v) in got.iter().enumerate() {
            assert_eq!(*v, if idx % (n + 1) == 0 { 1.0 } else { 0.0 }, "I at {idx}");
        }
        let d: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
        let bd = t.from_host(&d).unwrap();
        let mut m = t.from_host(&vec![-1.0f32; n * n]).unwrap();
        k::set_diagonal(&t, &mut m, &bd).unwrap();
        k::add_diagonal(&t, &mut m, 2.0).unwrap();
        let mut back = t.zeros::<f32>(n).unwrap();
        k::diagonal(&t, &m, &mut back).unwrap();
        assert_eq!(
            t.to_vec(&back).unwrap(),
            d.iter().map(|v| v + 2.0).collect::<Vec<_>>()
        );
        let all = t.to_vec(&m).unwrap();
        let off = all.iter().enumerate().filter(|(idx, _)| idx % (n + 1) != 0);
        assert!(
            off.map(|(_, v)| *v).all(|v| v == -1.0),
            "off the diagonal, n {n}"
        );
    }
    let mut not_square = t.zeros::<f64>(6).unwrap();
    assert!(matches!(
        k::identity(&t, &mut not_square),
        Err(gpu_sched::Error::Shape { .. })
    ));
    let d = t.zeros::<f64>(3).unwrap();
    assert!(matches!(
        k::set_diagonal(&t, &mut not_square, &d),
        Err(gpu_sched::Error::Shape { .. })
    ));
}
backend_tests!(diagonal_helpers);
