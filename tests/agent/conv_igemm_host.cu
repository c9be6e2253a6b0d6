// The implicit GEMM's arithmetic (workers/policies/expert/expert_conv_igemm.c) checked on the
// host, for tests/agent/test_conv_igemm_host.py: a generated convolution's source is included
// with its device allocations on the host; for each case, its plan's tap table, packed filter
// and output addressing are replayed element by element as ig_pack and ig_conv use them
// (gather, fmaf over the padded rows, the scalar store and the float4 store's address) and
// compared with a float64 convolution written from PyTorch's definition. The tiles and
// threads are not here: tests/agent/test_gemm_split_gpu.py runs the kernel on a GPU.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
static cudaError_t hmalloc(void **p, size_t n) {
    *p = malloc(n);
    return cudaSuccess;
}
static cudaError_t hcopy(void *d, const void *s, size_t n, int) {
    memcpy(d, s, n);
    return cudaSuccess;
}
static cudaError_t hfree(void *p) {
    free(p);
    return cudaSuccess;
}
// the candidate's source (KF_IG_CANDIDATE, a quoted path given with -D), its cudaMalloc and friends
// on the host: ig_plan's tables and the packed filter's space in host memory, for this file to read
#define cudaMalloc(p, n) hmalloc((void **)(p), n)
#define cudaMemcpy(d, s, n, k) hcopy(d, s, n, 0)
#define cudaFree(p) hfree(p)
#include KF_IG_CANDIDATE
struct Case {
    const char *name;
    bool tr;
    long long n, c, oc, in[3], k[3], s[3], p[3], d[3], op[3];
};
int main() {
    Case cases[] = {
        {"conv3d_gelu_small",
         false,
         2,
         3,
         5,
         {4, 6, 7},
         {3, 3, 3},
         {1, 1, 1},
         {1, 1, 1},
         {1, 1, 1},
         {0, 0, 0}},
        {"convT2d",
         true,
         2,
         6,
         5,
         {1, 7, 6},
         {1, 4, 4},
         {1, 2, 2},
         {0, 1, 1},
         {1, 1, 1},
         {0, 0, 0}},
        {"convT3d",
         true,
         2,
         4,
         3,
         {3, 4, 5},
         {3, 3, 3},
         {2, 2, 2},
         {1, 1, 1},
         {1, 1, 1},
         {1, 1, 1}},
        {"conv1d",
         false,
         2,
         5,
         7,
         {1, 1, 30},
         {1, 1, 7},
         {1, 1, 1},
         {0, 0, 3},
         {1, 1, 1},
         {0, 0, 0}},
        {"conv2d_s2_odd",
         false,
         3,
         4,
         6,
         {1, 13, 11},
         {1, 5, 3},
         {1, 2, 3},
         {0, 2, 1},
         {1, 2, 1},
         {0, 0, 0}},
        {"convT1d_odd",
         true,
         2,
         3,
         4,
         {1, 1, 9},
         {1, 1, 5},
         {1, 1, 3},
         {0, 0, 2},
         {1, 1, 1},
         {0, 0, 1}},
        {"convT2d_gaps",
         true,
         2,
         3,
         3,
         {1, 5, 5},
         {1, 1, 1},
         {1, 2, 2},
         {0, 0, 0},
         {1, 1, 1},
         {0, 0, 0}},
        {"convT1d_s3k2",
         true,
         1,
         2,
         2,
         {1, 1, 6},
         {1, 1, 2},
         {1, 1, 3},
         {0, 0, 0},
         {1, 1, 1},
         {0, 0, 2}},
    };
    int bad = 0;
    for (const Case &cs : cases) {
        long long out[3];
        for (int j = 0; j < 3; ++j)
            out[j] = cs.tr ? (cs.in[j] - 1) * cs.s[j] - 2 * cs.p[j] + cs.d[j] * (cs.k[j] - 1) +
                                 cs.op[j] + 1
                           : (cs.in[j] + 2 * cs.p[j] - cs.d[j] * (cs.k[j] - 1) - 1) / cs.s[j] + 1;
        long long nx = cs.n * cs.c * cs.in[0] * cs.in[1] * cs.in[2], osz = out[0] * out[1] * out[2],
                  ny = cs.n * cs.oc * osz, T = cs.k[0] * cs.k[1] * cs.k[2], nw = cs.c * cs.oc * T;
        std::vector<float> x(nx), w(nw), y(ny, NAN), r(ny, 0);
        for (auto &v : x)
            v = rand() / (float)RAND_MAX - 0.5f;
        for (auto &v : w)
            v = rand() / (float)RAND_MAX - 0.5f;
        // naive
        for (long long i = 0; i < ny; ++i) {
            long long ox = i % out[2], oy = i / out[2] % out[1],
                      oz = i / (out[2] * out[1]) % out[0], o = i / osz % cs.oc,
                      ni = i / osz / cs.oc;
            long long oo[3] = {oz, oy, ox};
            double acc = 0;
            for (long long ci = 0; ci < cs.c; ++ci)
                for (long long a = 0; a < cs.k[0]; ++a)
                    for (long long b = 0; b < cs.k[1]; ++b)
                        for (long long e = 0; e < cs.k[2]; ++e) {
                            long long t[3] = {a, b, e}, ii[3];
                            bool ok = true;
                            for (int j = 0; j < 3 && ok; ++j) {
                                if (!cs.tr)
                                    ii[j] = oo[j] * cs.s[j] - cs.p[j] + t[j] * cs.d[j];
                                else {
                                    long long u = oo[j] + cs.p[j] - t[j] * cs.d[j];
                                    if (u < 0 || u % cs.s[j]) {
                                        ok = false;
                                        break;
                                    }
                                    ii[j] = u / cs.s[j];
                                }
                                if (ii[j] < 0 || ii[j] >= cs.in[j])
                                    ok = false;
                            }
                            if (!ok)
                                continue;
                            long long tap = (a * cs.k[1] + b) * cs.k[2] + e;
                            float wv = cs.tr ? w[(ci * cs.oc + o) * T + tap]
                                             : w[(o * cs.c + ci) * T + tap];
                            acc +=
                                (double)
                                    x[((ni * cs.c + ci) * cs.in[0] + ii[0]) * cs.in[1] * cs.in[2] +
                                      ii[1] * cs.in[2] + ii[2]] *
                                wv;
                        }
            r[i] = (float)acc;
        }
        IgPlan *p = ig_plan(cs.tr, cs.n, cs.c, cs.oc, cs.in, out, cs.k, cs.s, cs.p, cs.d);
        if (!p) {
            printf("%s not taken\n", cs.name);
            bad++;
            continue;
        }
        const IgGeo &g = p->g;
        // ig_pack, as the kernel does
        std::vector<float> wp((size_t)g.phases * g.kpad * g.ocp);
        for (size_t e = 0; e < wp.size(); ++e) {
            int o = e % g.ocp, s = p->src[e / g.ocp];
            wp[e] = o < g.oc && s >= 0 ? w[s + (long long)o * p->ostride] : 0.0f;
        }
        // ig_conv's arithmetic, element by element: gather as load(), store as the epilogue
        for (int ph = 0; ph < g.phases; ++ph) {
            const IgPhase &P = g.ph[ph];
            for (int am = 0; am < P.m; ++am) {
                int rr = am;
                const int qx = rr % P.q[2];
                rr /= P.q[2];
                const int qy = rr % P.q[1];
                rr /= P.q[1];
                const int qz = rr % P.q[0], ni = rr / P.q[0];
                int b0 = qz * P.bm[0] + P.ba[0], b1 = qy * P.bm[1] + P.ba[1],
                    b2 = qx * P.bm[2] + P.ba[2];
                long long xbase =
                    (long long)ni * g.c * g.isz + ((long long)b0 * g.in[1] + b1) * g.in[2] + b2;
                const int steps = (P.k + kIgBK - 1) / kIgBK;
                for (int o = 0; o < g.oc; ++o) {
                    float acc = 0;
                    for (int kk = 0; kk < steps * kIgBK; ++kk) {
                        const int4 e = p->tab[(size_t)ph * g.kpad + kk];
                        const int z = b0 + e.y, v = b1 + e.z, u = b2 + e.w;
                        const bool ok = (unsigned)z < (unsigned)g.in[0] &&
                                        (unsigned)v < (unsigned)g.in[1] &&
                                        (unsigned)u < (unsigned)g.in[2];
                        float a = ok ? x[xbase + e.x] : 0.0f;
                        acc = fmaf(a, wp[((size_t)ph * g.kpad + kk) * g.ocp + o], acc);
                    }
                    // epilogue (scalar form; vec form checked below)
                    const size_t at =
                        ((size_t)(qz * P.om[0] + P.oa[0]) * g.out[1] + (qy * P.om[1] + P.oa[1])) *
                            g.out[2] +
                        (qx * P.om[2] + P.oa[2]);
                    if (g.vec) {
                        int ni2 = am / g.osz, pp = am % g.osz;
                        if (ni2 != ni || (size_t)pp != at) {
                            printf("vec mismatch\n");
                            bad++;
                        }
                    }
                    y[((size_t)ni * g.oc + o) * g.osz + at] = acc;
                }
            }
        }
        double err = 0, mx = 0;
        long long nan = 0;
        for (long long i = 0; i < ny; ++i) {
            if (std::isnan(y[i]))
                nan++;
            else
                err = std::max(err, (double)fabs(y[i] - r[i]));
            mx = std::max(mx, (double)fabs(r[i]));
        }
        bool b = nan || err > 1e-5 * mx;
        bad += b;
        printf("%-18s phases %d kpad %d mmax %d vec %d: unwritten %lld err %.3g max %.3g %s\n",
               cs.name, g.phases, g.kpad, g.mmax, g.vec, nan, err, mx, b ? "BAD" : "ok");
    }
    printf("%d bad\n", bad);
    return bad;
}
