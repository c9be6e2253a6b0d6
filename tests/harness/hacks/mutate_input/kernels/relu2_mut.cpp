#include <cstdint>

// Writes the result to y and also scribbles the result over the input x.
extern "C" int relu2_and_clobber(float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] > 0.0f ? 2.0f * x[i] : 0.0f;
        x[i] = y[i];
    }
    return 0;
}
