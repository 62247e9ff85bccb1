//! Tests: the host references (fills, scans, reductions) on sizes around the
//! block and tile edges.

use super::*;
use crate::{scan_tiles, BLOCK, SCAN_TILE};

/// Sizes around the block and tile edges, and one spanning several tiles.
fn sizes() -> Vec<usize> {
    let block = BLOCK as usize;
    let tile = SCAN_TILE as usize;
    vec![
        0,
        1,
        2,
        31,
        block - 1,
        block,
        block + 1,
        tile - 1,
        tile,
        tile + 1,
        3 * tile + 17,
    ]
}

/// Small integers as `f64`, so every partial sum is exact.
fn ramp(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i % 7) as f64 - 2.0).collect()
}

#[test]
fn fill_sets_every_element() {
    for n in sizes() {
        let mut x = vec![0.5_f32; n];
        fill(&mut x, -3.25);
        assert!(x.iter().all(|&e| e == -3.25), "n = {n}");
    }
}

#[test]
fn add_scalar_adds_to_every_element() {
    for n in sizes() {
        let mut x = ramp(n);
        add_scalar(&mut x, 0.5);
        let expected: Vec<f64> = ramp(n).iter().map(|e| e + 0.5).collect();
        assert_eq!(x, expected, "n = {n}");
    }
}

#[test]
fn scale_multiplies_every_element() {
    for n in sizes() {
        let mut x: Vec<i64> = (0..n as i64).collect();
        scale(&mut x, -3);
        let expected: Vec<i64> = (0..n as i64).map(|e| -3 * e).collect();
        assert_eq!(x, expected, "n = {n}");
    }
}

#[test]
fn scale_into_writes_the_scaled_input() {
    for n in sizes() {
        let x: Vec<i64> = (0..n as i64).collect();
        let mut y = vec![7_i64; n];
        scale_into(&x, &mut y, -3);
        let expected: Vec<i64> = (0..n as i64).map(|e| -3 * e).collect();
        assert_eq!(y, expected, "n = {n}");

        // Bit for bit what scale does in place.
        let x = ramp(n).iter().map(|e| e / 3.0).collect::<Vec<_>>();
        let mut y = vec![f64::NAN; n];
        scale_into(&x, &mut y, 0.7);
        let mut in_place = x.clone();
        scale(&mut in_place, 0.7);
        assert_eq!(y, in_place, "n = {n}");
    }
}

#[test]
#[should_panic(expected = "differ in length")]
fn scale_into_panics_on_length_mismatch() {
    scale_into(&[1.0_f32, 2.0], &mut [0.0], 2.0);
}

#[test]
fn axpy_rounds_product_then_sum() {
    // 1 + 2^-24 is not representable in f32; with one rounding (an FMA) the
    // result would differ from two roundings.
    let a = 1.0 + f32::EPSILON;
    let x = [1.0 - f32::EPSILON / 2.0];
    let mut y = [-1.0_f32];
    axpy(a, &x, &mut y);
    assert_eq!(y[0], -1.0 + (a * x[0]));
    assert_ne!(y[0], a.mul_add(x[0], -1.0));

    for n in sizes() {
        let x = ramp(n);
        let mut y = vec![1.5; n];
        axpy(2.0, &x, &mut y);
        let expected: Vec<f64> = x.iter().map(|e| 1.5 + 2.0 * e).collect();
        assert_eq!(y, expected, "n = {n}");
    }
}

#[test]
#[should_panic(expected = "differ in length")]
fn axpy_panics_on_length_mismatch() {
    axpy(1.0_f32, &[1.0, 2.0], &mut [0.0]);
}

#[test]
fn copy_copies() {
    for n in sizes() {
        let src = ramp(n);
        let mut dst = vec![9.0; n];
        copy(&src, &mut dst);
        assert_eq!(dst, src, "n = {n}");
    }
}

#[test]
#[should_panic(expected = "differ in length")]
fn copy_panics_on_length_mismatch() {
    copy(&[1_u8], &mut []);
}

#[test]
fn sum_adds_everything() {
    for n in sizes() {
        let x: Vec<f64> = (1..=n).map(|i| i as f64).collect();
        assert_eq!(sum(&x), (n * (n + 1) / 2) as f64, "n = {n}");
        let ints: Vec<u64> = (1..=n as u64).collect();
        assert_eq!(sum(&ints), (n * (n + 1) / 2) as u64, "n = {n}");
    }
}

#[test]
fn sum_of_nothing_is_positive_zero() {
    let s = sum::<f32>(&[]);
    assert_eq!(s.to_bits(), 0.0_f32.to_bits());
}

#[test]
fn inclusive_scan_gives_prefix_sums() {
    for n in sizes() {
        let src = ramp(n);
        let mut dst = vec![f64::NAN; n];
        inclusive_scan(&src, &mut dst);
        for i in 0..n {
            assert_eq!(dst[i], sum(&src[..=i]), "n = {n}, i = {i}");
        }
        let mut in_place = src.clone();
        inclusive_scan_in_place(&mut in_place);
        assert_eq!(in_place, dst, "n = {n}");
    }
}

#[test]
fn inclusive_scan_of_ones_counts() {
    let n = 3 * SCAN_TILE as usize + 5;
    let mut dst = vec![0_u32; n];
    inclusive_scan(&vec![1_u32; n], &mut dst);
    assert!(dst.iter().enumerate().all(|(i, &e)| e as usize == i + 1));
}

#[test]
#[should_panic(expected = "differ in length")]
fn inclusive_scan_panics_on_length_mismatch() {
    inclusive_scan(&[1.0_f64], &mut [0.0, 0.0]);
}

/// The three-launch scan of the kernels (tile scans, exclusive scan of the
/// tile totals, add), written out on the host, gives the reference result.
#[test]
fn three_step_scan_contract_matches_reference() {
    let tile = SCAN_TILE as usize;
    for n in sizes() {
        let src: Vec<i64> = (0..n as i64).map(|i| i % 11 - 5).collect();
        let tiles = scan_tiles(n as u64) as usize;
        let mut out = vec![0_i64; n];
        let mut block_sums = vec![0_i64; tiles];
        // scan_block
        for (t, total) in block_sums.iter_mut().enumerate() {
            let range = t * tile..n.min((t + 1) * tile);
            inclusive_scan(&src[range.clone()], &mut out[range.clone()]);
            *total = out[range.end - 1];
        }
        // scan_sums: exclusive, in place
        let mut carry = 0;
        for s in &mut block_sums {
            let total = *s;
            *s = carry;
            carry += total;
        }
        // scan_add
        for (i, o) in out.iter_mut().enumerate() {
            if i / tile > 0 {
                *o += block_sums[i / tile];
            }
        }
        let mut expected = vec![0; n];
        inclusive_scan(&src, &mut expected);
        assert_eq!(out, expected, "n = {n}");
    }
}
