// Exact GELU, y = 0.5 * x * (1 + erf(x / sqrt(2))), for the cpu backend.
//
// std::erf does not vectorise, so erf comes from Abramowitz & Stegun 7.1.26 (absolute error
// below 1.5e-7) written as erfc(|z|) = t * poly(t) * exp(-z^2), with a branch-free exp: the
// loop compiles to AVX/AVX-512 code and OpenMP splits it across cores.
#include <cstdint>
#include <cstring>

namespace {

inline float exp_f(float x) {
    x = x < -88.0f ? -88.0f : (x > 88.0f ? 88.0f : x);
    // n = round(x / ln2) with the 1.5 * 2^23 trick (floor does not vectorise without fast-math).
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    // 2^n through the exponent bits; n = -127 gives +0.0.
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

inline float gelu(float x) {
    const float z = (x < 0.0f ? -x : x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    const float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float erfc_z = poly * exp_f(-z * z); // erfc(|z|)
    const float one_plus_erf = x >= 0.0f ? 2.0f - erfc_z : erfc_z;
    return 0.5f * x * one_plus_erf;
}

} // namespace

extern "C" int gelu_f32(const float *__restrict x, float *__restrict y, int64_t n) {
    if (n < 0)
        return 1;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
        y[i] = gelu(x[i]);
    return 0;
}
