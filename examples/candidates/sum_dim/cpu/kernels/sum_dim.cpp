// Sum over the middle axis of a tensor seen as (outer, reduce, inner), for the cpu backend.
//
// inner > 1: each work item owns a strip of up to kStrip columns of one outer slice and adds
// the `reduce` rows into a local accumulator (contiguous, vectorised); the items are split
// across cores. inner == 1: each outer row is a contiguous vectorised reduction.
// Sums are accumulated in double (free here: the loop is bound by memory), so the result is
// the correctly rounded sum up to ~1e-16 relative, whatever the input distribution.
#include <algorithm>
#include <cstdint>

namespace {
constexpr int64_t kStrip = 512;
}

extern "C" int sum_dim_f32(const float *__restrict x, float *__restrict y, int64_t outer,
                           int64_t reduce, int64_t inner) {
    if (outer < 0 || reduce < 0 || inner < 0)
        return 1;
    if (inner == 1) {
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < outer; ++o) {
            const float *__restrict xr = x + o * reduce;
            double s = 0.0;
#pragma omp simd reduction(+ : s)
            for (int64_t r = 0; r < reduce; ++r)
                s += xr[r];
            y[o] = static_cast<float>(s);
        }
        return 0;
    }
    const int64_t strips = (inner + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < outer * strips; ++item) {
        const int64_t o = item / strips;
        const int64_t i0 = (item % strips) * kStrip;
        const int64_t len = std::min(kStrip, inner - i0);
        double acc[kStrip];
        for (int64_t i = 0; i < len; ++i)
            acc[i] = 0.0;
        const float *__restrict base = x + o * reduce * inner + i0;
        for (int64_t r = 0; r < reduce; ++r) {
            const float *__restrict row = base + r * inner;
#pragma omp simd
            for (int64_t i = 0; i < len; ++i)
                acc[i] += row[i];
        }
        float *__restrict out = y + o * inner + i0;
        for (int64_t i = 0; i < len; ++i)
            out[i] = static_cast<float>(acc[i]);
    }
    return 0;
}
