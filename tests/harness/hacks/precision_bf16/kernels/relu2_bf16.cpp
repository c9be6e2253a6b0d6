#include <cstdint>
#include <cstring>

// Rounds a float to bfloat16 precision (keeps 8 bits of mantissa) by truncating the low 16 bits.
static inline float to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xFFFF0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

extern "C" int relu2_bf16(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = to_bf16(x[i]);
        y[i] = v > 0.0f ? 2.0f * v : 0.0f;
    }
    return 0;
}
