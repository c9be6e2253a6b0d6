/* expert_plan_loss.c: the planner's losses and similarities (F.mse_loss, F.l1_loss,
 * F.smooth_l1_loss, F.huber_loss, F.kl_div, F.cosine_similarity and their nn modules): each is an
 * elementwise chain over its two operands, reduced (the chain is the reduction's prologue: one
 * pass over the operands) or left lazy for reduction='none'. The formulas are PyTorch's. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* kwargs[name] of a function, attrs[name] of a module */
static const json_t *param(const json_t *node, const char *name) {
    const json_t *v = json_object_get(json_object_get(node, "kwargs"), name);
    return v ? v : json_object_get(json_object_get(node, "attrs"), name);
}

static const json_t *operand(const json_t *node, size_t i, const char *name) {
    const json_t *args = json_object_get(node, "args");
    if (i < json_array_size(args))
        return json_array_get(args, i);
    return json_object_get(json_object_get(node, "kwargs"), name);
}

static double num(const json_t *node, const char *name, double def) {
    const json_t *v = param(node, name);
    return json_is_number(v) ? json_number_value(v) : def;
}

/* Two float operands of one shape (a loss of broadcast operands is not planned). */
static bool same_operands(const struct kfx_plan *p, int a, int b) {
    return a >= 0 && b >= 0 && !p->val[a].is_int && !p->val[b].is_int &&
           kfx_same_shape(&p->val[a], &p->val[b]);
}

/* F.cosine_similarity(x1, x2, dim=1, eps=1e-8): sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps))
 * over dim, from three sums. */
static int cosine(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int a = kfx_arg_val(p, operand(node, 0, "x1")), b = kfx_arg_val(p, operand(node, 1, "x2"));
    const json_t *dj = param(node, "dim");
    if (dj == NULL && json_array_size(json_object_get(node, "args")) > 2)
        dj = json_array_get(json_object_get(node, "args"), 2);
    if (!same_operands(p, a, b) || (dj && !json_is_integer(dj))) {
        snprintf(detail, dlen, "cosine_similarity of operands of different shapes (not yet)");
        return -1;
    }
    json_t *dim = json_integer(dj ? json_integer_value(dj) : 1);
    const int pairs[3][2] = {{a, b}, {a, a}, {b, b}};
    int r[3];
    for (int i = 0; i < 3; i++) {
        char e[48];
        snprintf(e, sizeof(e), "v%d * v%d", pairs[i][0], pairs[i][1]);
        int w = kfx_new_lazy(p, a, e);
        r[i] = w < 0 ? -1 : kfx_new_out(p);
        int rc = r[i] < 0 ? -1 : kfx_reduce(p, node, r[i], w, "sum", dim, false, detail, dlen);
        if (rc != 1) {
            json_decref(dim);
            if (r[i] < 0)
                snprintf(detail, dlen, "a graph of more than %d values", KFX_MAX_VALS);
            return -1;
        }
    }
    json_decref(dim);
    char eps[40], e[256];
    kfw_ew_lit(num(node, "eps", 1e-8), eps);
    snprintf(e, sizeof(e), "v%d / (fmaxf(sqrtf(v%d), %s) * fmaxf(sqrtf(v%d), %s))", r[0], r[1], eps,
             r[2], eps);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* A loss's pointwise expression e over operands of a's shape: val k itself for reduction
 * 'none' (-2 returned), else a new lazy val to reduce (its index); -1 when there is no room. */
static int pointwise(struct kfx_plan *p, const json_t *node, int k, int a, const char *e,
                     const char *red, char *detail, size_t dlen) {
    if (!strcmp(red, "none"))
        return kfx_set_lazy(p, k, node, e) == 0 ? -2 : -1;
    int v = kfx_new_lazy(p, a, e);
    if (v < 0)
        snprintf(detail, dlen, "a graph of more than %d values", KFX_MAX_VALS);
    return v;
}

/* F.kl_div(input, target, reduction='mean', log_target=False) and nn.KLDivLoss: pointwise
 * target * (log(target) - input) (0 where target is 0, as xlogy), or exp(target) * (target -
 * input) with log_target; 'batchmean' as the mean over dim 0 of the sums over the others. */
static int kl_div(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int a = kfx_arg_val(p, operand(node, 0, "input"));
    int b = kfx_arg_val(p, operand(node, 1, "target"));
    const json_t *rj = param(node, "reduction");
    const json_t *old1 = param(node, "size_average"), *old2 = param(node, "reduce");
    const char *red = rj ? json_string_value(rj) : "mean";
    if (!same_operands(p, a, b) || red == NULL ||
        (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none") &&
         strcmp(red, "batchmean")) ||
        (old1 && !json_is_null(old1)) || (old2 && !json_is_null(old2))) {
        snprintf(detail, dlen,
                 "kl_div with size_average or reduce, or over operands of different shapes (not "
                 "yet)");
        return -1;
    }
    char e[256];
    if (json_is_true(param(node, "log_target")))
        snprintf(e, sizeof(e), "expf(v%d) * (v%d - v%d)", b, b, a);
    else
        snprintf(e, sizeof(e), "(v%d == 0.0f ? 0.0f : v%d * logf(v%d)) - v%d * v%d", b, b, b, b, a);
    int v = pointwise(p, node, k, a, e, red, detail, dlen);
    if (v < 0)
        return v == -2 ? 1 : -1;
    const int nd = p->val[a].ndim;
    if (strcmp(red, "batchmean") != 0 || nd < 2)
        return kfx_reduce(p, node, k, v, !strcmp(red, "sum") ? "sum" : "mean", NULL, false, detail,
                          dlen);
    json_t *rest = json_array();
    for (int i = 1; i < nd; i++)
        json_array_append_new(rest, json_integer(i));
    int rows = kfx_new_out(p);
    int rc = rows < 0 ? -1 : kfx_reduce(p, node, rows, v, "sum", rest, false, detail, dlen);
    json_decref(rest);
    if (rc != 1)
        return -1;
    p->val[rows].ndim = 1; /* the per-row sums: [N] */
    p->val[rows].shape[0] = p->val[a].shape[0];
    return kfx_reduce(p, node, k, rows, "mean", NULL, false, detail, dlen);
}

int kfx_plan_loss(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen) {
    static const char *const modules[][2] = {
        {"MSELoss", "mse_loss"},
        {"L1Loss", "l1_loss"},
        {"SmoothL1Loss", "smooth_l1_loss"},
        {"HuberLoss", "huber_loss"},
        {"CosineSimilarity", "cosine_similarity"},
        {"KLDivLoss", "kl_div"},
    };
    const char *type = json_string_value(json_object_get(node, "module_type"));
    if (type) {
        s = NULL;
        for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
            if (!strcmp(type, modules[i][0]))
                s = modules[i][1];
        if (s == NULL)
            return 0;
    }
    if (!strcmp(s, "cosine_similarity"))
        return cosine(p, node, k, detail, dlen);
    if (!strcmp(s, "kl_div"))
        return kl_div(p, node, k, detail, dlen);
    bool mse = !strcmp(s, "mse_loss"), l1 = !strcmp(s, "l1_loss");
    bool sl1 = !strcmp(s, "smooth_l1_loss"), huber = !strcmp(s, "huber_loss");
    if (!mse && !l1 && !sl1 && !huber)
        return 0;
    int a = kfx_arg_val(p, operand(node, 0, "input"));
    int b = kfx_arg_val(p, operand(node, 1, "target"));
    const json_t *rj = param(node, "reduction"), *w = param(node, "weight");
    const json_t *old1 = param(node, "size_average"), *old2 = param(node, "reduce");
    const char *red = rj ? json_string_value(rj) : "mean";
    if (!same_operands(p, a, b) || red == NULL ||
        (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) ||
        (w && !json_is_null(w)) || (old1 && !json_is_null(old1)) || (old2 && !json_is_null(old2))) {
        snprintf(detail, dlen,
                 "%s with a weight, size_average or reduce, or over operands of different "
                 "shapes (not yet)",
                 s);
        return -1;
    }
    char d[40], e[512], c[40], h[40];
    snprintf(d, sizeof(d), "(v%d - v%d)", a, b);
    const double beta = num(node, "beta", 1.0), delta = num(node, "delta", 1.0);
    if (mse)
        snprintf(e, sizeof(e), "%s * %s", d, d);
    else if (l1 || (sl1 && beta <= 0.0))
        snprintf(e, sizeof(e), "fabsf(%s)", d);
    else if (sl1)
        snprintf(e, sizeof(e), "fabsf(%s) < %s ? 0.5f * %s * %s / %s : fabsf(%s) - 0.5f * %s", d,
                 kfw_ew_lit(beta, c), d, d, c, d, c);
    else
        snprintf(e, sizeof(e), "fabsf(%s) <= %s ? 0.5f * %s * %s : %s * (fabsf(%s) - 0.5f * %s)", d,
                 kfw_ew_lit(delta, h), d, d, h, d, h);
    int v = pointwise(p, node, k, a, e, red, detail, dlen);
    if (v < 0)
        return v == -2 ? 1 : -1;
    return kfx_reduce(p, node, k, v, red, NULL, false, detail, dlen);
}
