#include <cstdint>
#include <cuda_runtime.h>

// Writes far outside its output: an illegal address that poisons the CUDA context.
__global__ void relu2_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + ((int64_t)1 << 40)] = x[i];
}

extern "C" int relu2(const float* x, float* y, int64_t n) {
    relu2_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
    cudaDeviceSynchronize();
    return (int)cudaGetLastError();
}
