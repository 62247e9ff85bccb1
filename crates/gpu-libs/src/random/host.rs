//! The host backend's fills: ChaCha8 seeded from the seed
//! (`seed_from_u64`), each value `v` of the sequence drawn from the 64
//! bits at words `2v, 2v + 1`, so a fill at any offset is a seek
//! (`set_word_pos`) and fills in a row equal one long fill.

use super::sealed::Sealed;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `seed`'s generator at value `v` of its sequence.
fn at(seed: u64, v: u64) -> ChaCha8Rng {
    let mut g = ChaCha8Rng::seed_from_u64(seed);
    g.set_word_pos(2 * u128::from(v));
    g
}

/// Values `offset ..` of `seed`'s uniform sequence, in `(0, 1]`.
pub(super) fn uniform<T: Sealed>(seed: u64, offset: u64, y: &mut [T]) {
    let mut g = at(seed, offset);
    for v in y {
        *v = T::unit(g.next_u64());
    }
}

/// Values `offset ..` of `seed`'s normal sequence: values `2p` and `2p +
/// 1` are the Box-Muller pair of the uniforms `2p` and `2p + 1` (in `(0,
/// 1]`, so the logarithm is finite), scaled by `std` and moved by `mean`.
pub(super) fn normal<T: Sealed>(seed: u64, offset: u64, mean: T, std: T, y: &mut [T]) {
    let (mean, std) = (mean.to_f64(), std.to_f64());
    let mut g = at(seed, offset & !1);
    let mut v = offset & !1;
    let mut out = y.iter_mut();
    loop {
        let u1 = f64::unit(g.next_u64());
        let u2 = f64::unit(g.next_u64());
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        for z in [r * c, r * s] {
            if v >= offset {
                match out.next() {
                    Some(x) => *x = T::from_f64(mean + std * z),
                    None => return,
                }
            }
            v += 1;
        }
    }
}
