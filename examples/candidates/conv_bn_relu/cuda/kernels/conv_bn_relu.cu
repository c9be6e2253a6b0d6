// Conv2d (stride 1, zero padding) + BatchNorm2d with batch statistics + ReLU, NCHW, for the
// cuda backend.
//
// 1. Convolution through cuDNN into y, math type CUDNN_FMA_MATH (plain fp32 FMA: no TF32), the
//    algorithm from cuDNN's heuristics restricted to FMA-math entries, cached per shape with
//    its workspace. The conv bias is not added: training-mode BatchNorm subtracts the
//    per-channel batch mean, which removes any per-channel constant exactly.
// 2. Per-channel sum and sum of squares of y, accumulated in double, into stats (2 * OC):
//    one block per (plane chunk), block reduction, one double atomicAdd per channel and block.
// 3. y = relu((y - mean) * gamma / sqrt(var + eps) + beta) in place, float4 where possible.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>

namespace {

constexpr int kCudnnError = 2000; // + cudnnStatus_t, to tell them from CUDA errors
constexpr int kThreads = 256;
constexpr int64_t kChunk = 16384; // elements of one (image, channel) plane per block

struct ConvPlan {
    bool ready = false;
    int64_t n = -1, c = -1, h = -1, w = -1, oc = -1, kh = -1, kw = -1, ph = -1, pw = -1;
    cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
    cudnnFilterDescriptor_t wd = nullptr;
    cudnnConvolutionDescriptor_t cd = nullptr;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_bytes = 0;
    void *ws = nullptr;
    size_t ws_cap = 0;
};

cudnnHandle_t g_handle = nullptr;
ConvPlan g_plan;

#define KF_CUDNN(call)                                                                             \
    do {                                                                                           \
        const cudnnStatus_t st_ = (call);                                                          \
        if (st_ != CUDNN_STATUS_SUCCESS)                                                           \
            return kCudnnError + (int)st_;                                                         \
    } while (0)

int prepare(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t kh, int64_t kw,
            int64_t ph, int64_t pw) {
    ConvPlan &p = g_plan;
    if (g_handle == nullptr) {
        KF_CUDNN(cudnnCreate(&g_handle));
        KF_CUDNN(cudnnCreateTensorDescriptor(&p.xd));
        KF_CUDNN(cudnnCreateTensorDescriptor(&p.yd));
        KF_CUDNN(cudnnCreateFilterDescriptor(&p.wd));
        KF_CUDNN(cudnnCreateConvolutionDescriptor(&p.cd));
    }
    KF_CUDNN(cudnnSetStream(g_handle, 0));
    if (p.ready && p.n == n && p.c == c && p.h == h && p.w == w && p.oc == oc && p.kh == kh &&
        p.kw == kw && p.ph == ph && p.pw == pw) {
        return 0;
    }
    p.ready = false;
    const int64_t ho = h + 2 * ph - kh + 1, wo = w + 2 * pw - kw + 1;
    KF_CUDNN(cudnnSetTensor4dDescriptor(p.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n, (int)c,
                                        (int)h, (int)w));
    KF_CUDNN(cudnnSetFilter4dDescriptor(p.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)oc, (int)c,
                                        (int)kh, (int)kw));
    KF_CUDNN(cudnnSetConvolution2dDescriptor(p.cd, (int)ph, (int)pw, 1, 1, 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KF_CUDNN(cudnnSetConvolutionMathType(p.cd, CUDNN_FMA_MATH));
    KF_CUDNN(cudnnSetTensor4dDescriptor(p.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n, (int)oc,
                                        (int)ho, (int)wo));

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    KF_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
        g_handle, p.xd, p.wd, p.cd, p.yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    p.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; // always supported, needs no workspace
    for (int i = 0; i < returned; ++i) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
            p.algo = perf[i].algo;
            break;
        }
    }
    KF_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(g_handle, p.xd, p.wd, p.cd, p.yd, p.algo,
                                                     &p.ws_bytes));
    if (p.ws_bytes > p.ws_cap) {
        if (p.ws != nullptr)
            cudaFree(p.ws);
        p.ws = nullptr;
        p.ws_cap = 0;
        const cudaError_t e = cudaMalloc(&p.ws, p.ws_bytes);
        if (e != cudaSuccess)
            return (int)e;
        p.ws_cap = p.ws_bytes;
    }
    p.n = n, p.c = c, p.h = h, p.w = w, p.oc = oc, p.kh = kh, p.kw = kw, p.ph = ph, p.pw = pw;
    p.ready = true;
    return 0;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// grid.x = n * oc planes, grid.y = chunks of kChunk elements of a plane.
__global__ void channel_stats(const float *__restrict__ y, double *__restrict__ stats, int64_t oc,
                              int64_t hw, bool vec) {
    __shared__ double sh_s[kThreads / 32], sh_q[kThreads / 32];
    const int64_t plane = blockIdx.x;
    const int64_t ch = plane % oc;
    const int64_t begin = static_cast<int64_t>(blockIdx.y) * kChunk;
    const int64_t end = begin + kChunk < hw ? begin + kChunk : hw;
    const float *p = y + plane * hw;
    double s = 0.0, q = 0.0;
    if (vec) { // hw % 4 == 0, so begin and end are multiples of 4
        const float4 *p4 = reinterpret_cast<const float4 *>(p);
        for (int64_t i = begin / 4 + threadIdx.x; i < end / 4; i += kThreads) {
            const float4 v = p4[i];
            s += static_cast<double>(v.x) + v.y + v.z + v.w;
            q += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
                 static_cast<double>(v.z) * v.z + static_cast<double>(v.w) * v.w;
        }
    } else {
        for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
            const double v = p[i];
            s += v;
            q += v * v;
        }
    }
    s = warp_sum(s);
    q = warp_sum(q);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sh_s[warp] = s;
        sh_q[warp] = q;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double ts = 0.0, tq = 0.0;
#pragma unroll
        for (int i = 0; i < kThreads / 32; ++i) {
            ts += sh_s[i];
            tq += sh_q[i];
        }
        atomicAdd(stats + ch, ts);
        atomicAdd(stats + oc + ch, tq);
    }
}

__device__ __forceinline__ float bn_relu(float v, float mean, float scale, float shift) {
    const float o = (v - mean) * scale + shift;
    return o < 0.0f ? 0.0f : o;
}

__global__ void normalize_relu(float *__restrict__ y, const double *__restrict__ stats,
                               const float *__restrict__ gamma, const float *__restrict__ beta,
                               int64_t oc, int64_t hw, double count, float eps, bool vec) {
    const int64_t plane = blockIdx.x;
    const int64_t ch = plane % oc;
    const double mean_d = stats[ch] / count;
    double var = stats[oc + ch] / count - mean_d * mean_d;
    var = var > 0.0 ? var : 0.0;
    const float mean = static_cast<float>(mean_d);
    const float scale =
        static_cast<float>(static_cast<double>(gamma[ch]) / sqrt(var + static_cast<double>(eps)));
    const float shift = beta[ch];
    const int64_t begin = static_cast<int64_t>(blockIdx.y) * kChunk;
    const int64_t end = begin + kChunk < hw ? begin + kChunk : hw;
    float *p = y + plane * hw;
    if (vec) {
        float4 *p4 = reinterpret_cast<float4 *>(p);
        for (int64_t i = begin / 4 + threadIdx.x; i < end / 4; i += kThreads) {
            float4 v = p4[i];
            v.x = bn_relu(v.x, mean, scale, shift);
            v.y = bn_relu(v.y, mean, scale, shift);
            v.z = bn_relu(v.z, mean, scale, shift);
            v.w = bn_relu(v.w, mean, scale, shift);
            p4[i] = v;
        }
    } else {
        for (int64_t i = begin + threadIdx.x; i < end; i += kThreads)
            p[i] = bn_relu(p[i], mean, scale, shift);
    }
}

} // namespace

extern "C" int conv_bn_relu_f32(const float *x, const float *weight, const float *gamma,
                                const float *beta, float *y, double *stats, int64_t n, int64_t c,
                                int64_t h, int64_t w, int64_t oc, int64_t kh, int64_t kw,
                                int64_t ph, int64_t pw, float eps) {
    if (n <= 0 || c <= 0 || oc <= 0 || kh <= 0 || kw <= 0 || ph < 0 || pw < 0)
        return (int)cudaErrorInvalidValue;
    const int64_t ho = h + 2 * ph - kh + 1, wo = w + 2 * pw - kw + 1;
    if (ho <= 0 || wo <= 0)
        return (int)cudaErrorInvalidValue;
    const int64_t hw = ho * wo;
    const int64_t planes = n * oc, chunks = (hw + kChunk - 1) / kChunk;
    if (planes > 0x7fffffff || chunks > 65535)
        return (int)cudaErrorInvalidValue;

    const int rc = prepare(n, c, h, w, oc, kh, kw, ph, pw);
    if (rc != 0)
        return rc;
    const float one = 1.0f, zero = 0.0f;
    KF_CUDNN(cudnnConvolutionForward(g_handle, &one, g_plan.xd, x, g_plan.wd, weight, g_plan.cd,
                                     g_plan.algo, g_plan.ws, g_plan.ws_bytes, &zero, g_plan.yd, y));

    cudaError_t e = cudaMemsetAsync(stats, 0, sizeof(double) * 2 * oc, 0);
    if (e != cudaSuccess)
        return (int)e;
    const bool vec = hw % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    const dim3 grid(static_cast<unsigned int>(planes), static_cast<unsigned int>(chunks));
    channel_stats<<<grid, kThreads, 0, 0>>>(y, stats, oc, hw, vec);
    normalize_relu<<<grid, kThreads, 0, 0>>>(y, stats, gamma, beta, oc, hw,
                                             static_cast<double>(n * hw), eps, vec);
    return (int)cudaGetLastError();
}
