/* expert_plan_rewrite.c: operators that are others written as one call, planned as the
 * operators they are (synthetic nodes, kfx_plan_synth):
 *   torch.addmm(input, a, b, beta=1, alpha=1) and baddbmm: beta * input + alpha * (a @ b), the
 *     product a matmul (expert_gemm.c), the scaling and the input's broadcast sum lazy, fused
 *     into what follows;
 *   torch.outer(a, b) and ger: a[:, None] * b, the unsqueeze a view, the product lazy;
 *   torch.trace(x): the sum of x's diagonal (a strided view). */
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* The number kwargs[name], or def; -1 (with detail) when it is there and not a number. */
static int scalar(const json_t *node, const char *name, double def, double *out, char *detail,
                  size_t dlen) {
    const json_t *v = json_object_get(json_object_get(node, "kwargs"), name);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) {
        snprintf(detail, dlen, "%s with a %s that is not a number (not yet)",
                 json_string_value(json_object_get(node, "target")), name);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

static int outer(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *name = json_string_value(json_object_get(node, "name"));
    int a = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    int b = kfx_arg_val(p, kfx_node_arg(node, 1, "vec2"));
    if (a < 0 || b < 0 || p->val[a].ndim != 1 || p->val[b].ndim != 1 || p->val[a].is_int ||
        p->val[b].is_int) {
        snprintf(detail, dlen, "outer of other than two float vectors (not yet)");
        return -1;
    }
    char col[160];
    snprintf(col, sizeof(col), "%s@column", name);
    json_t *ra = kfx_synth_ref(p, a);
    if (ra == NULL)
        return -1;
    json_t *t = kfx_plan_synth(
        p, col, "torch.unsqueeze", json_pack("[o, i]", ra, 1),
        json_pack("{s:[I, i], s:s}", "shape", p->val[a].shape[0], 1, "dtype", "float32"));
    int c = kfx_plan_synth_val(p, t, detail, dlen);
    if (c < 0)
        return -1;
    char e[64];
    snprintf(e, sizeof(e), "v%d * v%d", c, b);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* torch.trace(x) of a matrix: the sum of its diagonal (a strided view, expert_plan_view.c). */
static int trace(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *name = json_string_value(json_object_get(node, "name"));
    int x = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (x < 0 || p->val[x].ndim != 2 || p->val[x].is_int || p->val[x].kind == KFX_TUPLE ||
        p->val[x].kind == KFX_SIZE) {
        snprintf(detail, dlen, "trace of other than a float matrix");
        return -1;
    }
    const long long n = p->val[x].shape[0], m = p->val[x].shape[1];
    char dn[160];
    snprintf(dn, sizeof(dn), "%s@diagonal", name);
    json_t *rx = kfx_synth_ref(p, x);
    if (rx == NULL)
        return -1;
    json_t *d = kfx_plan_synth(p, dn, "torch.diagonal", json_pack("[o]", rx),
                               json_pack("{s:[I], s:s, s:[I]}", "shape", n < m ? n : m, "dtype",
                                         "float32", "stride", m + 1));
    int v = kfx_plan_synth_val(p, d, detail, dlen);
    json_t *rv = v < 0 ? NULL : kfx_synth_ref(p, v);
    if (rv == NULL)
        return -1;
    json_t *sum = kfx_plan_synth(p, name, "torch.sum", json_pack("[o]", rv),
                                 json_deep_copy(json_object_get(node, "output")));
    if (sum == NULL)
        return -1;
    p->val[k].node = sum;
    return kfx_plan_anchor(p, sum, k, detail, dlen);
}

int kfx_plan_rewrite(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                     size_t dlen) {
    if (!strcmp(s, "trace"))
        return trace(p, node, k, detail, dlen);
    if (!strcmp(s, "outer") || !strcmp(s, "ger"))
        return outer(p, node, k, detail, dlen);
    bool batched = !strcmp(s, "baddbmm");
    if (strcmp(s, "addmm") != 0 && !batched)
        return 0;
    const char *name = json_string_value(json_object_get(node, "name"));
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    int a = kfx_arg_val(p, kfx_node_arg(node, 1, batched ? "batch1" : "mat1"));
    int b = kfx_arg_val(p, kfx_node_arg(node, 2, batched ? "batch2" : "mat2"));
    double beta, alpha;
    if (scalar(node, "beta", 1.0, &beta, detail, dlen) != 0 ||
        scalar(node, "alpha", 1.0, &alpha, detail, dlen) != 0)
        return -1;
    int want = batched ? 3 : 2;
    if (in < 0 || a < 0 || b < 0 || p->val[a].ndim != want || p->val[b].ndim != want ||
        p->val[in].is_int || p->val[a].is_int || p->val[b].is_int) {
        snprintf(detail, dlen, "%s of other than float %s (not yet)", s,
                 batched ? "batches of matrices" : "matrices");
        return -1;
    }
    char mm[160];
    snprintf(mm, sizeof(mm), "%s@product", name);
    json_t *ra = kfx_synth_ref(p, a), *rb = kfx_synth_ref(p, b);
    if (ra == NULL || rb == NULL) {
        json_decref(ra);
        json_decref(rb);
        return -1;
    }
    json_t *t =
        kfx_plan_synth(p, mm, batched ? "torch.bmm" : "torch.matmul", json_pack("[o, o]", ra, rb),
                       json_deep_copy(json_object_get(node, "output")));
    int m = kfx_plan_synth_val(p, t, detail, dlen);
    if (m < 0)
        return -1;
    char e[160], lb[40], la[40];
    snprintf(e, sizeof(e), "%s * v%d + %s * v%d", kfw_ew_lit(beta, lb), in, kfw_ew_lit(alpha, la),
             m);
    if (beta == 0.0) /* beta 0: input ignored, NaN in it too (PyTorch's rule) */
        snprintf(e, sizeof(e), "%s * v%d", kfw_ew_lit(alpha, la), m);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}
