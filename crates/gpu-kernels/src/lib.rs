//! CUDA kernels of the project, as PTX text, with plain-Rust references.
//!
//! - [`KERNELS_PTX`] is the PTX of `src/cuda/kernels.cu`: compiled by the
//!   build script when it finds an nvcc, otherwise the committed
//!   `ptx/kernels.ptx` (see the crate's `README.md` for the toolchain that
//!   makes it and the drivers that load it); [`REDUCE_PTX`] likewise of
//!   `src/cuda/reduce.cu`, the deterministic reductions of [`reduce`].
//! - Every kernel is a [`gpu_sched::Builtin`] static ([`FILL_F32`],
//!   [`SCAN_BLOCK_F32`], ..., and the reductions' in [`reduce`]), its doc
//!   comment its C signature, its host implementation beside it; the safe
//!   wrappers ([`fill`], [`scale`], ...) launch them.
//! - [`BLOCK`], [`SCAN_ITEMS`] and [`SCAN_TILE`] are the launch contract, the
//!   same numbers as in `src/cuda/kernels.cuh`.
//! - [`host`] holds reference implementations over slices, which a host
//!   backend runs in place of the kernels and which GPU tests compare to.
//!
//! # Launch contract
//!
//! All lengths `n` are `u64` (`unsigned long long`); pointers are device
//! pointers (`CUdeviceptr`). Parameters are passed in the order of the C
//! signatures in each static's documentation.
//!
//! - Element-wise kernels (`fill`, `add_scalar`, `scale`, `scale_into`,
//!   `axpy`, `copy`, `spin_touch_f32`) use grid-stride loops: any grid and any block size
//!   cover any `n`. [`grid_for`] picks a grid of [`BLOCK`]-thread blocks.
//! - `sum_*` ([`sum_atomic_into`]): [`BLOCK`] threads per block, any grid;
//!   the caller zeroes `*out` first; each block adds its partial sum with
//!   one `atomicAdd`, so the order of additions, and the last bits of the
//!   result, vary between runs.
//! - Inclusive scan of `n` elements is three launches on one stream, each
//!   with [`BLOCK`] threads per block, with a scratch `block_sums` of
//!   [`scan_tiles`]`(n)` elements:
//!   1. `scan_block_*(in, out, block_sums, n)`, grid `min(scan_tiles(n),
//!      MAX_GRID)` (any grid works: blocks stride over tiles): scans each tile
//!      of [`SCAN_TILE`] elements on its own and writes its total to
//!      `block_sums[tile]`.
//!   2. `scan_sums_*(block_sums, scan_tiles(n))`, grid of exactly one block:
//!      turns `block_sums` in place into its exclusive scan (the sum of the
//!      tiles before each one), for any number of tiles.
//!   3. `scan_add_*(out, block_sums, n)`, any grid ([`grid_for`]): adds
//!      `block_sums[tile]` to every element of every tile but the first.
//!
//!   When `n <= SCAN_TILE`, step 1 alone gives the result. `in == out` is
//!   allowed (each tile is read into shared memory before it is written).
//! - `reduce_*` ([`reduce`]): [`BLOCK`] threads per block, any grid (blocks
//!   stride over parts; ideally [`reduce_parts`]`(n)` blocks): part `p` of
//!   `n` elements ([`reduce_chunk`]`(n)` elements from `p * chunk`) into
//!   `partials[p]`, for every one of the [`reduce_parts`]`(n)` parts, in a
//!   fixed order and without atomics. Pass 2 is the sum (min, max) kernel of
//!   the accumulator type over the partials, one part, into `out[0]`.
//! - `spin_ns` and `gate`: one thread does the work; launch with one block of
//!   one thread.
//! - `gate`'s two flags are `u32` in pinned host memory mapped into the
//!   device (`cuMemHostAlloc` with `DEVICEMAP`, then
//!   `cuMemHostGetDevicePointer`), never managed memory.
//!
//! # Rounding
//!
//! Element-wise kernels round exactly as [`host`] does: `axpy` computes
//! `y + (a * x)` with two roundings and no fused multiply-add, so results are
//! bit-identical. `sum_*` and the scan add in a different order than the
//! sequential host references; compare those with a tolerance, or use inputs
//! whose partial sums are exact (small integers).
//! The `reduce_*` kernels add in the order that [`host::reduce`] follows,
//! rounding each operation as it does: their results are bit-identical.

mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

/// Declares a module of built-in kernels once: each kernel a
/// [`gpu_sched::Builtin`] static (its PTX entry, signature and host
/// implementation together), the [`gpu_sched::BuiltinModule`] listing them,
/// and the list of their names (for the tests).
macro_rules! builtins {
    (
        module $module:ident($label:expr, $ptx:expr), names $names:ident;
        $(
            $(#[$doc:meta])*
            $vis:vis static $name:ident: $sig:ty = $entry:literal, $host:expr;
        )*
    ) => {
        static $module: gpu_sched::BuiltinModule = gpu_sched::BuiltinModule::new(
            $label,
            $ptx,
            &[$(gpu_sched::BuiltinEntry::of::<$sig>($entry)),*],
        );
        /// The PTX entry names of the module's kernels, in its order.
        #[cfg(test)]
        pub(crate) const $names: &[&str] = &[$($entry),*];
        $(
            $(#[$doc])*
            $vis static $name: gpu_sched::Builtin<$sig> =
                gpu_sched::Builtin::<$sig>::new(&$module, $entry, $host);
        )*
    };
}

pub mod diag;
pub mod elementwise;
pub mod host;
mod ops;
pub mod reduce;

pub use ops::{
    add_scalar, axpy, copy, fill, gate, inclusive_scan, scale, scale_into, spin, spin_touch,
    sum_atomic_into, Float, ADD_SCALAR_F32, ADD_SCALAR_F64, AXPY_F32, AXPY_F64, COPY_F32, COPY_F64,
    FILL_F32, FILL_F64, SCALE_F32, SCALE_F64, SCALE_INTO_F32, SCALE_INTO_F64, SCAN_ADD_F32,
    SCAN_ADD_F64, SCAN_BLOCK_F32, SCAN_BLOCK_F64, SCAN_SUMS_F32, SCAN_SUMS_F64, SPIN_NS,
    SPIN_TOUCH_F32, SUM_F32, SUM_F64,
};

#[cfg(test)]
mod test;

pub use diag::{add_diagonal, diagonal, identity, set_diagonal};
pub use elementwise::Elementwise;
pub use kernels::{DIAG_PTX, KERNELS_PTX, PTX_FROM_NVCC, REDUCE_PTX};
pub use reduce::{reduce_chunk, reduce_parts, REDUCE_PARTS, REDUCE_TILE};

/// Threads per block for `sum_*`, `scan_block_*`, `scan_sums_*` and
/// `scan_add_*` (`GK_BLOCK` in `kernels.cuh`). Element-wise kernels accept any
/// block size, and this is a good one for them too.
pub const BLOCK: u32 = 256;

/// Elements each thread of `scan_block_*` scans sequentially
/// (`GK_SCAN_ITEMS`).
pub const SCAN_ITEMS: u32 = 4;

/// Elements per scan tile, `BLOCK * SCAN_ITEMS` (`GK_SCAN_TILE`): one block
/// scans one tile at a time, and `block_sums` has one slot per tile.
pub const SCAN_TILE: u32 = BLOCK * SCAN_ITEMS;

/// Largest grid that [`grid_for`] returns. Grid-stride loops make any grid
/// correct; past this many blocks each thread simply loops more.
pub const MAX_GRID: u32 = 65_535;

/// Number of scan tiles, and so of `block_sums` slots, for `n` elements:
/// `ceil(n / SCAN_TILE)`.
///
/// # Examples
///
/// ```
/// use gpu_kernels::{scan_tiles, SCAN_TILE};
/// assert_eq!(scan_tiles(0), 0);
/// assert_eq!(scan_tiles(1), 1);
/// assert_eq!(scan_tiles(u64::from(SCAN_TILE) + 1), 2);
/// ```
pub const fn scan_tiles(n: u64) -> u64 {
    n.div_ceil(SCAN_TILE as u64)
}

/// Grid size for a grid-stride kernel over `n` elements with [`BLOCK`]
/// threads per block: one thread per element, at least one block and at most
/// [`MAX_GRID`].
///
/// # Examples
///
/// ```
/// use gpu_kernels::{grid_for, BLOCK, MAX_GRID};
/// assert_eq!(grid_for(0), 1);
/// assert_eq!(grid_for(u64::from(BLOCK) + 1), 2);
/// assert_eq!(grid_for(u64::MAX), MAX_GRID);
/// ```
pub const fn grid_for(n: u64) -> u32 {
    let blocks = n.div_ceil(BLOCK as u64);
    if blocks == 0 {
        1
    } else if blocks > MAX_GRID as u64 {
        MAX_GRID
    } else {
        blocks as u32
    }
}
