/* expert_gather.c: the kernels of KFX_GATHER steps (planned by expert_plan_gather.c). Each
 * output element is one thread's (cuda, a grid-stride loop) or one iteration's (cpu, OpenMP):
 * its coordinates along the step's g_nd dims, each dim's rule (enum kfx_grule) turning its
 * coordinate into the input's, and the value read: one element (the fill where a constant
 * pad's coordinate falls outside), the weighted taps of linear interpolation (nested as
 * PyTorch's upsample kernels nest them: along the first dim, the weighted sum of the next's),
 * or a window's mean or maximum (an adaptive pool's). The input's element j is KF_LOAD(j): the
 * elementwise chain before the gather evaluated there (its prologue), when it has one. Shapes,
 * scales and offsets are constants of the source: a plan holds for one shape; the launcher
 * refuses an input of another size. The value code is shared by the two backends (kf_at). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

/* A float constant exactly (the scales are floats computed as PyTorch computes them). */
static const char *flt(double v, char *out, size_t n) {
    if (isnan(v))
        snprintf(out, n, "NAN");
    else
        snprintf(out, n, "((float)%.17g)", v);
    return out;
}

static bool has_rule(const struct kfx_step *st, enum kfx_grule r) {
    for (int d = 0; d < st->g_nd; d++)
        if (st->g_rule[d] == r)
            return true;
    return false;
}

/* The coordinates oD of output element idx, and each dim's input coordinate (iD), taps
 * (aD, aD + pD weighted wD_0, wD_1) or window [sD, eD). */
static void rules(struct kf_buf *b, const struct kfx_step *st) {
    char f[48];
    kf_buf_printf(b, "    int64_t r = idx;\n");
    for (int d = st->g_nd - 1; d > 0; d--)
        kf_buf_printf(b, "    const int64_t o%d = r %% %lldLL;\n    r /= %lldLL;\n", d,
                      st->g_out[d], st->g_out[d]);
    kf_buf_printf(b, "    const int64_t o0 = r;\n");
    if (has_rule(st, KFX_G_CONST) || has_rule(st, KFX_G_INDEX))
        kf_buf_printf(b, "    bool ok = true;\n");
    for (int d = 0; d < st->g_nd; d++) {
        const long long n = st->g_n[d], lo = st->g_lo[d], out = st->g_out[d];
        switch ((enum kfx_grule)st->g_rule[d]) {
        case KFX_G_SAME:
            kf_buf_printf(b, "    const int64_t i%d = o%d;\n", d, d);
            break;
        case KFX_G_CONST:
            kf_buf_printf(b, "    const int64_t i%d = o%d - %lldLL;\n", d, d, lo);
            kf_buf_printf(b, "    ok = ok && i%d >= 0 && i%d < %lldLL;\n", d, d, n);
            break;
        case KFX_G_REFLECT:
            kf_buf_printf(b,
                          "    int64_t i%d = o%d - %lldLL;\n    i%d = i%d < 0 ? -i%d : i%d;\n"
                          "    i%d = i%d >= %lldLL ? %lldLL - i%d : i%d;\n",
                          d, d, lo, d, d, d, d, d, d, n, 2 * (n - 1), d, d);
            break;
        case KFX_G_REPLICATE:
            kf_buf_printf(b,
                          "    int64_t i%d = o%d - %lldLL;\n"
                          "    i%d = i%d < 0 ? 0 : (i%d >= %lldLL ? %lldLL : i%d);\n",
                          d, d, lo, d, d, d, n, n - 1, d);
            break;
        case KFX_G_CIRCULAR:
            kf_buf_printf(b,
                          "    int64_t i%d = (o%d - %lldLL) %% %lldLL;\n"
                          "    i%d = i%d < 0 ? i%d + %lldLL : i%d;\n",
                          d, d, lo, n, d, d, d, n, d);
            break;
        case KFX_G_FLIP:
            kf_buf_printf(b, "    const int64_t i%d = %lldLL - o%d;\n", d, n - 1, d);
            break;
        case KFX_G_NEAREST:
            kf_buf_printf(b,
                          "    int64_t i%d = (int64_t)floorf((float)o%d * %s);\n"
                          "    i%d = i%d < %lldLL ? i%d : %lldLL;\n",
                          d, d, flt(st->g_scale[d], f, sizeof(f)), d, d, n - 1, d, n - 1);
            break;
        case KFX_G_NEAREST_EXACT: /* (o + 0.5) * scale in double, as PyTorch writes it */
            kf_buf_printf(b,
                          "    int64_t i%d = (int64_t)floorf((float)(((double)o%d + 0.5) * "
                          "(double)%s));\n    i%d = i%d < %lldLL ? i%d : %lldLL;\n",
                          d, d, flt(st->g_scale[d], f, sizeof(f)), d, d, n - 1, d, n - 1);
            break;
        case KFX_G_LINEAR:
            if (lo) /* align_corners */
                kf_buf_printf(b, "    const float x%d = %s * (float)o%d;\n", d,
                              flt(st->g_scale[d], f, sizeof(f)), d);
            else
                kf_buf_printf(b,
                              "    float x%d = %s * ((float)o%d + 0.5f) - 0.5f;\n"
                              "    x%d = x%d < 0.0f ? 0.0f : x%d;\n",
                              d, flt(st->g_scale[d], f, sizeof(f)), d, d, d, d);
            kf_buf_printf(b,
                          "    const int64_t a%d = (int64_t)x%d, p%d = a%d < %lldLL ? 1 : 0;\n"
                          "    const float w%d_1 = x%d - (float)a%d, w%d_0 = 1.0f - w%d_1;\n",
                          d, d, d, d, n - 1, d, d, d, d, d);
            break;
        case KFX_G_INDEX:
            kf_buf_printf(b, "    const int64_t i%d = ix[idx];\n    (void)o%d;\n", d, d);
            kf_buf_printf(b, "    ok = ok && i%d >= 0 && i%d < %lldLL;\n", d, d, n);
            break;
        case KFX_G_MOD:
            kf_buf_printf(b, "    const int64_t i%d = o%d %% %lldLL;\n", d, d, n);
            break;
        case KFX_G_DIV:
            kf_buf_printf(b, "    const int64_t i%d = o%d / %lldLL;\n", d, d, lo);
            break;
        case KFX_G_WINDOW:
            kf_buf_printf(b,
                          "    const int64_t s%d = o%d * %lldLL / %lldLL, e%d = ((o%d + 1) * "
                          "%lldLL + %lldLL) / %lldLL;\n",
                          d, d, n, out, d, d, n, out - 1, out);
            break;
        }
    }
}

/* The offset of the element whose coordinates are iD, aD + tD * pD or jD by rule. */
static void offset(struct kf_buf *b, const struct kfx_step *st, const int *tap) {
    bool first = true;
    for (int d = 0; d < st->g_nd; d++) {
        const long long s = st->g_stride[d];
        kf_buf_printf(b, "%s", first ? "" : " + ");
        first = false;
        if (st->g_rule[d] == KFX_G_LINEAR && tap[d])
            kf_buf_printf(b, "(a%d + p%d) * %lldLL", d, d, s);
        else if (st->g_rule[d] == KFX_G_LINEAR)
            kf_buf_printf(b, "a%d * %lldLL", d, s);
        else if (st->g_rule[d] == KFX_G_WINDOW)
            kf_buf_printf(b, "j%d * %lldLL", d, s);
        else
            kf_buf_printf(b, "i%d * %lldLL", d, s);
    }
    if (first)
        kf_buf_printf(b, "0");
}

/* Linear taps from dim d on: w_d0 * (the rest at tap 0) + w_d1 * (the rest at tap 1). */
static void taps(struct kf_buf *b, const struct kfx_step *st, int d, int *tap) {
    while (d < st->g_nd && st->g_rule[d] != KFX_G_LINEAR)
        d++;
    if (d == st->g_nd) {
        kf_buf_printf(b, "KF_LOAD(");
        offset(b, st, tap);
        kf_buf_printf(b, ")");
        return;
    }
    for (int t = 0; t < 2; t++) {
        tap[d] = t;
        kf_buf_printf(b, "%sw%d_%d * (", t ? " + " : "", d, t);
        taps(b, st, d + 1, tap);
        kf_buf_printf(b, ")");
    }
    tap[d] = 0;
}

/* KF_LOAD(j): the input's element j, read through the step's prologue (kf_elem over its
 * leaves in0.., expert_plan.c's kfx_prologue) when it has one, else in0[j]; the leaves'
 * parameters (@IN@ of kfx_rows_put) are kf_at's and the kernel's first. */
static void load(struct kf_buf *b, const struct kfx_step *st, const char *qual) {
    if (st->body == NULL) {
        kf_buf_printf(b, "#define KF_LOAD(j) in0[(j)]\n\n");
        return;
    }
    kfw_ew_elem(b, st->body, st->n_leaves, qual);
    kf_buf_printf(b, "\n");
    kfx_rows_load(b, st, false);
}

static void params(struct kf_buf *b, const struct kfx_step *st, bool decl) {
    if (st->body == NULL)
        kf_buf_printf(b, decl ? "const float *__restrict__ in0, " : "in0, ");
    else
        kfx_rows_put(b, decl ? "@IN@" : "@ARGS@", st, 0);
}

/* KF_FN float kf_at(leaves, idx): the value of output element idx. */
static void value_fn(struct kf_buf *b, const struct kfx_step *st) {
    int tap[KFX_MAX_DIMS] = {0};
    char f[48];
    kf_buf_printf(b, "KF_FN float kf_at(");
    params(b, st, true);
    kf_buf_printf(b, "%sint64_t idx) {\n",
                  has_rule(st, KFX_G_INDEX) ? "const int64_t *__restrict__ ix, " : "");
    rules(b, st);
    if (has_rule(st, KFX_G_WINDOW)) {
        const bool max = strcmp(st->op, "max") == 0;
        kf_buf_printf(b, "    float acc = %s;\n", max ? "-INFINITY" : "0.0f");
        int open = 0;
        for (int d = 0; d < st->g_nd; d++) /* the planner pairs windows with SAME dims only */
            if (st->g_rule[d] == KFX_G_WINDOW) {
                kf_buf_printf(b, "    for (int64_t j%d = s%d; j%d < e%d; ++j%d) {\n", d, d, d, d,
                              d);
                open++;
            }
        kf_buf_printf(b, "    const float v = KF_LOAD(");
        offset(b, st, tap);
        kf_buf_printf(b, max ? ");\n    acc = (v > acc || v != v) ? v : acc;\n"
                             : ");\n    acc += v;\n");
        while (open-- > 0)
            kf_buf_printf(b, "    }\n");
        if (!max)
            for (int d = 0; d < st->g_nd; d++)
                if (st->g_rule[d] == KFX_G_WINDOW)
                    kf_buf_printf(b, "    acc = acc / (float)(e%d - s%d);\n", d, d);
        kf_buf_printf(b, "    return acc;\n}\n\n");
        return;
    }
    if (has_rule(st, KFX_G_LINEAR)) {
        kf_buf_printf(b, "    return ");
        taps(b, st, 0, tap);
        kf_buf_printf(b, ";\n}\n\n");
        return;
    }
    if (has_rule(st, KFX_G_CONST) || has_rule(st, KFX_G_INDEX)) /* the fill, no read there */
        kf_buf_printf(b, "    return !ok ? %s : KF_LOAD(", flt(st->g_fill, f, sizeof(f)));
    else
        kf_buf_printf(b, "    return KF_LOAD(");
    offset(b, st, tap);
    kf_buf_printf(b, ");\n}\n\n");
}

static long long out_total(const struct kfx_step *st) {
    long long t = 1;
    for (int d = 0; d < st->g_nd; d++)
        t *= st->g_out[d];
    return t;
}

static char *cuda(const struct kfx_step *st, int v) {
    struct kf_buf b = {0};
    const int threads = v == 0 ? 256 : 512;
    const bool ix = has_rule(st, KFX_G_INDEX); /* torch.gather: the indices' pointer too */
    kf_buf_printf(&b,
                  "// kforge expert: %s, gather (%s) over %d dims, variant %d: a thread per "
                  "output element, %d threads a block.\n#include <cuda_runtime.h>\n"
                  "#include <cstdint>\n#include <math.h>\n\n#define KF_FN __device__ "
                  "__forceinline__\n\nnamespace {\n\n",
                  st->fn, st->op, st->g_nd, v, threads);
    load(&b, st, "__device__ __forceinline__");
    value_fn(&b, st);
    kf_buf_printf(&b, "__global__ void __launch_bounds__(%d) gather(", threads);
    params(&b, st, true);
    kf_buf_printf(&b,
                  "%sfloat *__restrict__ out, int64_t total) {\n"
                  "    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < "
                  "total;\n         idx += (int64_t)gridDim.x * blockDim.x)\n"
                  "        out[idx] = kf_at(",
                  ix ? "const int64_t *__restrict__ ix, " : "");
    params(&b, st, false);
    kf_buf_printf(&b, "%sidx);\n}\n\n} // namespace\n\nextern \"C\" int %s(", ix ? "ix, " : "",
                  st->fn);
    params(&b, st, true);
    kf_buf_printf(&b,
                  "%sfloat *out, int64_t numel) {\n"
                  "    if (numel != %lldLL)\n        return 1;\n"
                  "    const int64_t total = %lldLL;\n    if (total == 0)\n        return 0;\n"
                  "    int64_t blocks = (total + %d - 1) / %d;\n"
                  "    blocks = blocks < 1048576 ? blocks : 1048576;\n"
                  "    gather<<<(unsigned)blocks, %d, 0, 0>>>(",
                  ix ? "const int64_t *ix, " : "", st->g_numel, out_total(st), threads, threads,
                  threads);
    params(&b, st, false);
    kf_buf_printf(&b, "%sout, total);\n    return (int)cudaGetLastError();\n}\n", ix ? "ix, " : "");
    return b.data;
}

static char *cpu(const struct kfx_step *st) {
    struct kf_buf b = {0};
    const bool ix = has_rule(st, KFX_G_INDEX);
    kf_buf_printf(&b,
                  "// kforge expert: %s, gather (%s) over %d dims, variant 0: OpenMP over the "
                  "output's elements.\n#include <cstdint>\n#include <math.h>\n\n"
                  "#define KF_FN static inline\n\n",
                  st->fn, st->op, st->g_nd);
    load(&b, st, "static inline");
    value_fn(&b, st);
    kf_buf_printf(&b, "extern \"C\" int %s(", st->fn);
    params(&b, st, true);
    kf_buf_printf(&b,
                  "%sfloat *out, int64_t numel) {\n"
                  "    if (numel != %lldLL)\n        return 1;\n"
                  "#pragma omp parallel for schedule(static)\n"
                  "    for (int64_t idx = 0; idx < %lldLL; ++idx)\n"
                  "        out[idx] = kf_at(",
                  ix ? "const int64_t *ix, " : "", st->g_numel, out_total(st));
    params(&b, st, false);
    kf_buf_printf(&b, "%sidx);\n    return 0;\n}\n", ix ? "ix, " : "");
    return b.data;
}

char *kfx_gather_src(const struct kfx_step *st, const char *backend, int v) {
    const bool is_cuda = strcmp(backend, "cuda") == 0;
    if (v < 0 || v >= (is_cuda ? 2 : 1))
        return NULL;
    return is_cuda ? cuda(st, v) : cpu(st);
}
