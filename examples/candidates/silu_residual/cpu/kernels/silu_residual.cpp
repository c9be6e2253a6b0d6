// y = x * sigmoid(x) + r for the cpu backend: one fused, vectorised pass split across cores.
#include <cstdint>
#include <cstring>

namespace {

// exp for float, branch-free so that the loop calling it vectorises (~1.5 ulp).
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

} // namespace

// 512-bit vectors where the CPU has them (-march=native may prefer 256): exp is compute bound.
extern "C" __attribute__((target("prefer-vector-width=512"))) int
silu_residual_f32(const float *__restrict x, const float *__restrict r, float *__restrict y,
                  int64_t n) {
    if (n < 0)
        return 1;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v * (1.0f / (1.0f + exp_f(-v))) + r[i];
    }
    return 0;
}
