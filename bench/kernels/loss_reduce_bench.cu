// Microbenchmark (H200, through the device tool): a full reduction of two large inputs to
// scalars, as in a loss (bench/tasks_extra/mse_smooth_l1.py: 32768 x 1024 floats each, the mean
// of (a - b)^2 and of a smooth L1 term). The expert's multi-reduction kernel reads the two at
// 0.8 TB/s there (run 27); this compares its shape with variants, and with one-stream reads of
// the same bytes, in the same run. Times: bench_timing.cuh (median of 10 after an L2 flush).
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 loss_reduce_bench.cu
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "bench_timing.cuh"

namespace {

constexpr int64_t kN = 32768LL * 1024;

__device__ __forceinline__ float sq(float a, float b) { return (a - b) * (a - b); }
__device__ __forceinline__ float sl1(float a, float b) {
    const float d = fabsf(a - b);
    return d < 0.5f ? 0.5f * d * d / 0.5f : d - 0.25f;
}

struct Acc2 {
    double v0, v1;
};

__device__ __forceinline__ void warp_sum(double &x) {
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, off);
}

// thread 0 of the block gets the block's sums
__device__ void block_sum(double &x, double &y) {
    __shared__ double px[32], py[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_sum(x);
    warp_sum(y);
    if (lane == 0) {
        px[warp] = x;
        py[warp] = y;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        x = lane < nw ? px[lane] : 0.0;
        y = lane < nw ? py[lane] : 0.0;
        warp_sum(x);
        warp_sum(y);
    }
}

// V0, the expert's shape today: chunks of `chunk` elements a block, scalar loads four a thread at
// once, double accumulators, partials combined by a second kernel
__global__ void v0_rows(const float *__restrict__ a, const float *__restrict__ b, int64_t n, int64_t chunk, Acc2 *ws) {
    double x = 0.0, y = 0.0;
    const int64_t j0 = (int64_t)blockIdx.x * chunk, j1 = j0 + chunk < n ? j0 + chunk : n, t = blockDim.x;
    int64_t j = j0 + threadIdx.x;
    for (; j + 3 * t < j1; j += 4 * t) {
        x += (double)sq(a[j], b[j]);
        y += (double)sl1(a[j], b[j]);
        x += (double)sq(a[j + t], b[j + t]);
        y += (double)sl1(a[j + t], b[j + t]);
        x += (double)sq(a[j + 2 * t], b[j + 2 * t]);
        y += (double)sl1(a[j + 2 * t], b[j + 2 * t]);
        x += (double)sq(a[j + 3 * t], b[j + 3 * t]);
        y += (double)sl1(a[j + 3 * t], b[j + 3 * t]);
    }
    for (; j < j1; j += t) {
        x += (double)sq(a[j], b[j]);
        y += (double)sl1(a[j], b[j]);
    }
    block_sum(x, y);
    if (threadIdx.x == 0)
        ws[blockIdx.x] = Acc2{x, y};
}

__global__ void combine(const Acc2 *ws, int64_t parts, float *out, int64_t n) {
    double x = 0.0, y = 0.0;
    for (int64_t i = threadIdx.x; i < parts; i += blockDim.x) {
        x += ws[i].v0;
        y += ws[i].v1;
    }
    block_sum(x, y);
    if (threadIdx.x == 0) {
        out[0] = (float)(x / (double)n);
        out[1] = (float)(y / (double)n);
    }
}

// V1: the same chunks, float4 loads (two of each input in flight), float sums per thread over its
// chunk (at most chunk / blockDim elements), double from the block on
template <typename T>
__global__ void v1_vec(const float4 *__restrict__ a, const float4 *__restrict__ b, int64_t n4, int64_t chunk4, Acc2 *ws) {
    T x = 0, y = 0;
    const int64_t j0 = (int64_t)blockIdx.x * chunk4, j1 = j0 + chunk4 < n4 ? j0 + chunk4 : n4, t = blockDim.x;
    int64_t j = j0 + threadIdx.x;
    for (; j + t < j1; j += 2 * t) {
        const float4 p = a[j], q = b[j], r = a[j + t], s = b[j + t];
        x += (T)(sq(p.x, q.x) + sq(p.y, q.y) + sq(p.z, q.z) + sq(p.w, q.w));
        y += (T)(sl1(p.x, q.x) + sl1(p.y, q.y) + sl1(p.z, q.z) + sl1(p.w, q.w));
        x += (T)(sq(r.x, s.x) + sq(r.y, s.y) + sq(r.z, s.z) + sq(r.w, s.w));
        y += (T)(sl1(r.x, s.x) + sl1(r.y, s.y) + sl1(r.z, s.z) + sl1(r.w, s.w));
    }
    for (; j < j1; j += t) {
        const float4 p = a[j], q = b[j];
        x += (T)(sq(p.x, q.x) + sq(p.y, q.y) + sq(p.z, q.z) + sq(p.w, q.w));
        y += (T)(sl1(p.x, q.x) + sl1(p.y, q.y) + sl1(p.z, q.z) + sl1(p.w, q.w));
    }
    double dx = (double)x, dy = (double)y;
    block_sum(dx, dy);
    if (threadIdx.x == 0)
        ws[blockIdx.x] = Acc2{dx, dy};
}

// one input, the same bytes (2 x kN floats) read as one stream: what reading costs alone
__global__ void one_stream(const float4 *__restrict__ a, int64_t n4, int64_t chunk4, Acc2 *ws) {
    float x = 0.0f;
    const int64_t j0 = (int64_t)blockIdx.x * chunk4, j1 = j0 + chunk4 < n4 ? j0 + chunk4 : n4, t = blockDim.x;
    for (int64_t j = j0 + threadIdx.x; j < j1; j += t) {
        const float4 p = a[j];
        x += p.x + p.y + p.z + p.w;
    }
    double dx = x, dy = 0.0;
    block_sum(dx, dy);
    if (threadIdx.x == 0)
        ws[blockIdx.x] = Acc2{dx, dy};
}

} // namespace

int main() {
    float *buf, *junk, *out;
    Acc2 *ws;
    const int64_t jn = 64LL << 20, pad = 4096 * 37; // pad: the second input off a power-of-two distance
    cudaMalloc(&buf, (2 * kN + pad) * sizeof(float));
    cudaMalloc(&junk, jn * sizeof(float));
    cudaMalloc(&out, 2 * sizeof(float));
    cudaMalloc(&ws, 65536 * sizeof(Acc2));
    cudaMemset(buf, 0, (2 * kN + pad) * sizeof(float));
    cudaMemset(junk, 0, jn * sizeof(float));
    const float *a = buf, *b = buf + kN, *b_off = buf + kN + pad;
    const double bytes = 2.0 * kN * sizeof(float);
    printf("two inputs of %lld floats (%.0f MB read)\n", (long long)kN, bytes / 1e6);
    auto row = [&](const char *name, float ms) { printf("%-58s %8.4f ms %8.1f GB/s\n", name, ms, bytes / ms / 1e6); };

    for (int64_t blocks : {2048LL, 1056LL, 4096LL, 8192LL}) {
        const int64_t chunk = (kN + blocks - 1) / blocks;
        char name[96];
        snprintf(name, sizeof name, "v0 expert today: %lld blocks x 256, scalar, double", (long long)blocks);
        row(name, timeit([&] { v0_rows<<<(unsigned)blocks, 256>>>(a, b, kN, chunk, ws); combine<<<1, 1024>>>(ws, blocks, out, kN); }, junk, jn));
        snprintf(name, sizeof name, "v0, second input off a power-of-two distance, %lld", (long long)blocks);
        row(name, timeit([&] { v0_rows<<<(unsigned)blocks, 256>>>(a, b_off, kN, chunk, ws); combine<<<1, 1024>>>(ws, blocks, out, kN); }, junk, jn));
        const int64_t n4 = kN / 4, chunk4 = (n4 + blocks - 1) / blocks;
        snprintf(name, sizeof name, "v1 float4, float per thread, %lld blocks", (long long)blocks);
        row(name, timeit([&] { v1_vec<float><<<(unsigned)blocks, 256>>>((const float4 *)a, (const float4 *)b, n4, chunk4, ws); combine<<<1, 1024>>>(ws, blocks, out, kN); }, junk, jn));
        snprintf(name, sizeof name, "v1 float4, double per thread, %lld blocks", (long long)blocks);
        row(name, timeit([&] { v1_vec<double><<<(unsigned)blocks, 256>>>((const float4 *)a, (const float4 *)b, n4, chunk4, ws); combine<<<1, 1024>>>(ws, blocks, out, kN); }, junk, jn));
        snprintf(name, sizeof name, "one stream of the same bytes, float4, %lld blocks", (long long)blocks);
        row(name, timeit([&] { one_stream<<<(unsigned)blocks, 256>>>((const float4 *)a, 2 * n4, (2 * n4 + blocks - 1) / blocks, ws); combine<<<1, 1024>>>(ws, blocks, out, kN); }, junk, jn));
    }
    row("cudaMemcpy device to device, 128 MiB (read + write)", timeit([&] { cudaMemcpyAsync((void *)b, a, kN * sizeof(float), cudaMemcpyDeviceToDevice); }, junk, jn));
    printf("status: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
