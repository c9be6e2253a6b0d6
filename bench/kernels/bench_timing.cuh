// The timing of the microbenchmarks here (pass_shapes_bench.cu, bn_stats_bench.cu): a launch's
// median time over 10 runs, each after a kernel that rewrites a buffer larger than the L2 cache
// (so that no run reads what the one before left in it), by CUDA events.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>
#include <vector>

__global__ void bench_flush(float *p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] += 1.0f;
}

// f launches the work; junk holds jn floats (64 Mi: 256 MiB, over the H200's 50 MiB of L2)
template <class F> float timeit(F f, float *junk, int64_t jn) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> ts;
    for (int i = 0; i < 12; i++) {
        bench_flush<<<1024, 256>>>(junk, jn);
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (i >= 2)
            ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ts[ts.size() / 2];
}
