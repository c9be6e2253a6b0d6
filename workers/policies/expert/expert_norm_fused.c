/* expert_norm_fused.c: the cuda kernel of a layer norm's statistics fused with the elementwise
 * pass that reads them (planned by expert_plan_fuse.c). One block per group g (the B
 * contiguous elements normalised together): the block sums x and x*x in double precision as
 * expert_rows.c's statistics kernel does, writes mean[g] and rstd[g], then computes the pass over
 * the group's rows of the output (B / d3 rows of the last dimension, d3 dividing B), reading
 * the statistics from shared memory and every other input through its broadcast strides. The
 * group's input was just read by the same block, so the pass reads it from cache. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

/* the pass's inputs (stat leaves included, unread: the launch line passes every leaf) and the
 * broadcast geometry: "const float *e0, ..., int64_t s43" to declare (decl), "e0, ..., s43" to
 * pass */
static void pass_list(struct kf_buf *b, const struct kfx_step *st, bool decl) {
    for (int k = 0; k < st->ew_leaves; k++)
        kf_buf_printf(b, "%se%d, ", decl ? "const float *" : "", k);
    kf_buf_printf(b, decl ? "float *__restrict__ out, int64_t n, int64_t d1, int64_t d2, int64_t d3"
                          : "out, n, d1, d2, d3");
    for (int k = 0; k < st->ew_leaves; k++)
        for (int j = 0; j < 4; j++)
            kf_buf_printf(b, ", %ss%d%d", decl ? "int64_t " : "", k, j);
}

/* the fused pass's inputs as the float4 row pass (expert_ew.c) names them: a statistic leaf is
 * the value mu or rs of the group (value, KFX_MAX_LEAVES long), every other leaf a tensor eK */
static struct kfw_row4 pass_row4(const struct kfx_step *st, const char **value) {
    for (int k = 0; k < st->ew_leaves; k++)
        value[k] = st->ew_stat[k] == 1 ? "mu" : st->ew_stat[k] == 2 ? "rs" : NULL;
    return (struct kfw_row4){
        .n = st->ew_leaves, .value = value, .elem = "ew::kf_elem", .in = "e", .pad = 16};
}

static const char STATS[] =
    "static_assert(SPLIT > 0, \"expert_rows.c's header, unused here\");\n\n"
    "__global__ void __launch_bounds__(@T@) norm_rows(@IN@float *__restrict__ mean,\n"
    "        float *__restrict__ rstd, int64_t G, int64_t B, float eps, ";

static const char GROUP[] =
    ") {\n"
    "    __shared__ double2 part[32];\n"
    "    __shared__ float stat[2];\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    const int64_t per = B / d3;\n"
    "    const int len = (int)d3;\n"
    "    for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {\n"
    "        double2 s = make_double2(0.0, 0.0);\n"
    "        if (KF_ALIGNED && B % 4 == 0)\n"
    "            KF_MOMENTS_ADD4(s, g * B, B)\n"
    "        else\n"
    "            KF_MOMENTS_ADD(s, g * B, B)\n"
    "        for (int off = 16; off > 0; off >>= 1) {\n"
    "            s.x += __shfl_down_sync(0xffffffffu, s.x, off);\n"
    "            s.y += __shfl_down_sync(0xffffffffu, s.y, off);\n"
    "        }\n"
    "        if (lane == 0)\n"
    "            part[warp] = s;\n"
    "        __syncthreads();\n"
    "        if (threadIdx.x == 0) {\n"
    "            double2 a = make_double2(0.0, 0.0);\n"
    "            for (int w = 0; w < (int)((blockDim.x + 31) >> 5); ++w) {\n"
    "                a.x += part[w].x;\n"
    "                a.y += part[w].y;\n"
    "            }\n"
    "            const double m = B > 0 ? a.x / (double)B : 0.0;\n"
    "            if (STAT_MODE == 0) {\n"
    "                double var = B > 0 ? a.y / (double)B - m * m : 0.0;\n"
    "                var = var > 0.0 ? var : 0.0;\n"
    "                stat[0] = mean[g] = (float)m;\n"
    "                stat[1] = rstd[g] = kf_second(var, (double)B, eps);\n"
    "            } else {\n"
    "                stat[0] = mean[g] = (float)(STAT_MODE == 2 ? a.x : m);\n"
    "                stat[1] = 0.0f;\n"
    "            }\n"
    "        }\n"
    "        __syncthreads();\n"
    "        const float mu = stat[0], rs = stat[1];\n"
    "        (void)mu;\n"
    "        (void)rs;\n"
    "        for (int64_t r = g * per; r < (g + 1) * per; ++r) {\n"
    "            const int64_t i2 = r % d2, i1 = (r / d2) % d1, i0 = r / d2 / d1;\n";

void kfx_norm_fused_open(struct kf_buf *b, const struct kfx_step *st, int mode) {
    /* the statistics kernel's signature followed by the pass's (the launch line's order): a
     * norm's (inputs, mean, rstd, A, G, B, rep, eps) or a reduction's (inputs, its output,
     * outer, red, inner) */
    if (mode == 0) {
        kf_buf_printf(b, "extern \"C\" int @FN@(@IN@float *mean, float *rstd, int64_t A, "
                         "int64_t G, int64_t B,\n    int64_t rep, float eps, ");
        pass_list(b, st, true);
        kf_buf_printf(b, ") {\n");
    } else {
        kf_buf_printf(b, "extern \"C\" int @FN@(@IN@float *red_out, int64_t G, int64_t B, "
                         "int64_t inner,\n    ");
        pass_list(b, st, true);
        kf_buf_printf(b, ") {\n    float *mean = red_out, *rstd = nullptr;\n"
                         "    const int64_t A = 1, rep = inner;\n    const float eps = 0.0f;\n"
                         "    (void)eps;\n");
    }
}

/* The kernel for a group that is one row of B = 4 * B4 elements, at most K * blockDim.x float4:
 * the block loads the row once into registers (xrJ, four elements per float4: the raw inputs
 * when the pass reads all of them, else the statistics' prologue of them), sums it, takes a
 * layer norm's variance as the mean of squared deviations from those registers (two passes
 * over registers, none over memory), and writes the pass from them: the row is read from
 * memory once, and a held input is not read again at all. Sums are float: a row is at most
 * 32768 elements, summed in a tree of 16-element runs. */
static const char REG_HEAD[] =
    "__device__ __forceinline__ float block_sum(float v, float *part) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    for (int off = 16; off > 0; off >>= 1)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, off);\n"
    "    __syncthreads();\n"
    "    if (lane == 0)\n"
    "        part[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)((blockDim.x + 31) >> 5) ? part[lane] : 0.0f;\n"
    "    for (int off = 16; off > 0; off >>= 1)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, off);\n"
    "    return v;\n"
    "}\n\n"
    "template <int K>\n"
    "__global__ void __launch_bounds__(1024) norm_reg(@IN@float *__restrict__ mean,\n"
    "        float *__restrict__ rstd, int64_t G, int64_t B, float eps, ";

static const char REG_STATS[] =
    ") {\n"
    "    __shared__ float part[32];\n"
    "    const int64_t B4 = B / 4;\n"
    "    for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {\n"
    "        KF_XR_DECL\n"
    "        float s = 0.0f;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < K; ++k) {\n"
    "            const int64_t c = threadIdx.x + (int64_t)k * blockDim.x;\n"
    "            KF_XR_ZERO(k);\n"
    "            if (c < B4) {\n"
    "                KF_XR_SET(k, g * B4 + c);\n"
    "                const float4 u = KF_XR_PRO(k);\n"
    "                s += KF_SUM4(u);\n"
    "            }\n"
    "        }\n"
    "        s = block_sum(s, part);\n"
    "        const float mu = STAT_MODE == 2 ? s : B > 0 ? s / (float)B : 0.0f;\n"
    "        float rs = 0.0f;\n"
    "        if (STAT_MODE == 0) {\n"
    "            float q = 0.0f;\n"
    "#pragma unroll\n"
    "            for (int k = 0; k < K; ++k)\n"
    "                if (threadIdx.x + (int64_t)k * blockDim.x < B4) {\n"
    "                    const float4 u = KF_XR_PRO(k);\n"
    "                    const float4 d = make_float4(u.x - mu, u.y - mu, u.z - mu, u.w - mu);\n"
    "                    q += KF_SQ4(d);\n"
    "                }\n"
    "            q = block_sum(q, part);\n"
    "            rs = kf_second(B > 0 ? q / (float)B : 0.0f, (double)B, eps);\n"
    "        }\n"
    "        if (threadIdx.x == 0) {\n"
    "            mean[g] = mu;\n"
    "            if (STAT_MODE == 0)\n"
    "                rstd[g] = rs;\n"
    "        }\n"
    "        const int64_t r = g, i2 = r % d2, i1 = (r / d2) % d1, i0 = r / d2 / d1;\n";

/* The registers of the row kernel, into b: held (the pass reads every statistics input), the
 * raw float4 of each input inJ in xrJ[K] and KF_XR_PRO(k) the statistics' prologue of them
 * (kf_elem lane by lane); otherwise the prologue's value in xr0[K]. */
static void reg_holding(struct kf_buf *b, const struct kfx_step *st, bool held) {
    const int n = held ? st->n_leaves : 1;
    /* at most 8 float4 a thread in all (a 1024-thread block's 64 registers) */
    const int maxk = n == 1 ? 8 : n == 2 ? 4 : n <= 4 ? 2 : 1;
    kf_buf_printf(b, "constexpr int KF_XR_MAXK = %d; // float4 per thread per input\n", maxk);
    kf_buf_printf(b, "#define KF_XR_DECL float4 ");
    for (int j = 0; j < n; j++)
        kf_buf_printf(b, "%sxr%d[K]", j ? ", " : "", j);
    kf_buf_printf(b, ";\n#define KF_XR_ZERO(k) (");
    for (int j = 0; j < n; j++)
        kf_buf_printf(b, "xr%d[k] = ", j);
    kf_buf_printf(b, "make_float4(0.0f, 0.0f, 0.0f, 0.0f))\n#define KF_XR_SET(k, i4) (");
    if (!held)
        kf_buf_printf(b, "xr0[k] = KF_LOAD4(i4))\n#define KF_XR_PRO(k) xr0[k]\n\n");
    else {
        for (int j = 0; j < n; j++)
            kf_buf_printf(b, "%sxr%d[k] = reinterpret_cast<const float4 *>(in%d)[i4]",
                          j ? ", " : "", j, j);
        kf_buf_printf(b, ")\n#define KF_XR_PRO(k) make_float4(");
        for (const char *l = "xyzw"; *l; l++) {
            kf_buf_printf(b, "%skf_elem(", *l == 'x' ? "" : ", ");
            for (int j = 0; j < n; j++)
                kf_buf_printf(b, "%sxr%d[k].%c", j ? ", " : "", j, *l);
            kf_buf_printf(b, ")");
        }
        kf_buf_printf(b, ")\n\n");
    }
}

/* The register kernel (REG_HEAD, REG_STATS, then the pass over the held row) into b. */
static void reg_kernel(struct kf_buf *b, const struct kfx_step *st, const struct kfw_row4 *r) {
    bool held = false;
    for (int k = 0; k < st->ew_leaves; k++)
        held = held || st->ew_held[k];
    reg_holding(b, st, held);
    kf_buf_printf(b, "%s", REG_HEAD);
    pass_list(b, st, true);
    kf_buf_printf(b, "%s", REG_STATS);
    int bases = 0; /* leaves read at the row's coordinates: the only readers of i0, i1, i2 */
    for (int k = 0; k < st->ew_leaves; k++)
        if (r->value[k] == NULL && !st->ew_held[k]) {
            kf_buf_printf(b,
                          "        const float *__restrict__ p%d = e%d + i0 * s%d0 + i1 * s%d1 "
                          "+ i2 * s%d2;\n",
                          k, k, k, k, k);
            bases++;
        }
    if (bases == 0) /* every leaf held or a statistic (NetVLAD's normalize of a product) */
        kf_buf_printf(b, "        (void)i0;\n        (void)i1;\n        (void)i2;\n");
    for (int k = 0; k < st->ew_leaves; k++)
        kfw_row4_base(b, r, k);
    kf_buf_printf(b, "#pragma unroll\n        for (int k = 0; k < K; ++k) {\n"
                     "            const int64_t c = threadIdx.x + (int64_t)k * blockDim.x;\n"
                     "            if (c >= B4)\n                continue;\n");
    for (int k = 0; k < st->ew_leaves; k++)
        if (st->ew_held[k])
            kf_buf_printf(b, "            const float4 a%d = xr%d[k];\n", k, st->ew_held[k] - 1);
    kfw_row4_body(b, r, "reinterpret_cast<float4 *>(out + g * B)");
    kf_buf_printf(b, "        }\n    }\n}\n\n");
}

/* The launcher's branch to the register kernel: about REG_PER float4 per thread, more where
 * the row needs more than 1024 threads, fewer where it would get under 64. */
static const char REG_LAUNCH[] =
    "    if (REG_PER > 0 && v4 && KF_ALIGNED && d3 == B && B % 4 == 0 &&\n"
    "        B / 4 <= KF_XR_MAXK * 1024) {\n"
    "        const int64_t B4 = B / 4;\n"
    "        int k = REG_PER < KF_XR_MAXK ? REG_PER : KF_XR_MAXK;\n"
    "        while (k < KF_XR_MAXK && (B4 + k - 1) / k > 1024)\n"
    "            k *= 2;\n"
    "        while (k > 1 && (B4 + k - 1) / k < 64)\n"
    "            k /= 2;\n"
    "        const unsigned t = (unsigned)(((B4 + k - 1) / k + 31) / 32 * 32);\n"
    "        if (k == 1)\n"
    "            norm_reg<1><<<blocks, t, 0, 0>>>(@ARGS@mean, rstd, G, B, eps, @PASS@);\n"
    "        else if (k == 2)\n"
    "            norm_reg<KF_XR_MAXK < 2 ? KF_XR_MAXK : 2><<<blocks, t, 0, 0>>>(\n"
    "                @ARGS@mean, rstd, G, B, eps, @PASS@);\n"
    "        else if (k == 4)\n"
    "            norm_reg<KF_XR_MAXK < 4 ? KF_XR_MAXK : 4><<<blocks, t, 0, 0>>>(\n"
    "                @ARGS@mean, rstd, G, B, eps, @PASS@);\n"
    "        else\n"
    "            norm_reg<KF_XR_MAXK><<<blocks, t, 0, 0>>>(@ARGS@mean, rstd, G, B, eps, @PASS@);\n"
    "        return (int)cudaGetLastError();\n"
    "    }\n";

/* REG_LAUNCH with the pass's argument list in place of @PASS@, into b. */
static void reg_launch(struct kf_buf *b, const struct kfx_step *st) {
    for (const char *q = REG_LAUNCH; *q;) {
        if (strncmp(q, "@PASS@", 6) == 0) {
            pass_list(b, st, false);
            q += 6;
        } else {
            kf_buf_append(b, q, 1);
            q++;
        }
    }
}

char *kfx_norm_fused_tmpl(const struct kfx_step *st, int reg) {
    const char *value[KFX_MAX_LEAVES];
    const struct kfw_row4 r = pass_row4(st, value);
    struct kfw_row4 held = r;
    held.held = st->ew_held;
    held.pad = 8;
    struct kf_buf b = {0};
    kf_buf_printf(&b, "namespace ew {\n");
    kfw_ew_elem(&b, st->ew_body, st->ew_leaves, "__device__ __forceinline__");
    /* 0: a norm's mean and 1/std; 1: a mean; 2: a sum (the reduction's one value, as mean) */
    int mode = st->kind == KFX_MOMENTS ? 0 : strcmp(st->op, "sum") == 0 ? 2 : 1;
    kf_buf_printf(
        &b, "} // namespace ew\n\nconstexpr int STAT_MODE = %d;\nconstexpr int REG_PER = %d;\n\n",
        mode, reg);
    reg_kernel(&b, st, &held);
    kf_buf_printf(&b, "%s", STATS);
    pass_list(&b, st, true);
    kf_buf_printf(&b, ", bool v4%s", GROUP);
    for (int k = 0; k < st->ew_leaves; k++)
        if (value[k] == NULL)
            kf_buf_printf(&b,
                          "            const float *__restrict__ p%d = e%d + i0 * s%d0 + i1 * s%d1 "
                          "+ i2 * s%d2;\n",
                          k, k, k, k, k);
    kf_buf_printf(&b, "            float *__restrict__ o = out + r * d3;\n            if (v4) {\n");
    for (int k = 0; k < st->ew_leaves; k++)
        kfw_row4_base(&b, &r, k);
    kf_buf_printf(&b,
                  "                for (int c = threadIdx.x; c < len / 4; c += blockDim.x) {\n");
    kfw_row4_body(&b, &r, "reinterpret_cast<float4 *>(o)");
    kf_buf_printf(&b, "                }\n            } else {\n#pragma unroll 4\n"
                      "                for (int c = threadIdx.x; c < len; c += blockDim.x)\n"
                      "                    o[c] = ew::kf_elem(");
    for (int k = 0; k < st->ew_leaves; k++) {
        if (value[k])
            kf_buf_printf(&b, "%s%s", k ? ", " : "", value[k]);
        else
            kf_buf_printf(&b, "%sp%d[c * s%d3]", k ? ", " : "", k, k);
    }
    kf_buf_printf(&b, ");\n            }\n        }\n        __syncthreads();\n    }\n}\n\n"
                      "} // namespace\n\n");
    kfx_norm_fused_open(&b, st, mode);
    kf_buf_printf(
        &b, "    if (G <= 0)\n        return G < 0;\n"
            "    // the plan's contract: contiguous groups of whole rows covering the output\n"
            "    if (A != 1 || rep != 1 || d3 <= 0 || d3 > 0x7fffffff || B %% d3 != 0 || "
            "G * B != n)\n        return 2;\n"
            "    const unsigned blocks = (unsigned)(G < 65535 * 16 ? G : 65535 * 16);\n");
    kfw_row4_check(&b, &r, "v4", "d3 % 4 == 0");
    reg_launch(&b, st);
    kf_buf_printf(&b, "    norm_rows<<<blocks, @T@, 0, 0>>>(@ARGS@mean, rstd, G, B, eps, ");
    pass_list(&b, st, false);
    kf_buf_printf(&b, ", v4);\n    return (int)cudaGetLastError();\n}\n");
    return b.data;
}
