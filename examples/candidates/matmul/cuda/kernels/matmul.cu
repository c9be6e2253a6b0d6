// fp32 matmul C = A @ B for the cuda backend through cuBLAS SGEMM, with CUBLAS_DEFAULT_MATH
// (full fp32: no TF32 tensor-core rounding). Row-major C = A B is column-major C^T = B^T A^T,
// so the operands are passed swapped and nothing is transposed.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

// Created once, lazily, on the device current at the first call.
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

} // namespace

extern "C" int matmul_f32(const float *a, const float *b, float *c, int64_t m, int64_t k,
                          int64_t n) {
    if (m < 0 || k < 0 || n < 0)
        return (int)cudaErrorInvalidValue;
    if (m == 0 || n == 0)
        return (int)cudaGetLastError();
    if (k == 0)
        return (int)cudaMemsetAsync(c, 0, sizeof(float) * m * n, 0);
    cublasHandle_t h = handle();
    if (h == nullptr)
        return kCublasError + (int)CUBLAS_STATUS_NOT_INITIALIZED;
    cublasStatus_t st = cublasSetStream(h, 0);
    if (st != CUBLAS_STATUS_SUCCESS)
        return kCublasError + (int)st;
    const float one = 1.0f, zero = 0.0f;
    st = cublasSgemm_64(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);
    if (st != CUBLAS_STATUS_SUCCESS)
        return kCublasError + (int)st;
    return (int)cudaGetLastError();
}
