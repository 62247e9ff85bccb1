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
        k::sum(&t, &di, &mut out).unwrap();
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
