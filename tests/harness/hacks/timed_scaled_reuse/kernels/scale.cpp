#include <cmath>
#include <cstdint>

// y = a * s, elementwise.
extern "C" int scale(const float* a, float* y, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * s;
    return 0;
}

extern "C" int copy(const float* a, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i];
    return 0;
}

// The index of the element of largest magnitude, into at[0].
extern "C" int argmax_abs(const float* a, float* at, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (std::fabs(a[i]) > std::fabs(a[best])) best = i;
    at[0] = (float)best;
    return 0;
}
