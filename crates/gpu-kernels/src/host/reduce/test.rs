//! The references of the device reductions: against accurate `f64` sums
//! (compensated, so exact to about one rounding), within the error bound of
//! their order; `min`/`max` exactly; the order itself against a second,
//! independently written emulation of the kernels.

use super::*;
use crate::{REDUCE_PARTS, REDUCE_TILE};

/// The sizes of the issue, and the edges of a part and of the part count.
fn sizes() -> Vec<usize> {
    let tile = REDUCE_TILE as usize;
    vec![
        0,
        1,
        31,
        1000,
        B + 1,
        tile,
        tile + 1,
        REDUCE_PARTS as usize * tile + 1,
        (1 << 20) + 3,
    ]
}

/// A small deterministic generator (xorshift64*), uniform in [0, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-4, 4).
    fn signed(&mut self) -> f64 {
        8.0 * self.next() - 4.0
    }
    /// Positive, of magnitude 10^-3 to 10^3.
    fn varied(&mut self) -> f64 {
        (1.0 + self.next()) * 10f64.powf(6.0 * self.next() - 3.0)
    }
}

/// Neumaier's compensated sum of `terms` (each exact in `f64`), plus the
/// exact rounding errors of `f64` products when asked: about one rounding
/// of the exact result.
fn accurate_sum(terms: impl Iterator<Item = f64>) -> f64 {
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
}

/// The exact product `x * y` as `p + e` (TwoProduct through an FMA).
fn two_product(x: f64, y: f64) -> [f64; 2] {
    let p = x * y;
    [p, x.mul_add(y, -p)]
}

/// Additions in the longest chain of the kernels' order for `n` elements:
/// the per-thread fold, the warp and block trees, then the same for the
/// partials.
fn depth(n: usize) -> f64 {
    let one = |m: usize| (reduce_chunk(m as u64) as usize).div_ceil(B) + 5 + WARPS.ilog2() as usize;
    let parts = reduce_parts(n as u64) as usize;
    let d = one(n) + if parts > 1 { one(parts) } else { 0 };
    d as f64
}

/// `|got - want| <= (depth + 1) * eps * scale`: the first-order bound of
/// the order's rounding errors (one more for the products of a dot).
#[track_caller]
fn assert_close(got: f64, want: f64, n: usize, eps: f64, scale: f64, what: &str) -> f64 {
    let bound = (depth(n) + 1.0) * eps * scale;
    let err = (got - want).abs();
    assert!(
        err <= bound,
        "{what} n={n}: got {got:e}, want {want:e}, error {err:e} > bound {bound:e}"
    );
    if scale > 0.0 {
        err / scale
    } else {
        0.0
    }
}

#[test]
fn sums_and_dots_are_within_the_bound_of_their_order() {
    let mut rng = Rng(0x5eed);
    let mut worst = [0.0_f64; 6];
    for n in sizes() {
        let x64: Vec<f64> = (0..n).map(|_| rng.signed()).collect();
        let y64: Vec<f64> = (0..n).map(|_| rng.signed()).collect();
        let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
        let y32: Vec<f32> = y64.iter().map(|&v| v as f32).collect();
        let abs = |v: &[f64]| v.iter().map(|e| e.abs()).sum::<f64>();
        let wide = |v: &[f32]| v.iter().map(|&e| f64::from(e)).collect::<Vec<_>>();
        let (x32w, y32w) = (wide(&x32), wide(&y32));

        // f64
        let want = accurate_sum(x64.iter().copied());
        worst[0] = worst[0].max(assert_close(
            sum(&x64),
            want,
            n,
            f64::EPSILON,
            abs(&x64),
            "sum f64",
        ));
        let want = accurate_sum(x64.iter().zip(&y64).flat_map(|(&a, &b)| two_product(a, b)));
        let prods: Vec<f64> = x64.iter().zip(&y64).map(|(a, b)| a * b).collect();
        worst[1] = worst[1].max(assert_close(
            dot(&x64, &y64),
            want,
            n,
            f64::EPSILON,
            abs(&prods),
            "dot f64",
        ));

        // f32, accumulated in f32
        let want = accurate_sum(x32w.iter().copied());
        worst[2] = worst[2].max(assert_close(
            f64::from(sum(&x32)),
            want,
            n,
            f64::from(f32::EPSILON),
            abs(&x32w),
            "sum f32",
        ));
        let prods: Vec<f64> = x32w.iter().zip(&y32w).map(|(a, b)| a * b).collect();
        let want = accurate_sum(prods.iter().copied());
        worst[3] = worst[3].max(assert_close(
            f64::from(dot(&x32, &y32)),
            want,
            n,
            f64::from(f32::EPSILON),
            abs(&prods),
            "dot f32",
        ));

        // f32, accumulated in f64
        let want = accurate_sum(x32w.iter().copied());
        worst[4] = worst[4].max(assert_close(
            sum_f64(&x32),
            want,
            n,
            f64::EPSILON,
            abs(&x32w),
            "sum_f64",
        ));
        let want = accurate_sum(prods.iter().copied());
        worst[5] = worst[5].max(assert_close(
            dot_f64(&x32, &y32),
            want,
            n,
            f64::EPSILON,
            abs(&prods),
            "dot_f64",
        ));
    }
    eprintln!(
        "worst |error| / sum|terms|: sum f64 {:.1e}, dot f64 {:.1e}, sum f32 {:.1e}, \
         dot f32 {:.1e}, sum_f64 {:.1e}, dot_f64 {:.1e}",
        worst[0], worst[1], worst[2], worst[3], worst[4], worst[5]
    );
}

/// The case: `f32` input of varied magnitude, 200 000 elements. In
/// `f64` the relative error is far below 1e-12 (0 measured); in `f32` about
/// 1e-8 with this order (a sequential `f32` sum gives about 2e-4).
#[test]
fn f32_input_with_f64_accumulator_is_accurate() {
    let mut rng = Rng(0xacc0);
    let n = 200_000;
    let x: Vec<f32> = (0..n).map(|_| rng.varied() as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.varied() as f32).collect();
    let want_sum = accurate_sum(x.iter().map(|&v| f64::from(v)));
    let want_dot = accurate_sum(x.iter().zip(&y).map(|(&a, &b)| f64::from(a) * f64::from(b)));
    let rel = |got: f64, want: f64| ((got - want) / want).abs();

    let sum64 = rel(sum_f64(&x), want_sum);
    let dot64 = rel(dot_f64(&x, &y), want_dot);
    let sum32 = rel(f64::from(sum(&x)), want_sum);
    let dot32 = rel(f64::from(dot(&x, &y)), want_dot);
    let sequential32 = rel(f64::from(x.iter().sum::<f32>()), want_sum);
    eprintln!(
        "relative error, n = {n}: sum_f64 {sum64:.1e}, dot_f64 {dot64:.1e}, sum f32 {sum32:.1e}, \
         dot f32 {dot32:.1e}, sequential f32 sum {sequential32:.1e}"
    );
    assert!(sum64 < 1e-12 && dot64 < 1e-12, "{sum64:e} {dot64:e}");
    assert!(sum32 < 1e-5 && dot32 < 1e-5, "{sum32:e} {dot32:e}");
}

/// A second emulation of the kernels, written per thread as the CUDA code
/// is (index `begin + t + k * BLOCK`, shuffle-down lanes), agrees bit for
/// bit with the references.
#[test]
fn references_follow_the_kernels_order() {
    fn simulate(x: &[f32]) -> f32 {
        let n = x.len();
        let block = |x: &[f32], n: usize, p: usize| -> f32 {
            let chunk = reduce_chunk(n as u64) as usize;
            let begin = p * chunk;
            let end = (begin + chunk).min(n);
            let mut lane_acc = vec![0.0_f32; B];
            for (t, acc) in lane_acc.iter_mut().enumerate() {
                let mut k = 0;
                while begin + t + k * B < end {
                    *acc += x[begin + t + k * B];
                    k += 1;
                }
            }
            // __shfl_down_sync: lane i reads lane i + offset, or itself
            // when that is past the warp.
            let shuffle = |v: &mut Vec<f32>, first: usize| {
                let mut offset = first;
                while offset > 0 {
                    let old = v.clone();
                    for i in 0..32 {
                        let src = if i + offset < 32 {
                            old[i + offset]
                        } else {
                            old[i]
                        };
                        v[i] = old[i] + src;
                    }
                    offset /= 2;
                }
            };
            let mut warp_acc = [0.0_f32; WARPS];
            for w in 0..WARPS {
                let mut v = lane_acc[w * 32..w * 32 + 32].to_vec();
                shuffle(&mut v, 16);
                warp_acc[w] = v[0];
            }
            let mut v: Vec<f32> = (0..32).map(|lane| warp_acc[lane % WARPS]).collect();
            shuffle(&mut v, WARPS / 2);
            v[0]
        };
        let parts = reduce_parts(n as u64) as usize;
        let partials: Vec<f32> = (0..parts).map(|p| block(x, n, p)).collect();
        if parts == 1 {
            partials[0]
        } else {
            block(&partials, parts, 0)
        }
    }
    let mut rng = Rng(0x0dd);
    for n in sizes() {
        let x: Vec<f32> = (0..n).map(|_| rng.signed() as f32).collect();
        assert_eq!(sum(&x).to_bits(), simulate(&x).to_bits(), "n = {n}");
    }
}

/// Small integers: every partial sum is exact, in any order.
#[test]
fn sums_of_small_integers_are_exact() {
    for n in sizes() {
        let x: Vec<f64> = (0..n).map(|i| (i % 17) as f64 - 8.0).collect();
        let want: f64 = x.iter().sum();
        assert_eq!(sum(&x), want, "n = {n}");
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        assert_eq!(f64::from(sum(&x32)), want, "n = {n}");
        assert_eq!(sum_f64(&x32), want, "n = {n}");
        let ones = vec![1.0_f32; n];
        assert_eq!(f64::from(dot(&x32, &ones)), want, "n = {n}");
        assert_eq!(dot_f64(&x32, &ones), want, "n = {n}");
    }
}

#[test]
fn min_and_max_are_exact_and_skip_nan() {
    let mut rng = Rng(0x313);
    for n in sizes() {
        let mut x: Vec<f64> = (0..n).map(|_| rng.signed()).collect();
        // NaN everywhere but never the extremes.
        for i in (0..n).step_by(7) {
            x[i] = f64::NAN;
        }
        let finite = x.iter().copied().filter(|v| !v.is_nan());
        let want_min = finite.clone().fold(f64::INFINITY, f64::min);
        let want_max = finite.fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(min(&x).to_bits(), want_min.to_bits(), "n = {n}");
        assert_eq!(max(&x).to_bits(), want_max.to_bits(), "n = {n}");
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        assert_eq!(min(&x32), want_min as f32, "n = {n}");
        assert_eq!(max(&x32), want_max as f32, "n = {n}");
    }
}

#[test]
fn identities_for_no_elements_or_only_nan() {
    assert_eq!(sum::<f32>(&[]).to_bits(), 0.0_f32.to_bits());
    assert_eq!(sum::<f64>(&[]).to_bits(), 0.0_f64.to_bits());
    assert_eq!(sum_f64(&[]).to_bits(), 0.0_f64.to_bits());
    assert_eq!(dot::<f64>(&[], &[]).to_bits(), 0.0_f64.to_bits());
    assert_eq!(dot_f64(&[], &[]).to_bits(), 0.0_f64.to_bits());
    assert_eq!(min::<f32>(&[]), f32::INFINITY);
    assert_eq!(max::<f64>(&[]), f64::NEG_INFINITY);
    let nan = vec![f32::NAN; 5000];
    assert_eq!(min(&nan), f32::INFINITY);
    assert_eq!(max(&nan), f32::NEG_INFINITY);
    assert!(sum(&nan).is_nan());
}

/// `-0 < +0` whatever the order, so the result has one sign of zero.
#[test]
fn signed_zeros_are_ordered() {
    for x in [[0.0_f64, -0.0], [-0.0, 0.0]] {
        assert_eq!(min(&x).to_bits(), (-0.0_f64).to_bits());
        assert_eq!(max(&x).to_bits(), 0.0_f64.to_bits());
    }
    let mut x = vec![0.0_f32; 10_000];
    x[7777] = -0.0;
    assert_eq!(min(&x).to_bits(), (-0.0_f32).to_bits());
    assert_eq!(max(&x).to_bits(), 0.0_f32.to_bits());
}

#[test]
fn infinities_propagate_through_sums() {
    let mut x = vec![1.0_f32; 3000];
    x[2999] = f32::INFINITY;
    assert_eq!(sum(&x), f32::INFINITY);
    assert_eq!(max(&x), f32::INFINITY);
    x[0] = f32::NEG_INFINITY;
    assert!(sum(&x).is_nan());
    assert_eq!(min(&x), f32::NEG_INFINITY);
}

#[test]
#[should_panic(expected = "differ in length")]
fn dot_panics_on_length_mismatch() {
    dot(&[1.0_f32, 2.0], &[1.0]);
}

#[test]
fn deterministic() {
    let mut rng = Rng(0xd00d);
    let x: Vec<f32> = (0..(1 << 20) + 3).map(|_| rng.signed() as f32).collect();
    assert_eq!(sum(&x).to_bits(), sum(&x).to_bits());
    assert_eq!(sum_f64(&x).to_bits(), sum_f64(&x).to_bits());
}
