// Diagonal helpers of the `gpu-kernels` crate, over square n x n matrices
// stored packed (leading dimension n, either order: element (i, i) is at
// i * (n + 1)): the identity, setting, reading and shifting the diagonal.
// Grid-stride loops: any grid and block size. Every entry is `extern "C"`
// (`diag::NAMES` in `src/diag.rs`).
//
// This file includes no system header so that NVRTC, which the committed PTX
// is made with, compiles it exactly as nvcc does.

#include "kernels.cuh"

__device__ __forceinline__ u64 gk_diag_index() {
    return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;
}

__device__ __forceinline__ u64 gk_diag_count() {
    return (u64)gridDim.x * (u64)blockDim.x;
}

// a = I (all n * n elements).
template <typename T>
__device__ void gk_identity(T* a, u64 n) {
    u64 total = n * n;
    for (u64 k = gk_diag_index(); k < total; k += gk_diag_count()) {
        a[k] = (k % (n + 1) == 0) ? (T)1 : (T)0;
    }
}

// a(i, i) = d[i].
template <typename T>
__device__ void gk_set_diagonal(T* a, const T* d, u64 n) {
    for (u64 i = gk_diag_index(); i < n; i += gk_diag_count()) {
        a[i * (n + 1)] = d[i];
    }
}

// d[i] = a(i, i).
template <typename T>
__device__ void gk_diagonal(const T* a, T* d, u64 n) {
    for (u64 i = gk_diag_index(); i < n; i += gk_diag_count()) {
        d[i] = a[i * (n + 1)];
    }
}

// a(i, i) = a(i, i) + v.
template <typename T>
__device__ void gk_add_diagonal(T* a, T v, u64 n) {
    for (u64 i = gk_diag_index(); i < n; i += gk_diag_count()) {
        a[i * (n + 1)] = a[i * (n + 1)] + v;
    }
}

extern "C" __global__ void identity_f32(float* a, u64 n) { gk_identity(a, n); }
extern "C" __global__ void identity_f64(double* a, u64 n) { gk_identity(a, n); }
extern "C" __global__ void set_diagonal_f32(float* a, const float* d, u64 n) { gk_set_diagonal(a, d, n); }
extern "C" __global__ void set_diagonal_f64(double* a, const double* d, u64 n) { gk_set_diagonal(a, d, n); }
extern "C" __global__ void diagonal_f32(const float* a, float* d, u64 n) { gk_diagonal(a, d, n); }
extern "C" __global__ void diagonal_f64(const double* a, double* d, u64 n) { gk_diagonal(a, d, n); }
extern "C" __global__ void add_diagonal_f32(float* a, float v, u64 n) { gk_add_diagonal(a, v, n); }
extern "C" __global__ void add_diagonal_f64(double* a, double v, u64 n) { gk_add_diagonal(a, v, n); }
