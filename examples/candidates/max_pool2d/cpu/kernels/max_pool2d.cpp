// 2D max pooling (no padding, dilation 1, floor mode) over NCHW for the cpu backend.
// Planes x output rows are split across cores; the 2x2 / stride 2 case has a dedicated
// vectorisable loop. NaN propagates as in PyTorch.
#include <cstdint>

namespace {

inline float max_nan(float a, float b) {
    return (b > a || b != b) ? b : a;
}

} // namespace

extern "C" int max_pool2d_f32(const float *__restrict x, float *__restrict y, int64_t planes,
                              int64_t h, int64_t w, int64_t ho, int64_t wo, int64_t k, int64_t s) {
    if (planes < 0 || ho < 0 || wo < 0 || k <= 0 || s <= 0)
        return 1;
    if ((ho > 0 && (ho - 1) * s + k > h) || (wo > 0 && (wo - 1) * s + k > w))
        return 2;
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < planes * ho; ++item) {
        const int64_t p = item / ho;
        const int64_t oh = item % ho;
        const float *__restrict in = x + (p * h + oh * s) * w;
        float *__restrict out = y + (p * ho + oh) * wo;
        if (k == 2 && s == 2) {
            const float *__restrict r0 = in;
            const float *__restrict r1 = in + w;
#pragma omp simd
            for (int64_t ow = 0; ow < wo; ++ow) {
                const float a = max_nan(r0[2 * ow], r0[2 * ow + 1]);
                const float b = max_nan(r1[2 * ow], r1[2 * ow + 1]);
                out[ow] = max_nan(a, b);
            }
        } else {
            for (int64_t ow = 0; ow < wo; ++ow) {
                float m = in[ow * s];
                for (int64_t i = 0; i < k; ++i) {
                    for (int64_t j = 0; j < k; ++j)
                        m = max_nan(m, in[i * w + ow * s + j]);
                }
                out[ow] = m;
            }
        }
    }
    return 0;
}
