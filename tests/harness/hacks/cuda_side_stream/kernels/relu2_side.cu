#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu2_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = v > 0.0f ? 2.0f * v : 0.0f;
    }
}

// Launches on a private non-blocking stream and returns without joining it to the default stream:
// events recorded on the default stream around this call do not see the kernel.
extern "C" int relu2_side(const float* x, float* y, int64_t n) {
    static cudaStream_t side = nullptr;
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    relu2_kernel<<<132 * 8, 256, 0, side>>>(x, y, n);
    return (int)cudaGetLastError();
}
