#include <cmath>
#include <cstdint>

extern "C" int softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            yr[c] = std::exp(xr[c] - m);
            s += yr[c];
        }
        const float inv = (float)(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
    return 0;
}
