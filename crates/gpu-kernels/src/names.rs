//! PTX symbol of every kernel in [`KERNELS_PTX`](crate::KERNELS_PTX) and
//! [`REDUCE_PTX`](crate::REDUCE_PTX), with its C parameter list.
//!
//! `u64` is `unsigned long long`. Pass parameters in the order shown; scalar
//! `T` parameters are passed by value as `f32` or `f64`, pointers as device
//! pointers. See the crate documentation for grids and block sizes.

/// `fill_f32(float* x, float v, u64 n)`: `x[i] = v`.
pub const FILL_F32: &str = "fill_f32";
/// `fill_f64(double* x, double v, u64 n)`: `x[i] = v`.
pub const FILL_F64: &str = "fill_f64";

/// `add_scalar_f32(float* x, float v, u64 n)`: `x[i] = x[i] + v`.
pub const ADD_SCALAR_F32: &str = "add_scalar_f32";
/// `add_scalar_f64(double* x, double v, u64 n)`: `x[i] = x[i] + v`.
pub const ADD_SCALAR_F64: &str = "add_scalar_f64";

/// `scale_f32(float* x, float a, u64 n)`: `x[i] = x[i] * a`.
pub const SCALE_F32: &str = "scale_f32";
/// `scale_f64(double* x, double a, u64 n)`: `x[i] = x[i] * a`.
pub const SCALE_F64: &str = "scale_f64";

/// `scale_into_f32(const float* x, float* y, float a, u64 n)`:
/// `y[i] = x[i] * a`.
pub const SCALE_INTO_F32: &str = "scale_into_f32";
/// `scale_into_f64(const double* x, double* y, double a, u64 n)`:
/// `y[i] = x[i] * a`.
pub const SCALE_INTO_F64: &str = "scale_into_f64";

/// `axpy_f32(float a, const float* x, float* y, u64 n)`:
/// `y[i] = y[i] + a * x[i]`, without fused multiply-add.
pub const AXPY_F32: &str = "axpy_f32";
/// `axpy_f64(double a, const double* x, double* y, u64 n)`:
/// `y[i] = y[i] + a * x[i]`, without fused multiply-add.
pub const AXPY_F64: &str = "axpy_f64";

/// `copy_f32(const float* src, float* dst, u64 n)`: `dst[i] = src[i]`.
pub const COPY_F32: &str = "copy_f32";
/// `copy_f64(const double* src, double* dst, u64 n)`: `dst[i] = src[i]`.
pub const COPY_F64: &str = "copy_f64";

/// `sum_f32(const float* x, float* out, u64 n)`: `*out += sum(x)`, one
/// `atomicAdd` per block; [`BLOCK`](crate::BLOCK) threads per block.
pub const SUM_F32: &str = "sum_f32";
/// `sum_f64(const double* x, double* out, u64 n)`: `*out += sum(x)`, one
/// `atomicAdd` per block; [`BLOCK`](crate::BLOCK) threads per block.
pub const SUM_F64: &str = "sum_f64";

/// `scan_block_f32(const float* in, float* out, float* block_sums, u64 n)`:
/// step 1 of the inclusive scan.
pub const SCAN_BLOCK_F32: &str = "scan_block_f32";
/// `scan_block_f64(const double* in, double* out, double* block_sums, u64 n)`:
/// step 1 of the inclusive scan.
pub const SCAN_BLOCK_F64: &str = "scan_block_f64";

/// `scan_sums_f32(float* block_sums, u64 nblocks)`: step 2 of the inclusive
/// scan (exclusive scan of the tile totals in place); one block.
pub const SCAN_SUMS_F32: &str = "scan_sums_f32";
/// `scan_sums_f64(double* block_sums, u64 nblocks)`: step 2 of the inclusive
/// scan (exclusive scan of the tile totals in place); one block.
pub const SCAN_SUMS_F64: &str = "scan_sums_f64";

/// `scan_add_f32(float* out, const float* block_sums, u64 n)`: step 3 of the
/// inclusive scan.
pub const SCAN_ADD_F32: &str = "scan_add_f32";
/// `scan_add_f64(double* out, const double* block_sums, u64 n)`: step 3 of
/// the inclusive scan.
pub const SCAN_ADD_F64: &str = "scan_add_f64";

/// `spin_ns(u64 ns)`: one thread busy-waits `ns` nanoseconds of the GPU's
/// `%globaltimer`. Launch with one block of one thread.
pub const SPIN_NS: &str = "spin_ns";

/// `spin_touch_f32(float* x, u64 n, u64 ns)`: thread 0 of every block spins
/// `ns` nanoseconds, then the grid adds `1.0` to every `x[i]`.
pub const SPIN_TOUCH_F32: &str = "spin_touch_f32";

/// `gate(volatile unsigned int* open, volatile unsigned int* timed_out,
/// u64 timeout_ns)`: one thread waits until `*open != 0`, polling about every
/// microsecond, or until `timeout_ns` nanoseconds have passed, in which case it
/// sets `*timed_out = 1`. Both flags are pinned host memory mapped into the
/// device. Launch with one block of one thread.
pub const GATE: &str = "gate";

/// Every kernel of [`KERNELS_PTX`](crate::KERNELS_PTX), in the order of
/// [`MODULE`](crate::MODULE).
pub const ALL: &[&str] = &[
    FILL_F32,
    FILL_F64,
    ADD_SCALAR_F32,
    ADD_SCALAR_F64,
    SCALE_F32,
    SCALE_F64,
    SCALE_INTO_F32,
    SCALE_INTO_F64,
    AXPY_F32,
    AXPY_F64,
    COPY_F32,
    COPY_F64,
    SUM_F32,
    SUM_F64,
    SCAN_BLOCK_F32,
    SCAN_BLOCK_F64,
    SCAN_SUMS_F32,
    SCAN_SUMS_F64,
    SCAN_ADD_F32,
    SCAN_ADD_F64,
    SPIN_NS,
    SPIN_TOUCH_F32,
    GATE,
];

// Reductions (`REDUCE_PTX`, `src/cuda/reduce.cu`): every kernel reduces part
// `p` of `n` elements into `partials[p]`, for `reduce_parts(n)` parts; launch
// with `BLOCK` threads per block and any grid (blocks stride over parts).
// Pass 2 is the sum, min or max kernel of the accumulator type over the
// partials, with `n = reduce_parts(..)`: one part, one block. See
// `crate::reduce` for the order.

/// `reduce_sum_f32(const float* x, float* partials, u64 n)`.
pub const REDUCE_SUM_F32: &str = "reduce_sum_f32";
/// `reduce_sum_f64(const double* x, double* partials, u64 n)`.
pub const REDUCE_SUM_F64: &str = "reduce_sum_f64";
/// `reduce_min_f32(const float* x, float* partials, u64 n)`: skips NaN,
/// `-0 < +0`, `+inf` for an empty part.
pub const REDUCE_MIN_F32: &str = "reduce_min_f32";
/// `reduce_min_f64(const double* x, double* partials, u64 n)`.
pub const REDUCE_MIN_F64: &str = "reduce_min_f64";
/// `reduce_max_f32(const float* x, float* partials, u64 n)`: skips NaN,
/// `+0 > -0`, `-inf` for an empty part.
pub const REDUCE_MAX_F32: &str = "reduce_max_f32";
/// `reduce_max_f64(const double* x, double* partials, u64 n)`.
pub const REDUCE_MAX_F64: &str = "reduce_max_f64";
/// `reduce_dot_f32(const float* x, const float* y, float* partials, u64 n)`:
/// adds the rounded products `x[i] * y[i]`.
pub const REDUCE_DOT_F32: &str = "reduce_dot_f32";
/// `reduce_dot_f64(const double* x, const double* y, double* partials, u64 n)`.
pub const REDUCE_DOT_F64: &str = "reduce_dot_f64";
/// `reduce_sum_f32_f64(const float* x, double* partials, u64 n)`: each
/// element widened to `double`, added in `double`.
pub const REDUCE_SUM_F32_F64: &str = "reduce_sum_f32_f64";
/// `reduce_dot_f32_f64(const float* x, const float* y, double* partials, u64
/// n)`: products and sums in `double` (the products are exact).
pub const REDUCE_DOT_F32_F64: &str = "reduce_dot_f32_f64";

/// Every kernel of [`REDUCE_PTX`](crate::REDUCE_PTX), in the order of
/// [`reduce::MODULE`](crate::reduce::MODULE).
pub const REDUCE_ALL: &[&str] = &[
    REDUCE_SUM_F32,
    REDUCE_SUM_F64,
    REDUCE_MIN_F32,
    REDUCE_MIN_F64,
    REDUCE_MAX_F32,
    REDUCE_MAX_F64,
    REDUCE_DOT_F32,
    REDUCE_DOT_F64,
    REDUCE_SUM_F32_F64,
    REDUCE_DOT_F32_F64,
];
