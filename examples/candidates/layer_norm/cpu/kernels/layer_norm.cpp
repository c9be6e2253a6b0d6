// LayerNorm over the last dimension for the cpu backend: rows split across cores (OpenMP);
// mean, then variance as the mean of (x - mean)^2 (no E[x^2] - mean^2 cancellation), each with
// 8 independent vector accumulators, then one sweep that normalises and applies weight and bias.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

// Row reductions with 8 independent vector accumulators (GCC vector extensions; 8 floats each,
// split into SSE halves where AVX is missing). `omp simd reduction` keeps a single accumulator,
// whose add latency, not memory, then bounds the loop.
typedef float v8f __attribute__((vector_size(32)));

inline v8f load8(const float *p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline float hsum8(v8f v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

inline float hmax8(v8f v) {
    float m = v[0];
    for (int j = 1; j < 8; ++j)
        m = v[j] > m ? v[j] : m;
    return m;
}

// Sum of x[0, n).
inline float row_sum(const float *__restrict x, int64_t n) {
    v8f a[8] = {};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
            a[k] += load8(x + i + 8 * k);
    }
    for (; i + 8 <= n; i += 8)
        a[0] += load8(x + i);
    float s = hsum8(((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])));
    for (; i < n; ++i)
        s += x[i];
    return s;
}

// Sum of (x[i] - c)^2 over [0, n).
inline float row_sq_dev(const float *__restrict x, int64_t n, float c) {
    v8f a[8] = {};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const v8f d = load8(x + i + 8 * k) - c;
            a[k] += d * d;
        }
    }
    for (; i + 8 <= n; i += 8) {
        const v8f d = load8(x + i) - c;
        a[0] += d * d;
    }
    float s = hsum8(((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])));
    for (; i < n; ++i)
        s += (x[i] - c) * (x[i] - c);
    return s;
}

} // namespace

extern "C" int layer_norm_f32(const float *__restrict x, const float *__restrict w,
                              const float *__restrict b, float *__restrict y, int64_t rows,
                              int64_t cols, float eps) {
    if (rows < 0 || cols <= 0)
        return rows == 0 ? 0 : 1;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float *__restrict xr = x + r * cols;
        float *__restrict yr = y + r * cols;
        const float mean = row_sum(xr, cols) / static_cast<float>(cols);
        const float var = row_sq_dev(xr, cols, mean) / static_cast<float>(cols);
        const float rstd = 1.0f / std::sqrt(var + eps);
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j)
            yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
    return 0;
}
