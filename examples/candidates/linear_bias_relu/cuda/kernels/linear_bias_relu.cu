// y = relu(x @ W^T + b) for the cuda backend: cuBLAS SGEMM with CUBLAS_DEFAULT_MATH (full
// fp32, no TF32), then one pass that adds the bias and applies ReLU in place.
//
// Row-major y[M, N] = x[M, K] W[N, K]^T is column-major y^T = W x^T: W read as column-major
// (K x N) and transposed, x read as column-major (K x M).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

cublasHandle_t handle() {
    static cublasHandle_t h = nullptr;
    if (h == nullptr) {
        cublasHandle_t created = nullptr;
        if (cublasCreate(&created) != CUBLAS_STATUS_SUCCESS)
            return nullptr;
        if (cublasSetMathMode(created, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(created);
            return nullptr;
        }
        h = created;
    }
    return h;
}

constexpr int kCublasError = 1000; // + cublasStatus_t, to tell them from CUDA errors

__device__ __forceinline__ float relu(float v) {
    return v < 0.0f ? 0.0f : v;
} // NaN stays NaN

__global__ void bias_relu_vec4(float4 *__restrict__ y, const float4 *__restrict__ b, int64_t n4,
                               int64_t total4) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total4;
         i += stride) {
        const float4 bb = b[i % n4];
        float4 v = y[i];
        v.x = relu(v.x + bb.x);
        v.y = relu(v.y + bb.y);
        v.z = relu(v.z + bb.z);
        v.w = relu(v.w + bb.w);
        y[i] = v;
    }
}

__global__ void bias_relu_scalar(float *__restrict__ y, const float *__restrict__ b, int64_t n,
                                 int64_t total) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        y[i] = relu(y[i] + b[i % n]);
    }
}

constexpr int kThreads = 256;

unsigned int blocks_for(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned int>(b < (int64_t{1} << 20) ? b : (int64_t{1} << 20));
}

bool aligned16(const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

extern "C" int linear_bias_relu_f32(const float *x, const float *w, const float *bias, float *y,
                                    int64_t m, int64_t k, int64_t n) {
    if (m < 0 || k < 0 || n < 0)
        return (int)cudaErrorInvalidValue;
    if (m == 0 || n == 0)
        return (int)cudaGetLastError();
    if (k == 0) {
        const cudaError_t e = cudaMemsetAsync(y, 0, sizeof(float) * m * n, 0);
        if (e != cudaSuccess)
            return (int)e;
    } else {
        cublasHandle_t h = handle();
        if (h == nullptr)
            return kCublasError + (int)CUBLAS_STATUS_NOT_INITIALIZED;
        cublasStatus_t st = cublasSetStream(h, 0);
        if (st != CUBLAS_STATUS_SUCCESS)
            return kCublasError + (int)st;
        const float one = 1.0f, zero = 0.0f;
        st = cublasSgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, x, k, &zero, y, n);
        if (st != CUBLAS_STATUS_SUCCESS)
            return kCublasError + (int)st;
    }
    const int64_t total = m * n;
    if (n % 4 == 0 && aligned16(y) && aligned16(bias)) {
        bias_relu_vec4<<<blocks_for(total / 4), kThreads, 0, 0>>>(
            reinterpret_cast<float4 *>(y), reinterpret_cast<const float4 *>(bias), n / 4,
            total / 4);
    } else {
        bias_relu_scalar<<<blocks_for(total), kThreads, 0, 0>>>(y, bias, n, total);
    }
    return (int)cudaGetLastError();
}
