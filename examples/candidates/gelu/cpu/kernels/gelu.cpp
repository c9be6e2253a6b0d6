// Exact GELU, y = 0.5 * x * (1 + erf(x / sqrt(2))), for the cpu backend.
//
// std::erf does not vectorise, so erfc(|x| / sqrt(2)) comes from Abramowitz & Stegun 7.1.26
// (absolute error below 1.5e-7; ATen's vectorised erf uses the same formula) with a branch-free
// exp, and GELU = x - h for x >= 0, h for x < 0, where h = 0.5 * x * erfc(|x| / sqrt(2)). The
// loop compiles to AVX-512 (or AVX2/SSE) code and OpenMP splits it across cores.
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

inline float gelu(float x) {
    const float z = std::fabs(x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    // A&S 7.1.26's polynomial, halved: half_poly * exp(-z^2) = 0.5 * erfc(z).
    const float half_poly =
        t * (0.127414796f +
             t * (-0.142248368f + t * (0.7107068705f + t * (-0.7265760135f + t * 0.5307027145f))));
    const float h = x * (half_poly * exp_nonpos(-z * z));
    return x >= 0.0f ? x - h : h;
}

} // namespace

// 512-bit vectors where the CPU has them (-march=native may prefer 256): the loop is compute bound.
extern "C" __attribute__((target("prefer-vector-width=512"))) int
gelu_f32(const float *__restrict x, float *__restrict y, int64_t n) {
    if (n < 0)
        return 1;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
        y[i] = gelu(x[i]);
    return 0;
}
