#include <cstdint>

extern "C" int matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (int64_t p = 0; p < k; ++p) s += (double)a[i * k + p] * (double)b[p * n + j];
            c[i * n + j] = (float)s;
        }
    }
    return 0;
}
