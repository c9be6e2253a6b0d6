// Row softmax for the cuda backend: one block per row.
//
// Fast path (rows of a multiple of 4 floats, 16-byte aligned, up to 32768 floats): the row is
// read once with float4 loads and kept in registers, so DRAM sees one read and one write;
// block max and block sum use warp shuffles plus one shared-memory step.
// Fallback (any shape or alignment): an online max/sum pass, then a pass that writes.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

namespace {

constexpr int kMaxVpt = 8; // float4 values per thread held in registers on the fast path

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide max / sum, result in every thread; blockDim.x must be a multiple of 32.
__device__ float block_max(float v) {
    __shared__ float sh[33];
    v = warp_max(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_max(lane < nw ? sh[lane] : -INFINITY);
        if (lane == 0)
            sh[32] = v;
    }
    __syncthreads();
    v = sh[32];
    __syncthreads(); // sh may be reused by a later call
    return v;
}

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
    __syncthreads();
    return v;
}

template <int VPT>
__global__ void __launch_bounds__(1024)
    softmax_cached(const float *__restrict__ x, float *__restrict__ y, int64_t cols) {
    const int64_t n4 = cols >> 2;
    const float4 *xr =
        reinterpret_cast<const float4 *>(x + static_cast<int64_t>(blockIdx.x) * cols);
    float4 *yr = reinterpret_cast<float4 *>(y + static_cast<int64_t>(blockIdx.x) * cols);
    float4 v[VPT];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (i < n4) {
            v[k] = xr[i];
            m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
        }
    }
    m = block_max(m);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (i < n4) {
            v[k].x = expf(v[k].x - m);
            v[k].y = expf(v[k].y - m);
            v[k].z = expf(v[k].z - m);
            v[k].w = expf(v[k].w - m);
            s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
    }
    const float inv = 1.0f / block_sum(s);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
        if (i < n4) {
            float4 o = v[k];
            o.x *= inv;
            o.y *= inv;
            o.z *= inv;
            o.w *= inv;
            yr[i] = o;
        }
    }
}

// (m, s) accumulates sum(exp(v - m)) while m tracks the running max.
__device__ __forceinline__ void online_add(float &m, float &s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else {
        s += expf(v - m);
    }
}

__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2) {
    if (m2 == -INFINITY)
        return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    const float mx = fmaxf(m, m2);
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

__global__ void __launch_bounds__(512)
    softmax_generic(const float *__restrict__ x, float *__restrict__ y, int64_t cols) {
    __shared__ float shm[32], shs[32];
    const float *xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    float *yr = y + static_cast<int64_t>(blockIdx.x) * cols;
    float m = -INFINITY, s = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        online_add(m, s, xr[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o),
                    s2 = __shfl_xor_sync(0xffffffffu, s, o);
        online_merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        shm[warp] = m;
        shs[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nw ? shm[lane] : -INFINITY;
        s = lane < nw ? shs[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o),
                        s2 = __shfl_xor_sync(0xffffffffu, s, o);
            online_merge(m, s, m2, s2);
        }
        if (lane == 0) {
            shm[0] = m;
            shs[0] = s;
        }
    }
    __syncthreads();
    m = shm[0];
    const float inv = 1.0f / shs[0];
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = expf(xr[i] - m) * inv;
}

bool aligned16(const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

extern "C" int softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0)
        return (int)cudaGetLastError();
    if (rows > INT_MAX)
        return (int)cudaErrorInvalidValue;
    const int64_t n4 = cols / 4;
    const dim3 grid(static_cast<unsigned int>(rows));
    if (cols % 4 == 0 && aligned16(x) && aligned16(y) && n4 <= 1024 * kMaxVpt) {
        // About 4 float4 per thread, at most 1024 threads; VPT covers the rest.
        int64_t threads = ((n4 + 3) / 4 + 31) / 32 * 32;
        threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
        const int64_t vpt = (n4 + threads - 1) / threads;
        const int t = static_cast<int>(threads);
        if (vpt <= 1)
            softmax_cached<1><<<grid, t, 0, 0>>>(x, y, cols);
        else if (vpt <= 2)
            softmax_cached<2><<<grid, t, 0, 0>>>(x, y, cols);
        else if (vpt <= 4)
            softmax_cached<4><<<grid, t, 0, 0>>>(x, y, cols);
        else
            softmax_cached<8><<<grid, t, 0, 0>>>(x, y, cols);
    } else {
        const int threads = cols >= 4096 ? 512 : (cols >= 512 ? 128 : 32);
        softmax_generic<<<grid, threads, 0, 0>>>(x, y, cols);
    }
    return (int)cudaGetLastError();
}
