// Kernels of the `gpu-kernels` crate.
//
// Every entry point is `extern "C"` so that its PTX name is the plain C name
// listed in `lib.rs` (`names`). Lengths are `unsigned long long` (u64).
// Element-wise kernels use grid-stride loops and accept any grid and block
// size. `sum_*` and `scan_*` must be launched with `GK_BLOCK` threads per
// block (see `kernels.cuh` and the launch contract in `lib.rs`).
//
// This file includes no system header so that NVRTC, which the committed PTX
// is made with, compiles it exactly as nvcc does.

#include "kernels.cuh"

#define GK_FULL_MASK 0xffffffffu

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

__device__ __forceinline__ u64 gk_thread_index() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}

__device__ __forceinline__ u64 gk_thread_count() {
    return (u64)gridDim.x * (u64)blockDim.x;
}

// Nanoseconds of the GPU's global timer.
__device__ __forceinline__ u64 gk_globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Busy-waits until `ns` nanoseconds of the global timer have passed.
__device__ __forceinline__ void gk_spin(u64 ns) {
    u64 start = gk_globaltimer();
    while (gk_globaltimer() - start < ns) {
    }
}

// Rounded multiply and add that the compiler never contracts into an FMA, so
// that `axpy` rounds twice exactly as the host reference does.
__device__ __forceinline__ float gk_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double gk_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float gk_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double gk_add(double a, double b) { return __dadd_rn(a, b); }

template <typename T>
__device__ __forceinline__ T gk_warp_sum(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(GK_FULL_MASK, v, offset);
    }
    return v;
}

template <typename T>
__device__ __forceinline__ T gk_warp_inclusive_scan(T v) {
    const unsigned lane = threadIdx.x & 31u;
    for (unsigned d = 1; d < 32; d <<= 1) {
        T up = __shfl_up_sync(GK_FULL_MASK, v, d);
        if (lane >= d) {
            v += up;
        }
    }
    return v;
}

// Exclusive scan of one value per thread over the whole block. Every thread of
// the block must call it (it synchronises). Returns the thread's exclusive
// prefix; `*total` receives the sum over the block. `warp_sums` is shared
// scratch of 32 elements.
template <typename T>
__device__ __forceinline__ T gk_block_exclusive_scan(T v, T* warp_sums, T* total) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = threadIdx.x >> 5;
    const unsigned nwarps = blockDim.x >> 5;

    T incl = gk_warp_inclusive_scan(v);
    T excl = __shfl_up_sync(GK_FULL_MASK, incl, 1);
    if (lane == 0) {
        excl = T(0);
    }
    if (lane == 31) {
        warp_sums[warp] = incl;
    }
    __syncthreads();
    if (warp == 0) {
        T w = lane < nwarps ? warp_sums[lane] : T(0);
        warp_sums[lane] = gk_warp_inclusive_scan(w);
    }
    __syncthreads();
    if (warp > 0) {
        excl = warp_sums[warp - 1] + excl;
    }
    *total = warp_sums[nwarps - 1];
    __syncthreads();
    return excl;
}

// ---------------------------------------------------------------------------
// Element-wise kernels (any grid, any block size)
// ---------------------------------------------------------------------------

template <typename T>
__device__ void gk_fill(T* x, T v, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        x[i] = v;
    }
}

template <typename T>
__device__ void gk_add_scalar(T* x, T v, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        x[i] = gk_add(x[i], v);
    }
}

template <typename T>
__device__ void gk_scale(T* x, T a, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        x[i] = gk_mul(x[i], a);
    }
}

template <typename T>
__device__ void gk_scale_into(const T* x, T* y, T a, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        y[i] = gk_mul(x[i], a);
    }
}

template <typename T>
__device__ void gk_axpy(T a, const T* x, T* y, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        y[i] = gk_add(y[i], gk_mul(a, x[i]));
    }
}

template <typename T>
__device__ void gk_copy(const T* src, T* dst, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void fill_f32(float* x, float v, u64 n) { gk_fill(x, v, n); }
extern "C" __global__ void fill_f64(double* x, double v, u64 n) { gk_fill(x, v, n); }

extern "C" __global__ void add_scalar_f32(float* x, float v, u64 n) { gk_add_scalar(x, v, n); }
extern "C" __global__ void add_scalar_f64(double* x, double v, u64 n) { gk_add_scalar(x, v, n); }

extern "C" __global__ void scale_f32(float* x, float a, u64 n) { gk_scale(x, a, n); }
extern "C" __global__ void scale_f64(double* x, double a, u64 n) { gk_scale(x, a, n); }

extern "C" __global__ void scale_into_f32(const float* x, float* y, float a, u64 n) { gk_scale_into(x, y, a, n); }
extern "C" __global__ void scale_into_f64(const double* x, double* y, double a, u64 n) { gk_scale_into(x, y, a, n); }

extern "C" __global__ void axpy_f32(float a, const float* x, float* y, u64 n) { gk_axpy(a, x, y, n); }
extern "C" __global__ void axpy_f64(double a, const double* x, double* y, u64 n) { gk_axpy(a, x, y, n); }

extern "C" __global__ void copy_f32(const float* src, float* dst, u64 n) { gk_copy(src, dst, n); }
extern "C" __global__ void copy_f64(const double* src, double* dst, u64 n) { gk_copy(src, dst, n); }

// ---------------------------------------------------------------------------
// Sum: any grid, GK_BLOCK threads per block, `*out` zeroed by the caller.
// Each block reduces its grid-stride share and adds it to `*out` with one
// atomicAdd, so the order of additions (and the last bits) vary run to run.
// ---------------------------------------------------------------------------

template <typename T>
__device__ void gk_sum(const T* x, T* out, u64 n) {
    __shared__ T warp_sums[32];
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = threadIdx.x >> 5;
    const unsigned nwarps = blockDim.x >> 5;

    T acc = T(0);
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        acc += x[i];
    }
    acc = gk_warp_sum(acc);
    if (lane == 0) {
        warp_sums[warp] = acc;
    }
    __syncthreads();
    if (warp == 0) {
        acc = lane < nwarps ? warp_sums[lane] : T(0);
        acc = gk_warp_sum(acc);
        if (lane == 0) {
            atomicAdd(out, acc);
        }
    }
}

extern "C" __global__ void sum_f32(const float* x, float* out, u64 n) { gk_sum(x, out, n); }
extern "C" __global__ void sum_f64(const double* x, double* out, u64 n) { gk_sum(x, out, n); }

// ---------------------------------------------------------------------------
// Inclusive scan, three launches (all with GK_BLOCK threads per block):
//   1. scan_block: any grid (ideally one block per tile); tile t of
//      GK_SCAN_TILE elements is scanned on its own into `out` and its total
//      written to block_sums[t]. block_sums has ceil(n / GK_SCAN_TILE) slots.
//   2. scan_sums: ONE block; block_sums[t] becomes the exclusive prefix
//      (sum of tiles 0..t), in place, for any number of tiles.
//   3. scan_add: any grid; adds block_sums[t] to every element of tile t > 0.
// When n <= GK_SCAN_TILE, step 1 alone gives the result.
// ---------------------------------------------------------------------------

template <typename T>
__device__ void gk_scan_block(const T* in, T* out, T* block_sums, u64 n) {
    __shared__ T tile[GK_SCAN_TILE];
    __shared__ T warp_sums[32];
    const u64 ntiles = (n + GK_SCAN_TILE - 1) / GK_SCAN_TILE;

    for (u64 t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const u64 base = t * GK_SCAN_TILE;
        const u64 rest = n - base;
        const unsigned len = rest < GK_SCAN_TILE ? (unsigned)rest : GK_SCAN_TILE;

        for (unsigned k = threadIdx.x; k < GK_SCAN_TILE; k += blockDim.x) {
            tile[k] = k < len ? in[base + k] : T(0);
        }
        __syncthreads();

        T* mine = tile + threadIdx.x * GK_SCAN_ITEMS;
        T run = mine[0];
        for (unsigned j = 1; j < GK_SCAN_ITEMS; ++j) {
            run += mine[j];
            mine[j] = run;
        }
        T total;
        T excl = gk_block_exclusive_scan(run, warp_sums, &total);
        if (threadIdx.x > 0) {
            for (unsigned j = 0; j < GK_SCAN_ITEMS; ++j) {
                mine[j] = excl + mine[j];
            }
        }
        __syncthreads();

        for (unsigned k = threadIdx.x; k < len; k += blockDim.x) {
            out[base + k] = tile[k];
        }
        if (threadIdx.x == 0) {
            block_sums[t] = total;
        }
        __syncthreads();
    }
}

template <typename T>
__device__ void gk_scan_sums(T* block_sums, u64 nblocks) {
    __shared__ T warp_sums[32];
    if (blockIdx.x != 0) {
        return;
    }
    T carry = T(0);
    for (u64 base = 0; base < nblocks; base += blockDim.x) {
        const u64 i = base + threadIdx.x;
        T v = i < nblocks ? block_sums[i] : T(0);
        T total;
        T excl = gk_block_exclusive_scan(v, warp_sums, &total);
        if (i < nblocks) {
            block_sums[i] = base == 0 ? excl : carry + excl;
        }
        carry = base == 0 ? total : carry + total;
    }
}

template <typename T>
__device__ void gk_scan_add(T* out, const T* block_sums, u64 n) {
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        const u64 t = i / GK_SCAN_TILE;
        if (t > 0) {
            out[i] = block_sums[t] + out[i];
        }
    }
}

extern "C" __global__ void scan_block_f32(const float* in, float* out, float* block_sums, u64 n) {
    gk_scan_block(in, out, block_sums, n);
}
extern "C" __global__ void scan_block_f64(const double* in, double* out, double* block_sums, u64 n) {
    gk_scan_block(in, out, block_sums, n);
}

extern "C" __global__ void scan_sums_f32(float* block_sums, u64 nblocks) { gk_scan_sums(block_sums, nblocks); }
extern "C" __global__ void scan_sums_f64(double* block_sums, u64 nblocks) { gk_scan_sums(block_sums, nblocks); }

extern "C" __global__ void scan_add_f32(float* out, const float* block_sums, u64 n) {
    gk_scan_add(out, block_sums, n);
}
extern "C" __global__ void scan_add_f64(double* out, const double* block_sums, u64 n) {
    gk_scan_add(out, block_sums, n);
}

// ---------------------------------------------------------------------------
// Timing and gating
// ---------------------------------------------------------------------------

// Thread 0 of block 0 busy-waits `ns` nanoseconds of the global timer; every
// other thread returns at once. Launch as <<<1, 1>>>.
extern "C" __global__ void spin_ns(u64 ns) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        gk_spin(ns);
    }
}

// Thread 0 of every block busy-waits `ns` nanoseconds, then the grid adds
// 1.0f to every element of x (grid-stride). A long kernel that writes a
// buffer. Any grid, any block size.
extern "C" __global__ void spin_touch_f32(float* x, u64 n, u64 ns) {
    if (threadIdx.x == 0) {
        gk_spin(ns);
    }
    __syncthreads();
    for (u64 i = gk_thread_index(); i < n; i += gk_thread_count()) {
        x[i] += 1.0f;
    }
}

// Thread 0 of block 0 waits until `*open != 0`, polling every ~1 us, or until
// `timeout_ns` nanoseconds of the global timer have passed, in which case it
// writes `*timed_out = 1`. Both flags live in pinned host memory mapped into
// the device (never managed memory); the host sets `*open`. Launch as
// <<<1, 1>>>; other threads return at once.
extern "C" __global__ void gate(volatile unsigned int* open, volatile unsigned int* timed_out, u64 timeout_ns) {
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    const u64 start = gk_globaltimer();
    while (*open == 0u) {
        if (gk_globaltimer() - start >= timeout_ns) {
            *timed_out = 1u;
            __threadfence_system();
            return;
        }
        __nanosleep(1000);
    }
    // Order what follows on this stream after the host's write to `*open`.
    __threadfence_system();
}
