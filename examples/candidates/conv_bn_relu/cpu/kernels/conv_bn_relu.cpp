// Conv2d (stride 1, zero padding) + BatchNorm2d with batch statistics + ReLU, NCHW, for the
// cpu backend.
//
// 1. Convolution per image as im2col + a packed SGEMM (images split across cores). The conv
//    bias is not added: training-mode BatchNorm subtracts the per-channel batch mean, which
//    removes any per-channel constant exactly, so it cannot change the result.
// 2. Per-channel sum and sum of squares in double (channels split across cores) into stats.
// 3. y = relu((y - mean) * gamma / sqrt(var + eps) + beta), in place (planes split across cores).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// ---- single-threaded packed SGEMM (BLIS-style loops, GCC vector extensions) ----
//
// C[M, N] = A[M, K] * B[K, N] (+ bias[N]) (then ReLU), all row-major. B is either row-major
// (B[k][n] = b[k * ldb + n]) or given transposed (B[k][n] = b[n * ldb + k], nn.Linear's weight).
// Blocks: a KC x NC slice of B is packed into NR-wide panels (L2/L3), an MC x KC slice of A into
// MR-tall panels (L2); the micro-kernel keeps an MR x NR tile of C in vector registers and
// streams one A panel and one B panel (L1). Accumulation is plain fp32 FMA, as in BLAS.
namespace gemm {

#if defined(__AVX512F__)
constexpr int VW = 16;
#elif defined(__AVX__)
constexpr int VW = 8;
#else
constexpr int VW = 4;
#endif
typedef float vec __attribute__((vector_size(VW * sizeof(float))));

constexpr int MR = 6;
constexpr int NR = 2 * VW;
constexpr int64_t KC = 256;
constexpr int64_t MC = 16 * MR;
constexpr int64_t NC = 64 * NR;

inline vec vload(const float *p) {
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void vstore(float *p, vec v) {
    std::memcpy(p, &v, sizeof v);
}

// A growable 64-byte aligned scratch buffer, one per thread, kept across calls.
struct Scratch {
    float *p = nullptr;
    size_t cap = 0;
    ~Scratch() {
        std::free(p);
    }
    float *get(size_t n) {
        if (n > cap) {
            std::free(p);
            const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
            p = static_cast<float *>(std::aligned_alloc(64, bytes));
            cap = p ? n : 0;
        }
        return p;
    }
};

void pack_a(int64_t mc, int64_t kc, const float *a, int64_t lda, float *pa) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR, pa += MR * kc) {
        const int64_t rows = std::min<int64_t>(MR, mc - i0);
        for (int64_t p = 0; p < kc; ++p) {
            for (int64_t i = 0; i < MR; ++i)
                pa[p * MR + i] = i < rows ? a[(i0 + i) * lda + p] : 0.0f;
        }
    }
}

void pack_b(int64_t kc, int64_t nc, const float *b, int64_t ldb, bool trans, float *pb) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR, pb += NR * kc) {
        const int64_t cols = std::min<int64_t>(NR, nc - j0);
        if (!trans) {
            for (int64_t p = 0; p < kc; ++p) {
                const float *src = b + p * ldb + j0;
                float *dst = pb + p * NR;
                for (int64_t j = 0; j < NR; ++j)
                    dst[j] = j < cols ? src[j] : 0.0f;
            }
        } else {
            for (int64_t j = 0; j < NR; ++j) {
                const float *src = b + (j0 + j) * ldb;
                for (int64_t p = 0; p < kc; ++p)
                    pb[p * NR + j] = j < cols ? src[p] : 0.0f;
            }
        }
    }
}

// C tile (mr x nr at c, leading dimension ldc) = or += A panel * B panel; on the last K block
// the bias (indexed by column, already offset to the tile) and ReLU are applied.
void micro(int64_t kc, const float *__restrict pa, const float *__restrict pb, float *__restrict c,
           int64_t ldc, int64_t mr, int64_t nr, bool first, bool last, const float *bias,
           bool relu) {
    vec acc[MR][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
        acc[i][0] = acc[i][1] = vec{};
    for (int64_t p = 0; p < kc; ++p, pa += MR, pb += NR) {
        const vec b0 = vload(pb);
        const vec b1 = vload(pb + VW);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            acc[i][0] += pa[i] * b0;
            acc[i][1] += pa[i] * b1;
        }
    }
    const vec zero = vec{};
    if (mr == MR && nr == NR) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            float *ci = c + i * ldc;
            vec v0 = acc[i][0], v1 = acc[i][1];
            if (!first) {
                v0 += vload(ci);
                v1 += vload(ci + VW);
            }
            if (last && bias) {
                v0 += vload(bias);
                v1 += vload(bias + VW);
            }
            if (last && relu) {
                v0 = v0 < zero ? zero : v0;
                v1 = v1 < zero ? zero : v1;
            }
            vstore(ci, v0);
            vstore(ci + VW, v1);
        }
        return;
    }
    float tile[MR][NR];
    for (int i = 0; i < MR; ++i) {
        vstore(tile[i], acc[i][0]);
        vstore(tile[i] + VW, acc[i][1]);
    }
    for (int64_t i = 0; i < mr; ++i) {
        for (int64_t j = 0; j < nr; ++j) {
            float v = tile[i][j];
            if (!first)
                v += c[i * ldc + j];
            if (last && bias)
                v += bias[j];
            if (last && relu)
                v = v < 0.0f ? 0.0f : v;
            c[i * ldc + j] = v;
        }
    }
}

void sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda, const float *b,
           int64_t ldb, bool trans_b, float *c, int64_t ldc, const float *bias, bool relu) {
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; ++i) {
            for (int64_t j = 0; j < N; ++j) {
                float v = bias ? bias[j] : 0.0f;
                c[i * ldc + j] = relu && v < 0.0f ? 0.0f : v;
            }
        }
        return;
    }
    thread_local Scratch abuf, bbuf;
    float *pa = abuf.get(MC * KC);
    float *pb = bbuf.get(KC * NC);
    if (!pa || !pb)
        std::abort();
    for (int64_t jc = 0; jc < N; jc += NC) {
        const int64_t nc = std::min(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = std::min(KC, K - pc);
            const bool first = pc == 0, last = pc + kc == K;
            pack_b(kc, nc, trans_b ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, trans_b, pb);
            for (int64_t ic = 0; ic < M; ic += MC) {
                const int64_t mc = std::min(MC, M - ic);
                pack_a(mc, kc, a + ic * lda + pc, lda, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        micro(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc,
                              std::min<int64_t>(MR, mc - ir), std::min<int64_t>(NR, nc - jr), first,
                              last, bias ? bias + jc + jr : nullptr, relu);
                    }
                }
            }
        }
    }
}

// Splits the rows of C across the OpenMP threads; each runs its own sgemm on its block.
void sgemm_parallel(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda, const float *b,
                    int64_t ldb, bool trans_b, float *c, int64_t ldc, const float *bias,
                    bool relu) {
#pragma omp parallel
    {
        const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
        const int64_t chunk = ((M + nth - 1) / nth + MR - 1) / MR * MR;
        const int64_t i0 = tid * chunk;
        if (i0 < M) {
            sgemm(std::min(chunk, M - i0), N, K, a + i0 * lda, lda, b, ldb, trans_b, c + i0 * ldc,
                  ldc, bias, relu);
        }
    }
}

} // namespace gemm

namespace {

// col[(ci * kh + i) * kw + j][oh * wo + ow] = x[ci][oh + i - ph][ow + j - pw], 0 outside.
void im2col(const float *x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t ph,
            int64_t pw, int64_t ho, int64_t wo, float *col) {
    for (int64_t ci = 0; ci < c; ++ci) {
        for (int64_t i = 0; i < kh; ++i) {
            for (int64_t j = 0; j < kw; ++j) {
                float *dst = col + ((ci * kh + i) * kw + j) * ho * wo;
                // Output columns whose input column ow + j - pw lies in [0, w).
                const int64_t lo = std::clamp<int64_t>(pw - j, 0, wo);
                const int64_t hi = std::clamp<int64_t>(w + pw - j, lo, wo);
                for (int64_t oh = 0; oh < ho; ++oh) {
                    float *d = dst + oh * wo;
                    const int64_t ih = oh + i - ph;
                    if (ih < 0 || ih >= h) {
                        std::memset(d, 0, sizeof(float) * wo);
                        continue;
                    }
                    const float *s = x + (ci * h + ih) * w + (j - pw);
                    for (int64_t ow = 0; ow < lo; ++ow)
                        d[ow] = 0.0f;
                    for (int64_t ow = lo; ow < hi; ++ow)
                        d[ow] = s[ow];
                    for (int64_t ow = hi; ow < wo; ++ow)
                        d[ow] = 0.0f;
                }
            }
        }
    }
}

} // namespace

extern "C" int conv_bn_relu_f32(const float *x, const float *weight, const float *gamma,
                                const float *beta, float *y, double *stats, int64_t n, int64_t c,
                                int64_t h, int64_t w, int64_t oc, int64_t kh, int64_t kw,
                                int64_t ph, int64_t pw, float eps) {
    if (n <= 0 || c <= 0 || oc <= 0 || kh <= 0 || kw <= 0 || ph < 0 || pw < 0)
        return 1;
    const int64_t ho = h + 2 * ph - kh + 1, wo = w + 2 * pw - kw + 1;
    if (ho <= 0 || wo <= 0)
        return 2;
    const int64_t hw = ho * wo, ckk = c * kh * kw;
    int failed = 0;
#pragma omp parallel
    {
        thread_local gemm::Scratch colbuf;
        float *col = colbuf.get(static_cast<size_t>(ckk * hw));
        if (!col) {
#pragma omp atomic write
            failed = 3;
        }
#pragma omp for schedule(static)
        for (int64_t img = 0; img < n; ++img) {
            if (!col)
                continue;
            im2col(x + img * c * h * w, c, h, w, kh, kw, ph, pw, ho, wo, col);
            gemm::sgemm(oc, hw, ckk, weight, ckk, col, hw, false, y + img * oc * hw, hw, nullptr,
                        false);
        }
#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < oc; ++ch) {
            double s = 0.0, q = 0.0;
            for (int64_t img = 0; img < n; ++img) {
                const float *p = y + (img * oc + ch) * hw;
#pragma omp simd reduction(+ : s, q)
                for (int64_t i = 0; i < hw; ++i) {
                    const double v = p[i];
                    s += v;
                    q += v * v;
                }
            }
            stats[ch] = s;
            stats[oc + ch] = q;
        }
#pragma omp for schedule(static)
        for (int64_t plane = 0; plane < n * oc; ++plane) {
            const int64_t ch = plane % oc;
            const double cnt = static_cast<double>(n * hw);
            const double mean_d = stats[ch] / cnt;
            const double var = std::max(stats[oc + ch] / cnt - mean_d * mean_d, 0.0);
            const float mean = static_cast<float>(mean_d);
            const float scale =
                static_cast<float>(gamma[ch] / std::sqrt(var + static_cast<double>(eps)));
            const float shift = beta[ch];
            float *p = y + plane * hw;
#pragma omp simd
            for (int64_t i = 0; i < hw; ++i) {
                const float v = (p[i] - mean) * scale + shift;
                p[i] = v < 0.0f ? 0.0f : v;
            }
        }
    }
    return failed;
}
