// Row softmax for the cpu backend: rows split across cores (OpenMP), each row in three
// vectorised sweeps (max with 8 independent accumulators, exp and sum, scale) while it sits
// in L1/L2.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

// exp(x) for x <= 0 (larger x are not handled), branch-free so that loops calling it vectorise;
// ~1.5 ulp, 0 below -88. n = round(x / ln2) comes from adding 1.5 * 2^23, whose low bits then
// hold n, so 2^n is that sum's bit pattern shifted into the exponent field.
inline float exp_nonpos(float x) {
    x = x < -88.0f ? -88.0f : x; // NaN stays NaN
    const float shifted = x * 1.44269504088896341f + 12582912.0f;
    const float n = shifted - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    bits = (bits << 23) + (127u << 23); // (n + 127) << 23; n = -127 gives +0.0
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

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

// Max of x[0, n) (-inf for n = 0).
inline float row_max(const float *__restrict x, int64_t n) {
    const v8f neg_inf = v8f{} - INFINITY;
    v8f a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
        a[k] = neg_inf;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const v8f v = load8(x + i + 8 * k);
            a[k] = v > a[k] ? v : a[k];
        }
    }
    for (; i + 8 <= n; i += 8) {
        const v8f v = load8(x + i);
        a[0] = v > a[0] ? v : a[0];
    }
#pragma GCC unroll 8
    for (int k = 1; k < 8; ++k)
        a[0] = a[k] > a[0] ? a[k] : a[0];
    float m = hmax8(a[0]);
    for (; i < n; ++i)
        m = x[i] > m ? x[i] : m;
    return m;
}

} // namespace

// 512-bit vectors where the CPU has them (-march=native may prefer 256): exp is compute bound.
extern "C" __attribute__((target("prefer-vector-width=512"))) int
softmax_rows_f32(const float *__restrict x, float *__restrict y, int64_t rows, int64_t cols) {
    if (rows < 0 || cols < 0)
        return 1;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float *__restrict xr = x + r * cols;
        float *__restrict yr = y + r * cols;
        const float m = row_max(xr, cols);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < cols; ++j) {
            const float e = exp_nonpos(xr[j] - m);
            yr[j] = e;
            s += e;
        }
        const float inv = 1.0f / s;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j)
            yr[j] *= inv;
    }
    return 0;
}
