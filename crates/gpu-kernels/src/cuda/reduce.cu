// Deterministic reductions of the `gpu-kernels` crate: sum, min, max and dot
// product of f32 and f64, and sum and dot of f32 accumulated in f64.
//
// One kernel per operation and type, used for both passes:
//
//   pass 1: reduce_<op>(inputs, partials, n), GK_BLOCK threads per block, any
//           grid (ideally gk_reduce_parts(n) blocks): part p of the input, a
//           fixed range that depends on n only, is reduced into partials[p].
//           partials has gk_reduce_parts(n) slots.
//   pass 2: reduce_<sum|min|max>_<acc>(partials, out, parts), one block: the
//           partials are at most GK_REDUCE_PARTS elements, so one part.
//
// When gk_reduce_parts(n) == 1, pass 1 alone writes the result. Nothing is
// atomic and every addition happens in an order fixed by n alone, so results
// are bit-identical run to run, whatever the grid, and equal to the host
// references in `src/host/reduce.rs`, which follow the same order.
//
// The order, for a part of elements [begin, end):
//   1. thread t (0 <= t < GK_BLOCK) folds elements begin + t, begin + t +
//      GK_BLOCK, ... in increasing index order into an accumulator that
//      starts at the identity (0, +inf or -inf);
//   2. each warp combines its 32 accumulators with __shfl_down_sync at
//      offsets 16, 8, 4, 2, 1 (lane i takes lane i + offset);
//   3. warp 0 combines the GK_BLOCK / 32 warp results the same way, at
//      offsets GK_BLOCK / 64, ..., 1.
//
// Sums round every addition (no fused multiply-add: __fadd_rn and friends);
// a dot product adds the rounded product x[i] * y[i] (in f64 for the f32 -> f64
// variant, where the product of two floats is exact).
//
// min and max skip NaN, and order -0 below +0 (IEEE 754-2019 minimumNumber
// and maximumNumber): the result is the least (greatest) non-NaN element,
// whatever the order; +inf (-inf) when there is none.

#include "kernels.cuh"

#define GK_FULL_MASK 0xffffffffu
#define GK_WARPS (GK_BLOCK / 32)

static_assert((GK_WARPS & (GK_WARPS - 1)) == 0, "a power-of-two number of warps");

// Parts of a reduction of n elements: one per GK_REDUCE_TILE elements, at
// least 1 and at most GK_REDUCE_PARTS. Same as `gpu_kernels::reduce_parts`.
__device__ __forceinline__ u64 gk_reduce_parts(u64 n) {
    u64 parts = (n + GK_REDUCE_TILE - 1) / GK_REDUCE_TILE;
    if (parts < 1) {
        parts = 1;
    }
    if (parts > GK_REDUCE_PARTS) {
        parts = GK_REDUCE_PARTS;
    }
    return parts;
}

// Elements per part: n / parts rounded up to whole blocks, so that every part
// starts at a multiple of GK_BLOCK. Same as `gpu_kernels::reduce_chunk`.
__device__ __forceinline__ u64 gk_reduce_chunk(u64 n) {
    const u64 parts = gk_reduce_parts(n);
    const u64 per_part = (n + parts - 1) / parts;
    return (per_part + GK_BLOCK - 1) / GK_BLOCK * GK_BLOCK;
}

__device__ __forceinline__ float gk_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double gk_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float gk_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double gk_mul(double a, double b) { return __dmul_rn(a, b); }

__device__ __forceinline__ bool gk_negative(float v) { return (__float_as_uint(v) >> 31) != 0u; }
__device__ __forceinline__ bool gk_negative(double v) { return __double_as_longlong(v) < 0; }

template <typename T>
__device__ __forceinline__ T gk_inf();
template <>
__device__ __forceinline__ float gk_inf<float>() { return __int_as_float(0x7f800000); }
template <>
__device__ __forceinline__ double gk_inf<double>() { return __longlong_as_double(0x7ff0000000000000LL); }

// b if it is less than a (-0 < +0) or a is NaN, else a.
template <typename T>
__device__ __forceinline__ T gk_min(T a, T b) {
    return (b < a || a != a || (b == a && gk_negative(b))) ? b : a;
}

// b if it is greater than a (+0 > -0) or a is NaN, else a.
template <typename T>
__device__ __forceinline__ T gk_max(T a, T b) {
    return (b > a || a != a || (b == a && !gk_negative(b))) ? b : a;
}

// Each operation: `Acc` the accumulator type, `identity()`, `load(i)` element
// i mapped to Acc, `combine(a, b)`.

template <typename In, typename Acc>
struct GkSum {
    typedef Acc A;
    const In* x;
    __device__ __forceinline__ A identity() const { return A(0); }
    __device__ __forceinline__ A load(u64 i) const { return (A)x[i]; }
    __device__ __forceinline__ A combine(A a, A b) const { return gk_add(a, b); }
};

template <typename In, typename Acc>
struct GkDot {
    typedef Acc A;
    const In* x;
    const In* y;
    __device__ __forceinline__ A identity() const { return A(0); }
    __device__ __forceinline__ A load(u64 i) const { return gk_mul((A)x[i], (A)y[i]); }
    __device__ __forceinline__ A combine(A a, A b) const { return gk_add(a, b); }
};

template <typename T>
struct GkMin {
    typedef T A;
    const T* x;
    __device__ __forceinline__ A identity() const { return gk_inf<T>(); }
    __device__ __forceinline__ A load(u64 i) const { return x[i]; }
    __device__ __forceinline__ A combine(A a, A b) const { return gk_min(a, b); }
};

template <typename T>
struct GkMax {
    typedef T A;
    const T* x;
    __device__ __forceinline__ A identity() const { return -gk_inf<T>(); }
    __device__ __forceinline__ A load(u64 i) const { return x[i]; }
    __device__ __forceinline__ A combine(A a, A b) const { return gk_max(a, b); }
};

// Lane 0 gets the combination of lanes [0, 2 * first) in the fixed tree.
template <typename Op>
__device__ __forceinline__ typename Op::A gk_tree(const Op& op, typename Op::A v, int first) {
    for (int offset = first; offset > 0; offset >>= 1) {
        v = op.combine(v, __shfl_down_sync(GK_FULL_MASK, v, offset));
    }
    return v;
}

// Both passes: part p of [0, n) into partials[p], for every part, blocks
// striding over parts. Launch with GK_BLOCK threads per block.
template <typename Op>
__device__ void gk_reduce(const Op op, typename Op::A* partials, u64 n) {
    typedef typename Op::A A;
    __shared__ A warp_acc[GK_WARPS];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = threadIdx.x >> 5;
    const u64 parts = gk_reduce_parts(n);
    const u64 chunk = gk_reduce_chunk(n);

    for (u64 p = blockIdx.x; p < parts; p += gridDim.x) {
        const u64 begin = p * chunk;
        const u64 end = begin + chunk < n ? begin + chunk : n;
        A acc = op.identity();
        u64 i = begin + threadIdx.x;
        // Eight loads in flight, then folded in index order.
        for (; i + 7 * GK_BLOCK < end; i += 8 * GK_BLOCK) {
            A v[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                v[k] = op.load(i + (u64)k * GK_BLOCK);
            }
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                acc = op.combine(acc, v[k]);
            }
        }
        for (; i < end; i += GK_BLOCK) {
            acc = op.combine(acc, op.load(i));
        }

        acc = gk_tree(op, acc, 16);
        if (lane == 0) {
            warp_acc[warp] = acc;
        }
        __syncthreads();
        if (warp == 0) {
            acc = warp_acc[lane % GK_WARPS];
            acc = gk_tree(op, acc, GK_WARPS / 2);
            if (lane == 0) {
                partials[p] = acc;
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void reduce_sum_f32(const float* x, float* partials, u64 n) {
    gk_reduce(GkSum<float, float>{x}, partials, n);
}
extern "C" __global__ void reduce_sum_f64(const double* x, double* partials, u64 n) {
    gk_reduce(GkSum<double, double>{x}, partials, n);
}
extern "C" __global__ void reduce_sum_f32_f64(const float* x, double* partials, u64 n) {
    gk_reduce(GkSum<float, double>{x}, partials, n);
}

extern "C" __global__ void reduce_min_f32(const float* x, float* partials, u64 n) {
    gk_reduce(GkMin<float>{x}, partials, n);
}
extern "C" __global__ void reduce_min_f64(const double* x, double* partials, u64 n) {
    gk_reduce(GkMin<double>{x}, partials, n);
}

extern "C" __global__ void reduce_max_f32(const float* x, float* partials, u64 n) {
    gk_reduce(GkMax<float>{x}, partials, n);
}
extern "C" __global__ void reduce_max_f64(const double* x, double* partials, u64 n) {
    gk_reduce(GkMax<double>{x}, partials, n);
}

extern "C" __global__ void reduce_dot_f32(const float* x, const float* y, float* partials, u64 n) {
    gk_reduce(GkDot<float, float>{x, y}, partials, n);
}
extern "C" __global__ void reduce_dot_f64(const double* x, const double* y, double* partials, u64 n) {
    gk_reduce(GkDot<double, double>{x, y}, partials, n);
}
extern "C" __global__ void reduce_dot_f32_f64(const float* x, const float* y, double* partials, u64 n) {
    gk_reduce(GkDot<float, double>{x, y}, partials, n);
}
