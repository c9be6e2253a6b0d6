// 2D max pooling (no padding, dilation 1, floor mode) over NCHW for the cuda backend.
//
// 2x2 / stride 2 with rows of a multiple of 4 floats: each thread reads one float4 from each of
// the two input rows and writes two outputs as a float2 (coalesced, one pass over the input).
// Any other case: one thread per output element. NaN propagates as in PyTorch.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__device__ __forceinline__ float max_nan(float a, float b) {
    return (b > a || isnan(b)) ? b : a;
}

__global__ void pool2x2_vec(const float *__restrict__ x, float *__restrict__ y, int64_t h,
                            int64_t w, int64_t ho, int64_t wo, int64_t total) {
    const int64_t quads = w >> 2; // float4 per input row = output pairs per output row
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        const int64_t q = idx % quads;
        const int64_t t = idx / quads; // plane * ho + oh
        const int64_t oh = t % ho;
        const int64_t p = t / ho;
        const float *r0 = x + (p * h + 2 * oh) * w + 4 * q;
        const float4 a = *reinterpret_cast<const float4 *>(r0);
        const float4 b = *reinterpret_cast<const float4 *>(r0 + w);
        float2 o;
        o.x = max_nan(max_nan(a.x, a.y), max_nan(b.x, b.y));
        o.y = max_nan(max_nan(a.z, a.w), max_nan(b.z, b.w));
        *reinterpret_cast<float2 *>(y + t * wo + 2 * q) = o;
    }
}

__global__ void pool_generic(const float *__restrict__ x, float *__restrict__ y, int64_t h,
                             int64_t w, int64_t ho, int64_t wo, int64_t k, int64_t s,
                             int64_t total) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        const int64_t ow = idx % wo;
        const int64_t t = idx / wo;
        const int64_t oh = t % ho;
        const int64_t p = t / ho;
        const float *in = x + (p * h + oh * s) * w + ow * s;
        float m = in[0];
        for (int64_t i = 0; i < k; ++i) {
            for (int64_t j = 0; j < k; ++j)
                m = max_nan(m, in[i * w + j]);
        }
        y[idx] = m;
    }
}

constexpr int kThreads = 256;

unsigned int blocks_for(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned int>(b < (int64_t{1} << 20) ? b : (int64_t{1} << 20));
}

} // namespace

extern "C" int max_pool2d_f32(const float *x, float *y, int64_t planes, int64_t h, int64_t w,
                              int64_t ho, int64_t wo, int64_t k, int64_t s) {
    if (planes < 0 || ho < 0 || wo < 0 || k <= 0 || s <= 0)
        return (int)cudaErrorInvalidValue;
    if ((ho > 0 && (ho - 1) * s + k > h) || (wo > 0 && (wo - 1) * s + k > w))
        return (int)cudaErrorInvalidValue;
    if (planes == 0 || ho == 0 || wo == 0)
        return (int)cudaGetLastError();
    const bool vec = k == 2 && s == 2 && w % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(y) % 8 == 0;
    if (vec) {
        const int64_t total = planes * ho * (w / 4);
        pool2x2_vec<<<blocks_for(total), kThreads, 0, 0>>>(x, y, h, w, ho, wo, total);
    } else {
        const int64_t total = planes * ho * wo;
        pool_generic<<<blocks_for(total), kThreads, 0, 0>>>(x, y, h, w, ho, wo, k, s, total);
    }
    return (int)cudaGetLastError();
}
