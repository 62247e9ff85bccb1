//! What the examples share: the heat step that `05-stencil`, `07-own-kernel`
//! and `09-multi-gpu-heat` run ([`heat`]: a 5-point stencil in CUDA C with a
//! host twin and a safe wrapper around its launch) and its row-slab form
//! for several devices ([`heat_parts`]), and the tiled Cholesky of
//! `11-cholesky` and B15 ([`cholesky`]), and the Poisson matrix of
//! `12-cg-sparse` and B16 ([`poisson`]) and its CG step ([`cg`]), and the measurement of
//! `02-siblings` and B5-cold ([`siblings`]), and a fixed generator of test data
//! ([`uniform`]). Examples use them as `common::heat`.

pub mod cg;
pub mod cholesky;
pub mod cholesky_devices;
pub mod heat;
pub mod heat_parts;
pub mod poisson;
pub mod siblings;

/// `n` numbers in `[-0.5, 0.5)` from a fixed xorshift generator started at
/// `seed` (non-zero): the same data on every run and machine.
pub fn uniform(seed: u64, n: usize) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}
