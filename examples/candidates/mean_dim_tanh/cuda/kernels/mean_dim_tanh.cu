// y[r] = tanh(mean(x[r, :])) for the cuda backend: one warp per row, float4 loads when the
// rows allow them, a warp-shuffle sum, then lane 0 writes.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <bool VEC>
__global__ void mean_tanh_rows(const float *__restrict__ x, float *__restrict__ y, int64_t rows,
                               int64_t cols) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows)
        return; // uniform across the warp
    const int lane = threadIdx.x & 31;
    const float *xr = x + row * cols;
    float s = 0.0f;
    if (VEC) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const int64_t n4 = cols >> 2;
#pragma unroll 4
        for (int64_t i = lane; i < n4; i += 32) {
            const float4 v = x4[i];
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int64_t i = lane; i < cols; i += 32)
            s += xr[i];
    }
    s = warp_sum(s);
    if (lane == 0)
        y[row] = tanhf(s / static_cast<float>(cols));
}

} // namespace

extern "C" int mean_tanh_f32(const float *x, float *y, int64_t rows, int64_t cols) {
    if (rows <= 0)
        return (int)cudaGetLastError();
    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
    if (vec)
        mean_tanh_rows<true>
            <<<static_cast<unsigned int>(blocks), kWarpsPerBlock * 32, 0, 0>>>(x, y, rows, cols);
    else
        mean_tanh_rows<false>
            <<<static_cast<unsigned int>(blocks), kWarpsPerBlock * 32, 0, 0>>>(x, y, rows, cols);
    return (int)cudaGetLastError();
}
