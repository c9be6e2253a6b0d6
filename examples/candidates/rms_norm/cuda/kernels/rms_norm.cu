// RMSNorm over the last dimension for the cuda backend: one block per row,
// y = x * rsqrt(mean(x^2) + eps) * w.
//
// Fast path (rows of a multiple of 4 floats, 16-byte aligned, up to 32768 floats): the row is
// read once with float4 loads and kept in registers, so DRAM sees one read and one write
// (eager PyTorch makes about six passes). Fallback (any shape or alignment): re-reads the row.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace {

constexpr int kMaxVpt = 8; // float4 values per thread held in registers on the fast path

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide sum, result in every thread; blockDim.x must be a multiple of 32.
__device__ float block_sum(float v) {
    __shared__ float sh[33];
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < nw ? sh[lane] : 0.0f);
        if (lane == 0)
            sh[32] = v;
    }
    __syncthreads();
    v = sh[32];
    __syncthreads(); // sh may be reused by a later call
    return v;
}

bool aligned16(const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <int VPT>
__global__ void __launch_bounds__(1024)
    rms_norm_cached(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y,
                    int64_t cols, float eps) {
    const int64_t n4 = cols >> 2;
    const float4 *xr =
        reinterpret_cast<const float4 *>(x + static_cast<int64_t>(blockIdx.x) * cols);
    float4 *yr = reinterpret_cast<float4 *>(y + static_cast<int64_t>(blockIdx.x) * cols);
    const float4 *w4 = reinterpret_cast<const float4 *>(w);
    float4 v[VPT];
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (i < n4) {
            v[k] = xr[i];
            q += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
        }
    }
    const float scale = rsqrtf(block_sum(q) / static_cast<float>(cols) + eps);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (i < n4) {
            const float4 g = w4[i];
            float4 o;
            o.x = v[k].x * scale * g.x;
            o.y = v[k].y * scale * g.y;
            o.z = v[k].z * scale * g.z;
            o.w = v[k].w * scale * g.w;
            yr[i] = o;
        }
    }
}

__global__ void __launch_bounds__(512)
    rms_norm_generic(const float *__restrict__ x, const float *__restrict__ w,
                     float *__restrict__ y, int64_t cols, float eps) {
    const float *xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    float *yr = y + static_cast<int64_t>(blockIdx.x) * cols;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        q += xr[i] * xr[i];
    const float scale = rsqrtf(block_sum(q) / static_cast<float>(cols) + eps);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = xr[i] * scale * w[i];
}

} // namespace

extern "C" int rms_norm_f32(const float *x, const float *w, float *y, int64_t rows, int64_t cols,
                            float eps) {
    if (rows <= 0 || cols <= 0)
        return (int)cudaGetLastError();
    if (rows > INT_MAX)
        return (int)cudaErrorInvalidValue;
    const int64_t n4 = cols / 4;
    const dim3 grid(static_cast<unsigned int>(rows));
    if (cols % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(w) && n4 <= 1024 * kMaxVpt) {
        // About 4 float4 per thread, at most 1024 threads; VPT covers the rest.
        int64_t threads = ((n4 + 3) / 4 + 31) / 32 * 32;
        threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
        const int64_t vpt = (n4 + threads - 1) / threads;
        const int t = static_cast<int>(threads);
        if (vpt <= 1)
            rms_norm_cached<1><<<grid, t, 0, 0>>>(x, w, y, cols, eps);
        else if (vpt <= 2)
            rms_norm_cached<2><<<grid, t, 0, 0>>>(x, w, y, cols, eps);
        else if (vpt <= 4)
            rms_norm_cached<4><<<grid, t, 0, 0>>>(x, w, y, cols, eps);
        else
            rms_norm_cached<8><<<grid, t, 0, 0>>>(x, w, y, cols, eps);
    } else {
        const int threads = cols >= 4096 ? 512 : (cols >= 512 ? 128 : 32);
        rms_norm_generic<<<grid, threads, 0, 0>>>(x, w, y, cols, eps);
    }
    return (int)cudaGetLastError();
}
