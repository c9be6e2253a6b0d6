/* expert_rows_cpu.c: the cpu kernels of reductions along a dimension, softmax and log-softmax
 * (expert_rows.c's KFX_REDUCE and KFX_SOFTMAX steps), over [outer, red, inner] with the step's
 * prologue read through KF_LOAD.
 *
 * The first cpu kernels kept one accumulator per output and walked its column down a stride of
 * inner, one element per step of a serial chain (an online softmax called expf twice per
 * element): on this machine softmax_rows took 9.74 ms against eager's 1.13 and amax_dim1 6.98
 * ms against 0.76 (bench/README.md). Here:
 * - rows (inner == 1): sums, products, maxima and minima are OpenMP simd reductions (their
 *   partial sums in double, as before; a NaN flag beside a maximum, since NaN wins as in
 *   PyTorch); softmax, log-softmax and logsumexp take two passes, the maximum and then the sum
 *   of kf_expf(x - max) (expert_cpu_math.c's vectorisable exp), softmax storing the exponentials
 *   on the way and scaling them by the sum's reciprocal;
 * - columns (inner > 1): tiles of up to 64 adjacent columns of one outer index, each of the red
 *   rows read in turn (contiguous), one accumulator per column, simd across the tile for the
 *   simple operators and the softmax family (its passes as in rows); arg-reductions and
 *   variances keep expert_rows.c's Acc per column. An arg-reduction along a row finds its
 *   extreme by a simd reduction (NaN first, as in PyTorch), then the first index holding it.
 * The caller has emitted kf_elem, KF_LOAD, Acc and its functions (acc_code), OutT and SCHED. */
#include <stdbool.h>
#include <string.h>

#include "buf.h"
#include "expert_plan.h"

/* One simple operator: its accumulator type, initial value, OpenMP reduction, update by x ($:
 * the accumulator's lvalue) and result (#: the NaN flag's). */
struct simple {
    const char *op, *type, *init, *red, *update, *fin;
    bool nan; /* a NaN flag beside the accumulator */
};

static const struct simple SIMPLE[] = {
    {"sum", "double", "0.0", "+", "$ += (double)x;", "(float)$", false},
    {"mean", "double", "0.0", "+", "$ += (double)x;", "(float)($ / (double)red)", false},
    {"prod", "double", "1.0", "*", "$ *= (double)x;", "(float)$", false},
    {"amax", "float", "-INFINITY", "max", "$ = x > $ ? x : $;", "# ? NAN : $", true},
    {"amin", "float", "INFINITY", "min", "$ = x < $ ? x : $;", "# ? NAN : $", true},
};

/* Appends s with $ and # replaced by v and n. */
static void subst(struct kf_buf *b, const char *s, const char *v, const char *n) {
    for (; *s; s++) {
        if (*s == '$')
            kf_buf_printf(b, "%s", v);
        else if (*s == '#')
            kf_buf_printf(b, "%s", n);
        else
            kf_buf_append(b, s, 1);
    }
}

static const char HEAD[] =
    "extern \"C\" int @FN@(@IN@OutT *out, int64_t outer, int64_t red, int64_t inner) {\n"
    "    if (outer < 0 || red < 0 || inner < 0)\n"
    "        return 1;\n"
    "    constexpr int64_t kTile = 64;\n"
    "    if (inner == 1) {\n"
    "#pragma omp parallel for schedule(SCHED)\n"
    "        for (int64_t o = 0; o < outer; ++o) {\n"
    "            const int64_t base = o * red;\n";

/* Between the rows' body and the columns' body. */
static const char MID[] = "        }\n"
                          "        return 0;\n"
                          "    }\n"
                          "    const int64_t tiles = (inner + kTile - 1) / kTile;\n"
                          "#pragma omp parallel for schedule(SCHED)\n"
                          "    for (int64_t t = 0; t < outer * tiles; ++t) {\n"
                          "        const int64_t o = t / tiles, i0 = t % tiles * kTile;\n"
                          "        const int64_t w = inner - i0 < kTile ? inner - i0 : kTile;\n"
                          "        const int64_t base = o * red * inner + i0;\n";

static const char TAIL[] = "    }\n    return 0;\n}\n";

static void simple_src(struct kf_buf *b, const struct simple *s) {
    /* rows */
    kf_buf_printf(b, "            %s v = %s;\n", s->type, s->init);
    if (s->nan)
        kf_buf_printf(b, "            int nan = 0;\n");
    kf_buf_printf(b, "#pragma omp simd reduction(%s : v)%s\n", s->red,
                  s->nan ? " reduction(| : nan)" : "");
    kf_buf_printf(b, "            for (int64_t j = 0; j < red; ++j) {\n"
                     "                const float x = KF_LOAD(base + j);\n                ");
    subst(b, s->update, "v", "nan");
    if (s->nan)
        kf_buf_printf(b, "\n                nan |= x != x;");
    kf_buf_printf(b, "\n            }\n            out[o] = ");
    subst(b, s->fin, "v", "nan");
    kf_buf_printf(b, ";\n%s", MID);
    /* columns */
    kf_buf_printf(b, "        %s v[kTile];\n", s->type);
    if (s->nan)
        kf_buf_printf(b, "        int nan[kTile];\n");
    kf_buf_printf(b,
                  "        for (int64_t i = 0; i < w; ++i) {\n            v[i] = %s;\n%s"
                  "        }\n"
                  "        for (int64_t j = 0; j < red; ++j) {\n"
                  "            const int64_t row = base + j * inner;\n"
                  "#pragma omp simd\n"
                  "            for (int64_t i = 0; i < w; ++i) {\n"
                  "                const float x = KF_LOAD(row + i);\n                ",
                  s->init, s->nan ? "            nan[i] = 0;\n" : "");
    subst(b, s->update, "v[i]", "nan[i]");
    if (s->nan)
        kf_buf_printf(b, "\n                nan[i] |= x != x;");
    kf_buf_printf(b, "\n            }\n        }\n"
                     "        for (int64_t i = 0; i < w; ++i)\n"
                     "            out[o * inner + i0 + i] = ");
    subst(b, s->fin, "v[i]", "nan[i]");
    kf_buf_printf(b, ";\n%s", TAIL);
}

/* softmax, log_softmax, logsumexp: rows in two passes; columns through Acc. */
static const char EXP_ROWS[] = "            float m = -INFINITY;\n"
                               "            int nan = 0;\n"
                               "#pragma omp simd reduction(max : m) reduction(| : nan)\n"
                               "            for (int64_t j = 0; j < red; ++j) {\n"
                               "                const float x = KF_LOAD(base + j);\n"
                               "                m = x > m ? x : m;\n"
                               "                nan |= x != x;\n"
                               "            }\n"
                               "            m = nan ? NAN : m;\n"
                               "            double s = 0.0;\n";

static void exp_src(struct kf_buf *b, const char *op) {
    kf_buf_printf(b, "%s", EXP_ROWS);
    if (!strcmp(op, "softmax"))
        kf_buf_printf(b, "#pragma omp simd reduction(+ : s)\n"
                         "            for (int64_t j = 0; j < red; ++j) {\n"
                         "                const float e = kf_expf(KF_LOAD(base + j) - m);\n"
                         "                out[base + j] = e;\n"
                         "                s += e;\n"
                         "            }\n"
                         "            const float r = (float)(1.0 / s);\n"
                         "#pragma omp simd\n"
                         "            for (int64_t j = 0; j < red; ++j)\n"
                         "                out[base + j] *= r;\n");
    else
        kf_buf_printf(b, "#pragma omp simd reduction(+ : s)\n"
                         "            for (int64_t j = 0; j < red; ++j)\n"
                         "                s += kf_expf(KF_LOAD(base + j) - m);\n");
    if (!strcmp(op, "log_softmax"))
        kf_buf_printf(b, "            const float ls = std::log((float)s);\n"
                         "#pragma omp simd\n"
                         "            for (int64_t j = 0; j < red; ++j)\n"
                         "                out[base + j] = KF_LOAD(base + j) - m - ls;\n");
    else if (!strcmp(op, "logsumexp")) /* an infinite maximum is the result, as in PyTorch */
        kf_buf_printf(b, "            out[o] = m == INFINITY || m == -INFINITY ? m : m + "
                         "std::log((float)s);\n");
}

/* softmax, log_softmax, logsumexp over columns: the tile's maxima, then its sums of
 * kf_expf(x - max), each pass along the tile's rows with simd across its columns. */
static void exp_cols(struct kf_buf *b, const char *op) {
    kf_buf_printf(b, "        float m[kTile];\n"
                     "        int nan[kTile];\n"
                     "        double s[kTile];\n"
                     "        for (int64_t i = 0; i < w; ++i) {\n"
                     "            m[i] = -INFINITY;\n"
                     "            nan[i] = 0;\n"
                     "            s[i] = 0.0;\n"
                     "        }\n"
                     "        for (int64_t j = 0; j < red; ++j) {\n"
                     "            const int64_t row = base + j * inner;\n"
                     "#pragma omp simd\n"
                     "            for (int64_t i = 0; i < w; ++i) {\n"
                     "                const float x = KF_LOAD(row + i);\n"
                     "                m[i] = x > m[i] ? x : m[i];\n"
                     "                nan[i] |= x != x;\n"
                     "            }\n"
                     "        }\n"
                     "        for (int64_t i = 0; i < w; ++i)\n"
                     "            m[i] = nan[i] ? NAN : m[i];\n"
                     "        for (int64_t j = 0; j < red; ++j) {\n"
                     "            const int64_t row = base + j * inner;\n"
                     "#pragma omp simd\n"
                     "            for (int64_t i = 0; i < w; ++i) {\n"
                     "                const float e = kf_expf(KF_LOAD(row + i) - m[i]);\n");
    if (!strcmp(op, "softmax"))
        kf_buf_printf(b, "                out[row + i] = e;\n");
    kf_buf_printf(b, "                s[i] += e;\n"
                     "            }\n"
                     "        }\n");
    if (!strcmp(op, "logsumexp")) {
        kf_buf_printf(b,
                      "        for (int64_t i = 0; i < w; ++i)\n"
                      "            out[o * inner + i0 + i] = m[i] == INFINITY || m[i] == "
                      "-INFINITY ? m[i] : m[i] + std::log((float)s[i]);\n%s",
                      TAIL);
        return;
    }
    kf_buf_printf(b,
                  "        float r[kTile];\n"
                  "        for (int64_t i = 0; i < w; ++i)\n"
                  "            r[i] = %s;\n"
                  "        for (int64_t j = 0; j < red; ++j) {\n"
                  "            const int64_t row = base + j * inner;\n"
                  "#pragma omp simd\n"
                  "            for (int64_t i = 0; i < w; ++i)\n"
                  "                out[row + i] = %s;\n"
                  "        }\n%s",
                  !strcmp(op, "softmax") ? "(float)(1.0 / s[i])" : "std::log((float)s[i])",
                  !strcmp(op, "softmax") ? "out[row + i] * r[i]" : "KF_LOAD(row + i) - m[i] - r[i]",
                  TAIL);
}

/* The columns of arg-reductions and variances: one Acc per column of the tile. */
static void acc_cols(struct kf_buf *b) {
    kf_buf_printf(b,
                  "        Acc a[kTile];\n"
                  "        for (int64_t i = 0; i < w; ++i)\n"
                  "            a[i] = acc_init();\n"
                  "        for (int64_t j = 0; j < red; ++j)\n"
                  "            for (int64_t i = 0; i < w; ++i)\n"
                  "                acc_add(a[i], KF_LOAD(base + j * inner + i), j);\n"
                  "        for (int64_t i = 0; i < w; ++i)\n"
                  "            out[o * inner + i0 + i] = acc_fin(a[i], red);\n%s",
                  TAIL);
}

bool kfx_rows_cpu_exp(const char *op) {
    return !strcmp(op, "softmax") || !strcmp(op, "log_softmax") || !strcmp(op, "logsumexp");
}

void kfx_rows_cpu_kernel(struct kf_buf *b, const struct kfx_step *st, const char *op) {
    struct kf_buf t = {0};
    kf_buf_printf(&t, "%s", HEAD);
    const struct simple *s = NULL;
    for (size_t k = 0; k < sizeof(SIMPLE) / sizeof(SIMPLE[0]); k++)
        if (!strcmp(SIMPLE[k].op, op))
            s = &SIMPLE[k];
    if (s) {
        simple_src(&t, s);
    } else {
        if (kfx_rows_cpu_exp(op))
            exp_src(&t, op);
        else if (!strncmp(op, "arg", 3)) /* the extreme (simd), then its first index */
            kf_buf_printf(&t,
                          "            float m = %s;\n"
                          "            int nan = 0;\n"
                          "#pragma omp simd reduction(%s : m) reduction(| : nan)\n"
                          "            for (int64_t j = 0; j < red; ++j) {\n"
                          "                const float x = KF_LOAD(base + j);\n"
                          "                m = x %c m ? x : m;\n"
                          "                nan |= x != x;\n"
                          "            }\n"
                          "            int64_t at = 0;\n"
                          "            for (int64_t j = 0; j < red; ++j) {\n"
                          "                const float x = KF_LOAD(base + j);\n"
                          "                if (nan ? x != x : x == m) {\n"
                          "                    at = j;\n"
                          "                    break;\n"
                          "                }\n"
                          "            }\n"
                          "            out[o] = at;\n",
                          op[4] == 'a' ? "-INFINITY" : "INFINITY", op[4] == 'a' ? "max" : "min",
                          op[4] == 'a' ? '>' : '<');
        else /* variances: Acc along the row */
            kf_buf_printf(&t, "            Acc a = acc_init();\n"
                              "            for (int64_t j = 0; j < red; ++j)\n"
                              "                acc_add(a, KF_LOAD(base + j), j);\n"
                              "            out[o] = acc_fin(a, red);\n");
        kf_buf_printf(&t, "%s", MID);
        if (kfx_rows_cpu_exp(op))
            exp_cols(&t, op);
        else
            acc_cols(&t);
    }
    kfx_rows_put(b, t.data ? t.data : "", st, 0);
    kf_buf_free(&t);
}
