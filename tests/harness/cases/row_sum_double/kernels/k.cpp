#include <cstdint>
// Each row's sum of x * 1000 (each product rounded to float, as the task's multiply does),
// accumulated in double: more accurate than the float32 reference.
extern "C" int row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)(x[r * cols + j] * 1000.0f);
        y[r] = (float)s;
    }
    return 0;
}
