//! `gpu_libs::random` (DESIGN "Numerical libraries and foreign work"): cuRAND on the CUDA backend, ChaCha8 on the
//! host backend. Fills are reproducible (the same seed and offset give the
//! same values, whatever task runs them), distinct seeds and successive
//! fills differ, uniform values lie in `(0, 1]`, the statistics of `10^5`
//! values are within stated tolerances, odd lengths and unaligned views
//! are filled in full and nothing past them, and fills are ordered as
//! launches are.

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::random::{self, Float, Rng};
use gpu_sched::{BackendKind, Error, Runtime};
use std::collections::HashSet;
use std::time::Duration;

trait F: Float + Default + Into<f64> + PartialEq + std::fmt::Debug {
    fn of(x: f64) -> Self;
    fn bits(self) -> u64;
}
impl F for f32 {
    fn of(x: f64) -> Self {
        x as f32
    }
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}
impl F for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
    (m, v)
}

fn draw<T: F>(rt: &Runtime, rng: &mut Rng, n: usize, normal: Option<(f64, f64)>) -> Vec<T> {
    let t = rt.begin_task().unwrap();
    let mut b = t.zeros::<T>(n).unwrap();
    match normal {
        None => rng.uniform(&t, &mut b).unwrap(),
        Some((m, s)) => rng.normal(&t, T::of(m), T::of(s), &mut b).unwrap(),
    }
    t.to_vec(&b).unwrap()
}

/// Uniform values: in `(0, 1]`, mean `1/2` and variance `1/12` within
/// 0.005 and 0.002 for `10^5` values (about 5 standard errors).
fn uniform_case<T: F>(rt: &Runtime) {
    let n = 100_000;
    let x: Vec<f64> = draw::<T>(rt, &mut Rng::new(1), n, None)
        .into_iter()
        .map(Into::into)
        .collect();
    assert!(x.iter().all(|&v| v > 0.0 && v <= 1.0), "outside (0, 1]");
    let (m, v) = mean_var(&x);
    assert!((m - 0.5).abs() < 0.005, "mean {m}");
    assert!((v - 1.0 / 12.0).abs() < 0.002, "variance {v}");
    // Each tenth of (0, 1] holds a tenth of the values, within 5%.
    let mut bins = [0usize; 10];
    for v in &x {
        bins[((v * 10.0).ceil() as usize).clamp(1, 10) - 1] += 1;
    }
    assert!(
        bins.iter().all(|&b| b.abs_diff(n / 10) < n / 200),
        "bins {bins:?}"
    );
}

/// Normal values of mean 3 and deviation 2: mean within 0.03, variance
/// within 0.1 of 4 (about 5 standard errors), 68% within one deviation
/// (within 1%).
fn normal_case<T: F>(rt: &Runtime) {
    let n = 100_000;
    let x: Vec<f64> = draw::<T>(rt, &mut Rng::new(2), n, Some((3.0, 2.0)))
        .into_iter()
        .map(Into::into)
        .collect();
    assert!(x.iter().all(|v| v.is_finite()));
    let (m, v) = mean_var(&x);
    assert!((m - 3.0).abs() < 0.03, "mean {m}");
    assert!((v - 4.0).abs() < 0.1, "variance {v}");
    let within = x.iter().filter(|v| (*v - 3.0).abs() < 2.0).count() as f64 / n as f64;
    assert!(
        (within - 0.6827).abs() < 0.01,
        "{within} within one deviation"
    );
}

fn statistics_are_within_tolerance(rt: &Runtime) {
    uniform_case::<f32>(rt);
    uniform_case::<f64>(rt);
    normal_case::<f32>(rt);
    normal_case::<f64>(rt);
}
backend_tests!(statistics_are_within_tolerance);

/// The same seed and offset give the same values, on any task; other
/// seeds and the next fill give other values; fills of one `Rng` do not
/// overlap (no value of one appears in the next: 64-bit values repeat
/// only where words of the sequence are reused).
fn reproducible_case<T: F>(rt: &Runtime, normal: Option<(f64, f64)>) {
    let n = 4097;
    let mut a = Rng::new(7);
    let first = draw::<T>(rt, &mut a, n, normal);
    assert_eq!(a.offset(), n as u64);
    let second = draw::<T>(rt, &mut a, n, normal);
    assert_eq!(a.offset(), 2 * n as u64);
    assert_eq!(draw::<T>(rt, &mut Rng::new(7), n, normal), first);
    assert_eq!(
        draw::<T>(rt, &mut Rng::new(7).with_offset(n as u64), n, normal),
        second
    );
    assert_ne!(draw::<T>(rt, &mut Rng::new(8), n, normal), first);
    assert_ne!(first, second);
    if std::mem::size_of::<T>() == 8 {
        let seen: HashSet<u64> = first.iter().map(|v| v.bits()).collect();
        let shared = second.iter().filter(|v| seen.contains(&v.bits())).count();
        assert_eq!(shared, 0, "successive fills share values");
    }
    // On the host backend, two fills in a row are one fill of the
    // concatenation (not promised on CUDA: see the module's docs).
    if rt.backend() == BackendKind::Host {
        let mut b = Rng::new(7);
        let one = draw::<T>(rt, &mut b, 2 * n, normal);
        assert_eq!(one[..n], first[..]);
        assert_eq!(one[n..], second[..]);
        let mut c = Rng::new(7);
        let mut parts = Vec::new();
        for len in [1, 2, 3, 100, 7, 2 * n - 113] {
            parts.extend(draw::<T>(rt, &mut c, len, normal));
        }
        assert_eq!(parts, one);
    }
}

fn fills_are_reproducible(rt: &Runtime) {
    for normal in [None, Some((0.0, 1.0))] {
        reproducible_case::<f32>(rt, normal);
        reproducible_case::<f64>(rt, normal);
    }
}
backend_tests!(fills_are_reproducible);

/// Odd lengths and views at odd elements are filled in full and nothing
/// past them: every length from 1 to 9 at offsets 0 to 3 of a guarded
/// buffer, for each kind and type.
fn odd_case<T: F>(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let guard = T::of(-1000.0);
    for normal in [false, true] {
        for len in 1..10 {
            for start in 0..4 {
                let mut b = t.from_host(&[guard; 16]).unwrap();
                let mut rng = Rng::new(len as u64);
                {
                    let mut v = b.slice_mut(start..start + len).unwrap();
                    if normal {
                        rng.normal(&t, T::of(0.0), T::of(1.0), &mut v).unwrap();
                    } else {
                        rng.uniform(&t, &mut v).unwrap();
                    }
                }
                let got = t.to_vec(&b).unwrap();
                let what = format!("normal {normal}, {len} at {start}");
                for (i, g) in got.iter().enumerate() {
                    let inside = (start..start + len).contains(&i);
                    assert_eq!(*g == guard, !inside, "{what}: element {i} = {g:?}");
                }
                let vals: Vec<f64> = got[start..start + len].iter().map(|&v| v.into()).collect();
                assert!(
                    vals.iter().all(|v| v.is_finite() && v.abs() < 10.0),
                    "{what}"
                );
                if !normal {
                    assert!(vals.iter().all(|&v| v > 0.0 && v <= 1.0), "{what}");
                }
            }
        }
    }
}

fn odd_lengths_and_views_are_filled_exactly(rt: &Runtime) {
    odd_case::<f32>(rt);
    odd_case::<f64>(rt);
}
backend_tests!(odd_lengths_and_views_are_filled_exactly);

/// A fill waits for a gated reader of its buffer on another task (the
/// old values are read first), and a reader on a third task waits for
/// the fill.
fn fill_is_ordered_between_a_reader_and_a_reader(rt: &Runtime) {
    let n = 4096;
    let w = rt.begin_task().unwrap();
    let mut a = w.from_host(&vec![5.0f32; n]).unwrap();
    let mut old = w.zeros::<f32>(n).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&w, &g, OPENED_BY_TEST).unwrap();
    k::axpy(&w, 1.0, &a, &mut old).unwrap();
    let r = rt.begin_task().unwrap();
    let before = rt.counters();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            g.open();
        });
        Rng::new(3).uniform(&r, &mut a).unwrap();
    });
    let u = rt.begin_task().unwrap();
    let mut z = u.zeros::<f32>(n).unwrap();
    k::axpy(&u, 2.0, &a, &mut z).unwrap();
    let got = u.to_vec(&z).unwrap();
    assert!(got.iter().all(|&v| v > 0.0 && v <= 2.0), "z = {}", got[0]);
    assert!(w.to_vec(&old).unwrap().iter().all(|&v| v == 5.0));
    assert!(!g.timed_out(), "the gate timed out");
    let d = rt.counters().since(&before);
    assert!(
        d.device_waits >= 2,
        "the fill and its reader each wait: {d:?}"
    );
}
backend_tests!(fill_is_ordered_between_a_reader_and_a_reader);

/// An offset that would overflow is refused before anything is queued;
/// empty fills do nothing and keep the offset; generators are pooled per
/// stream (CUDA: many fills on one task make one).
fn offsets_are_checked_and_generators_pooled(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut b = t.from_host(&[7.0f32; 8]).unwrap();
    let mut far = Rng::new(1).with_offset(u64::MAX - 4);
    let e = far.uniform(&t, &mut b).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(
        e.to_string().contains("overflow the generator's offset"),
        "{e}"
    );
    let mut near = Rng::new(1).with_offset(u64::MAX / 8 - 4);
    assert!(near.normal(&t, 0.0, 1.0, &mut b).is_err());
    assert_eq!(near.offset(), u64::MAX / 8 - 4, "moved on failure");
    assert_eq!(t.to_vec(&b).unwrap(), [7.0; 8]);
    let mut empty = t.zeros::<f64>(0).unwrap();
    let mut rng = Rng::new(5);
    rng.normal(&t, 0.0, 1.0, &mut empty).unwrap();
    assert_eq!(rng.offset(), 0);
    let (made0, _) = random::generator_counts(rt);
    for _ in 0..20 {
        rng.uniform(&t, &mut b).unwrap();
        rng.normal(&t, 0.0f32, 1.0, &mut b).unwrap();
    }
    t.synchronize().unwrap();
    let (made, idle) = random::generator_counts(rt);
    match rt.backend() {
        BackendKind::Cuda => {
            assert!(
                made - made0 <= 1,
                "{} generators for one stream",
                made - made0
            );
            assert!(idle >= 1);
        }
        BackendKind::Host => assert_eq!((made, idle), (0, 0)),
    }
}
backend_tests!(offsets_are_checked_and_generators_pooled);
