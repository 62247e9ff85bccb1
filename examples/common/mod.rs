//! What the examples share: the heat step that `05-stencil`, `07-own-kernel`
//! and `09-multi-gpu-heat` run ([`heat`]: a 5-point stencil in CUDA C with a
//! host twin and a safe wrapper around its launch) and its row-slab form
//! for several devices ([`heat_parts`]). Examples use it as `common::heat`.

pub mod heat;
pub mod heat_parts;
