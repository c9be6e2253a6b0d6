// y = relu(x @ W^T + b) for the cpu backend: a packed, register-blocked SGEMM that reads
// nn.Linear's (out, in) weight transposed while packing and applies bias and ReLU in the
// micro-kernel's store; rows of y split across cores with OpenMP.
#include <omp.h>

#include <algorithm>
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

extern "C" int linear_bias_relu_f32(const float *x, const float *w, const float *bias, float *y,
                                    int64_t m, int64_t k, int64_t n) {
    if (m < 0 || k < 0 || n < 0)
        return 1;
    gemm::sgemm_parallel(m, n, k, x, k, w, k, true, y, n, bias, true);
    return 0;
}
