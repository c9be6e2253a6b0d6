#include <cstdint>
#include <cstring>
// Each row's sum of x * 1000 with every product cut to 10 bits of mantissa (TF32-like) before a
// double accumulation: far less accurate than float32 arithmetic, a near miss everywhere.
static float tf32(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b &= 0xffffe000u;
    std::memcpy(&v, &b, 4);
    return v;
}
extern "C" int row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)tf32(tf32(x[r * cols + j]) * 1000.0f);
        y[r] = (float)s;
    }
    return 0;
}
