#include <cstdint>
// Each row's running product, in order, in float.
extern "C" int cumprod_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float p = 1.0f;
        for (int64_t j = 0; j < cols; ++j) {
            p *= x[r * cols + j];
            y[r * cols + j] = p;
        }
    }
    return 0;
}
