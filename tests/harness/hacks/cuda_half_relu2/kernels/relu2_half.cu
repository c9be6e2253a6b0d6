#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Reads through half precision: every input is rounded to fp16 before the arithmetic.
__global__ void relu2_half_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const __half h = __float2half(x[i]);
        const __half two = __float2half(2.0f);
        const __half r = __hgt(h, __float2half(0.0f)) ? __hmul(h, two) : __float2half(0.0f);
        y[i] = __half2float(r);
    }
}

extern "C" int relu2_half(const float* x, float* y, int64_t n) {
    relu2_half_kernel<<<132 * 8, 256>>>(x, y, n);
    return (int)cudaGetLastError();
}
