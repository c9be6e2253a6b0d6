#include <cstdint>
#include <cuda_runtime.h>

__global__ void noop_kernel() {}

// Launches an empty kernel: a native call that computes nothing.
extern "C" int touch(const float* x, int64_t n) {
    (void)x;
    (void)n;
    noop_kernel<<<1, 1>>>();
    return (int)cudaGetLastError();
}
