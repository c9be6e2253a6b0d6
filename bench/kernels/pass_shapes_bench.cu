// Microbenchmark (H200, through the device tool): launch shapes for the expert's flat
// elementwise pass and its column reduction, at the example tasks' sizes. Each time is the
// median of 10 launches after an L2 flush; cudaMemcpy of the same bytes is the baseline of the
// same run. Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 pass_shapes_bench.cu
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <type_traits>
#include <vector>

#include "bench_timing.cuh"

namespace {

__device__ __forceinline__ float leaky(float x) { return x > 0.0f ? x : 0.1f * x; }
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

template <int OP> __device__ __forceinline__ float elem(float x) { return OP ? gelu(x) : leaky(x); }

template <int OP> __device__ __forceinline__ float4 elem4(float4 a) {
    return make_float4(elem<OP>(a.x), elem<OP>(a.y), elem<OP>(a.z), elem<OP>(a.w));
}

// the expert's kf_vec4 today: a grid-stride loop, the grid capped at 65535 * 8 blocks
template <int OP> __global__ void ew_stride(const float4 *__restrict__ in, float4 *__restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        out[i] = elem4<OP>(in[i]);
}

// PER float4 per thread, all loads before the stores, one launch covering everything
template <int OP, int PER> __global__ void ew_flat(const float4 *__restrict__ in, float4 *__restrict__ out, int64_t n4) {
    const int64_t base = (int64_t)blockIdx.x * blockDim.x * PER + threadIdx.x;
    float4 a[PER];
#pragma unroll
    for (int p = 0; p < PER; p++) {
        const int64_t i = base + (int64_t)p * blockDim.x;
        if (i < n4)
            a[p] = in[i];
    }
#pragma unroll
    for (int p = 0; p < PER; p++) {
        const int64_t i = base + (int64_t)p * blockDim.x;
        if (i < n4)
            out[i] = elem4<OP>(a[p]);
    }
}

struct SumAcc {
    __device__ static double init() { return 0.0; }
    __device__ static double add(double a, float x) { return a + x; }
};
struct SumAccF {
    __device__ static float init() { return 0.0f; }
    __device__ static float add(float a, float x) { return a + x; }
};
struct MaxAcc {
    __device__ static float init() { return -FLT_MAX; }
    __device__ static float add(float a, float x) { return fmaxf(a, x); }
};

template <class A> __device__ __forceinline__ auto merge(decltype(A::init()) a, decltype(A::init()) b) {
    if constexpr (std::is_same_v<A, MaxAcc>)
        return fmaxf(a, b);
    else
        return a + b;
}

// the expert's cols today: 32 columns per block, scalar loads, the reduced axis split over SPLIT
template <class A, int SPLIT>
__global__ void cols1(const float *__restrict__ in, float *__restrict__ out, int64_t outer, int64_t red, int64_t inner) {
    using T = decltype(A::init());
    __shared__ T part[SPLIT][32];
    const int64_t i = (int64_t)blockIdx.x * 32 + threadIdx.x;
    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
        const int64_t base = o * red * inner + i;
        T a = A::init(), b = A::init();
        if (i < inner) {
            int64_t j = threadIdx.y;
            for (; j + SPLIT < red; j += 2 * SPLIT) {
                a = A::add(a, in[base + j * inner]);
                b = A::add(b, in[base + (j + SPLIT) * inner]);
            }
            for (; j < red; j += SPLIT)
                a = A::add(a, in[base + j * inner]);
        }
        a = merge<A>(a, b);
        part[threadIdx.y][threadIdx.x] = a;
        __syncthreads();
        if (threadIdx.y == 0 && i < inner) {
            for (int y = 1; y < SPLIT; ++y)
                a = merge<A>(a, part[y][threadIdx.x]);
            out[o * inner + i] = (float)a;
        }
        __syncthreads();
    }
}

// four adjacent columns per thread (float4), 128 columns per block
template <class A, int SPLIT>
__global__ void cols4(const float *__restrict__ in, float *__restrict__ out, int64_t outer, int64_t red, int64_t inner) {
    using T = decltype(A::init());
    __shared__ T part[SPLIT][32][4];
    const int64_t i = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 4;
    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
        const int64_t base = o * red * inner + i;
        T a[4] = {A::init(), A::init(), A::init(), A::init()};
        if (i < inner) {
            int64_t j = threadIdx.y;
            for (; j + SPLIT < red; j += 2 * SPLIT) {
                const float4 u = *reinterpret_cast<const float4 *>(in + base + j * inner);
                const float4 v = *reinterpret_cast<const float4 *>(in + base + (j + SPLIT) * inner);
                a[0] = A::add(A::add(a[0], u.x), v.x);
                a[1] = A::add(A::add(a[1], u.y), v.y);
                a[2] = A::add(A::add(a[2], u.z), v.z);
                a[3] = A::add(A::add(a[3], u.w), v.w);
            }
            for (; j < red; j += SPLIT) {
                const float4 u = *reinterpret_cast<const float4 *>(in + base + j * inner);
                a[0] = A::add(a[0], u.x);
                a[1] = A::add(a[1], u.y);
                a[2] = A::add(a[2], u.z);
                a[3] = A::add(a[3], u.w);
            }
        }
        for (int l = 0; l < 4; l++)
            part[threadIdx.y][threadIdx.x][l] = a[l];
        __syncthreads();
        if (threadIdx.y == 0 && i < inner) {
            float4 r;
            float *rp = &r.x;
            for (int l = 0; l < 4; l++) {
                T s = a[l];
                for (int y = 1; y < SPLIT; ++y)
                    s = merge<A>(s, part[y][threadIdx.x][l]);
                rp[l] = (float)s;
            }
            *reinterpret_cast<float4 *>(out + o * inner + i) = r;
        }
        __syncthreads();
    }
}

void report(const char *what, const char *name, float ms, double gb) {
    printf("%-14s %-34s %8.3f ms %7.0f GB/s %s\n", what, name, ms, gb / ms * 1e3,
           cudaGetLastError() == cudaSuccess ? "" : "CUDA ERROR");
}

template <int OP> void ew(const char *what, float *x, float *out, int64_t n, float *junk, int64_t jn) {
    const int64_t n4 = n / 4;
    const double gb = 2.0 * n * 4 / 1e9;
    const auto in4 = reinterpret_cast<const float4 *>(x);
    const auto out4 = reinterpret_cast<float4 *>(out);
    report(what, "memcpy", timeit([&] { cudaMemcpyAsync(out, x, n * 4, cudaMemcpyDeviceToDevice); }, junk, jn), gb);
    for (int t : {128, 256, 512}) {
        char name[64];
        int64_t blocks = std::min<int64_t>((n4 + t - 1) / t, 65535 * 8);
        snprintf(name, sizeof name, "stride cap t%d", t);
        report(what, name, timeit([&] { ew_stride<OP><<<(unsigned)blocks, t>>>(in4, out4, n4); }, junk, jn), gb);
        blocks = (n4 + t - 1) / t;
        snprintf(name, sizeof name, "stride nocap t%d", t);
        report(what, name, timeit([&] { ew_stride<OP><<<(unsigned)blocks, t>>>(in4, out4, n4); }, junk, jn), gb);
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        blocks = (int64_t)sms * (2048 / t);
        snprintf(name, sizeof name, "stride persistent t%d", t);
        report(what, name, timeit([&] { ew_stride<OP><<<(unsigned)blocks, t>>>(in4, out4, n4); }, junk, jn), gb);
        snprintf(name, sizeof name, "flat per2 t%d", t);
        report(what, name, timeit([&] { ew_flat<OP, 2><<<(unsigned)((n4 + 2 * t - 1) / (2 * t)), t>>>(in4, out4, n4); }, junk, jn), gb);
        snprintf(name, sizeof name, "flat per4 t%d", t);
        report(what, name, timeit([&] { ew_flat<OP, 4><<<(unsigned)((n4 + 4 * t - 1) / (4 * t)), t>>>(in4, out4, n4); }, junk, jn), gb);
    }
}

template <class A> void cols(const char *what, float *x, float *out, int64_t outer, int64_t red, int64_t inner, float *junk, int64_t jn) {
    const double gb = (double)outer * red * inner * 4 / 1e9;
    report(what, "memcpy (same bytes)", timeit([&] { cudaMemcpyAsync(out, x, outer * red * inner * 2, cudaMemcpyDeviceToDevice); }, junk, jn), gb);
    const unsigned gy = (unsigned)std::min<int64_t>(outer, 65535);
    report(what, "cols1 split8", timeit([&] { cols1<A, 8><<<dim3((unsigned)((inner + 31) / 32), gy), dim3(32, 8)>>>(x, out, outer, red, inner); }, junk, jn), gb);
    report(what, "cols1 split16", timeit([&] { cols1<A, 16><<<dim3((unsigned)((inner + 31) / 32), gy), dim3(32, 16)>>>(x, out, outer, red, inner); }, junk, jn), gb);
    report(what, "cols4 split4", timeit([&] { cols4<A, 4><<<dim3((unsigned)((inner + 127) / 128), gy), dim3(32, 4)>>>(x, out, outer, red, inner); }, junk, jn), gb);
    report(what, "cols4 split8", timeit([&] { cols4<A, 8><<<dim3((unsigned)((inner + 127) / 128), gy), dim3(32, 8)>>>(x, out, outer, red, inner); }, junk, jn), gb);
    report(what, "cols4 split16", timeit([&] { cols4<A, 16><<<dim3((unsigned)((inner + 127) / 128), gy), dim3(32, 16)>>>(x, out, outer, red, inner); }, junk, jn), gb);
}

} // namespace

int main() {
    float *junk;
    const int64_t jn = 64 << 20;
    cudaMalloc(&junk, jn * 4);
    cudaMemset(junk, 0, jn * 4);
    const int64_t n = 49152LL * 16384; // leaky_relu and gelu: 3 GiB in, 3 GiB out
    float *x, *out;
    cudaMalloc(&x, 2 * n * 4); // 6 GiB: the reductions read all of it
    cudaMalloc(&out, n * 4);
    cudaMemset(x, 0, 2 * n * 4);
    ew<0>("leaky_relu", x, out, n, junk, jn);
    ew<1>("gelu", x, out, n, junk, jn);
    // sum_dim (384, 256, 16384) over dim 1; amax_dim1 (48, 4096, 8192) over dim 1: 6 GiB in
    cols<SumAcc>("sum_dim f64", x, out, 384, 256, 16384, junk, jn);
    cols<SumAccF>("sum_dim f32", x, out, 384, 256, 16384, junk, jn);
    cols<MaxAcc>("amax_dim1", x, out, 48, 4096, 8192, junk, jn);
    cudaFree(x);
    cudaFree(out);
    cudaFree(junk);
    return 0;
}
