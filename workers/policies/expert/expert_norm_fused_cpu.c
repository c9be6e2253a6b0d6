/* expert_norm_fused_cpu.c: the cpu kernel of a norm's statistics fused with the elementwise
 * pass that reads them (planned by expert_plan_fuse.c; the cuda kernel: expert_norm_fused.c).
 * OpenMP over the groups g (the B contiguous elements normalised together): a thread sums the
 * group's x and x*x in double precision as expert_rows.c's cpu statistics kernel does, writes
 * mean and rstd (rep times for a group norm, whose statistics are per channel), then writes the
 * pass over the group's rows of the output (B / d3 rows of the last dimension) while the group is
 * still in its cache. The statistics enter the pass as two scalars, so what the pass computes from
 * them alone (an RMS norm's 1/sqrt(mean + eps)) is hoisted out of the row's loop; every other input
 * is read through its broadcast strides, along the row where each runs along it, in chunks
 * (kfw_cpu_chunks) otherwise. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

static const char GROUP[] =
    "    if (G <= 0)\n"
    "        return G < 0;\n"
    "    // the plan's contract: contiguous groups of whole rows covering the output\n"
    "    if (A != 1 || rep < 1 || (STAT_MODE != 0 && rep != 1) || d3 <= 0 || B % d3 != 0 ||\n"
    "        G * B != n)\n"
    "        return 2;\n"
    "    const int64_t per = B / d3;\n"
    "#pragma omp parallel for schedule(SCHED)\n"
    "    for (int64_t g = 0; g < G; ++g) {\n"
    "        double sx = 0.0, sy = 0.0;\n"
    "#pragma omp simd reduction(+ : sx, sy)\n"
    "        for (int64_t b = 0; b < B; ++b) {\n"
    "            const double x = KF_LOAD(g * B + b);\n"
    "            sx += x;\n"
    "            sy += x * x;\n"
    "        }\n"
    "        const double m = B > 0 ? sx / (double)B : 0.0;\n"
    "        float mu, rs = 0.0f;\n"
    "        if (STAT_MODE == 0) {\n"
    "            double var = B > 0 ? sy / (double)B - m * m : 0.0;\n"
    "            var = var > 0.0 ? var : 0.0;\n"
    "            mu = (float)m;\n"
    "            rs = kf_second(var, (double)B, eps);\n"
    "            // a group norm's statistics per channel: rep channels share the group's\n"
    "            for (int64_t k = 0; k < rep; ++k) {\n"
    "                mean[g * rep + k] = mu;\n"
    "                rstd[g * rep + k] = rs;\n"
    "            }\n"
    "        } else {\n"
    "            mu = mean[g] = (float)(STAT_MODE == 2 ? sx : m);\n"
    "        }\n"
    "        (void)mu;\n"
    "        (void)rs;\n"
    "        for (int64_t r = g * per; r < (g + 1) * per; ++r) {\n"
    "            const int64_t i2 = r % d2, i1 = (r / d2) % d1, i0 = r / d2 / d1;\n"
    "            (void)i0;\n"
    "            (void)i1;\n"
    "            (void)i2;\n"
    "            float *__restrict__ o = out + r * d3;\n";

char *kfx_norm_fused_cpu(const struct kfx_step *st) {
    const int n = st->ew_leaves;
    const char *value[KFX_MAX_LEAVES];
    for (int k = 0; k < n; k++)
        value[k] = st->ew_stat[k] == 1 ? "mu" : st->ew_stat[k] == 2 ? "rs" : NULL;
    struct kf_buf b = {0};
    kf_buf_printf(&b, "namespace ew {\n");
    kfw_ew_elem(&b, st->ew_body, n, "inline");
    /* 0: a norm's mean and 1/std; 1: a mean; 2: a sum (the reduction's one value, as mean) */
    int mode = st->kind == KFX_MOMENTS ? 0 : strcmp(st->op, "sum") == 0 ? 2 : 1;
    kf_buf_printf(&b, "} // namespace ew\n\nconstexpr int STAT_MODE = %d;\n\n", mode);
    kfw_cpu_chunk_defs(&b);
    kf_buf_printf(&b, "\n} // namespace\n\n");
    kfx_norm_fused_open(&b, st, mode);
    for (int k = 0; k < n; k++) /* a statistic's pointer and strides: the value instead */
        if (value[k] != NULL)
            kf_buf_printf(&b, "    (void)e%d, (void)s%d0, (void)s%d1, (void)s%d2, (void)s%d3;\n", k,
                          k, k, k, k);
    kf_buf_printf(&b, "%s", GROUP);
    bool tensors = false;
    for (int k = 0; k < n; k++)
        if (value[k] == NULL) {
            kf_buf_printf(&b,
                          "            const float *__restrict__ p%d = e%d + i0 * s%d0 + i1 * s%d1 "
                          "+ i2 * s%d2;\n",
                          k, k, k, k, k);
            tensors = true;
        }
    /* along: every tensor input runs along the row */
    kf_buf_printf(&b, "            if (true");
    for (int k = 0; k < n; k++)
        if (value[k] == NULL)
            kf_buf_printf(&b, " && s%d3 == 1", k);
    kf_buf_printf(&b, ") {\n#pragma omp simd\n"
                      "                for (int64_t j = 0; j < d3; ++j)\n"
                      "                    o[j] = ew::kf_elem(");
    for (int k = 0; k < n; k++)
        if (value[k] != NULL)
            kf_buf_printf(&b, "%s%s", k ? ", " : "", value[k]);
        else
            kf_buf_printf(&b, "%sp%d[j]", k ? ", " : "", k);
    kf_buf_printf(&b, ");\n            } else {\n");
    if (tensors)
        kfw_cpu_chunks(&b, n, "ew::kf_elem", value);
    kf_buf_printf(&b, "            }\n        }\n    }\n    return 0;\n}\n");
    return b.data;
}
