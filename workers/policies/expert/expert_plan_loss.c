/* expert_plan_loss.c: the planner's losses, distances and similarities (F.mse_loss, F.l1_loss,
 * F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy (with logits too), F.soft_margin_loss,
 * F.margin_ranking_loss, F.kl_div, F.cosine_similarity, F.pairwise_distance,
 * F.triplet_margin_loss and their nn modules): each is an elementwise chain over its operands,
 * reduced (the chain is the reduction's prologue: one pass over the operands) or left lazy for
 * reduction='none'. The formulas are PyTorch's. */
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

/* A loss module with buffers of its own (a weight, BCEWithLogitsLoss's pos_weight). */
static bool module_buffers(const struct kfx_plan *p, const json_t *node) {
    const char *path = json_string_value(json_object_get(node, "target"));
    size_t i, n = path ? strlen(path) : 0;
    const json_t *t;
    if (json_object_get(node, "module_type") == NULL || n == 0)
        return false;
    json_array_foreach(json_object_get(p->graph, "buffers"), i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name && !strncmp(name, path, n) && name[n] == '.')
            return true;
    }
    return false;
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

/* The per-row sums of a reduction over the last dim of val in, into a new val of in's shape
 * without that dim: its index, or -1. (kfx_reduce gives a val the node's shape: the loss's.) */
static int last_dim_sum(struct kfx_plan *p, const json_t *node, int in, char *detail, size_t dlen) {
    const int nd = p->val[in].ndim;
    int r = kfx_new_out(p);
    json_t *dim = json_integer(nd - 1);
    int rc = r < 0 ? -1 : kfx_reduce(p, node, r, in, "sum", dim, false, detail, dlen);
    json_decref(dim);
    if (r < 0)
        snprintf(detail, dlen, "a graph of more than %d values", KFX_MAX_VALS);
    if (rc != 1)
        return -1;
    p->val[r].ndim = nd - 1;
    memcpy(p->val[r].shape, p->val[in].shape, sizeof(p->val[r].shape[0]) * (size_t)(nd - 1));
    return r;
}

/* F.pairwise_distance(x1, x2, p, eps): ||x1 - x2 + eps||_p over the last dim: the per-row sums
 * reduced into a new val, and the C expression of the distance over it written into expr (an
 * expression, not a lazy val: a lazy val may read only vals before it). The sums' val, or
 * -1. */
static int distance(struct kfx_plan *p, const json_t *node, int a, int b, double pw, double eps,
                    char expr[48], char *detail, size_t dlen) {
    char ep[40], pp[40], d[96], e[320];
    snprintf(d, sizeof(d), "(v%d - v%d + %s)", a, b, kfw_ew_lit(eps, ep));
    if (pw == 2.0)
        snprintf(e, sizeof(e), "%s * %s", d, d);
    else if (pw == 1.0)
        snprintf(e, sizeof(e), "fabsf(%s)", d);
    else
        snprintf(e, sizeof(e), "powf(fabsf(%s), %s)", d, kfw_ew_lit(pw, pp));
    int w = kfx_new_lazy(p, a, e);
    int r = w < 0 ? -1 : last_dim_sum(p, node, w, detail, dlen);
    if (r < 0)
        return -1;
    if (pw == 2.0)
        snprintf(expr, 48, "sqrtf(v%d)", r);
    else if (pw == 1.0)
        snprintf(expr, 48, "v%d", r);
    else
        snprintf(expr, 48, "powf(v%d, %s)", r, kfw_ew_lit(1.0 / pw, pp));
    return r;
}

/* The norm degree p of a distance: finite and positive (0 and inf are not planned).
 * nn.PairwiseDistance keeps it as its attribute norm. */
static bool degree(const json_t *node, size_t argi, double *pw) {
    const json_t *v = param(node, "p");
    if (v == NULL)
        v = json_object_get(json_object_get(node, "attrs"), "norm");
    if (v == NULL && json_array_size(json_object_get(node, "args")) > argi)
        v = json_array_get(json_object_get(node, "args"), argi);
    *pw = json_is_number(v) ? json_number_value(v) : 2.0;
    return v == NULL || (json_is_number(v) && *pw > 0.0 && *pw < 1e6);
}

/* F.pairwise_distance(x1, x2, p=2, eps=1e-6, keepdim=False) and nn.PairwiseDistance. */
static int pairwise(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int a = kfx_arg_val(p, operand(node, 0, "x1")), b = kfx_arg_val(p, operand(node, 1, "x2"));
    double pw;
    if (!same_operands(p, a, b) || p->val[a].ndim < 1 || !degree(node, 2, &pw) ||
        json_is_true(param(node, "keepdim"))) {
        snprintf(detail, dlen,
                 "pairwise_distance of operands of different shapes, of 0-d ones, with keepdim or "
                 "a p that is not a positive number (not yet)");
        return -1;
    }
    char e[48];
    if (distance(p, node, a, b, pw, num(node, "eps", 1e-6), e, detail, dlen) < 0)
        return -1;
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* F.triplet_margin_loss(anchor, positive, negative, margin=1, p=2, eps=1e-6, swap=False,
 * reduction='mean') and nn.TripletMarginLoss: max(margin + d(a, p) - d(a, n), 0), d the
 * pairwise distance over the last dim, with swap d(a, n) the smaller of it and d(p, n). */
static int triplet(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int a = kfx_arg_val(p, operand(node, 0, "anchor"));
    int pos = kfx_arg_val(p, operand(node, 1, "positive"));
    int neg = kfx_arg_val(p, operand(node, 2, "negative"));
    const json_t *rj = param(node, "reduction");
    const json_t *old1 = param(node, "size_average"), *old2 = param(node, "reduce");
    const char *red = rj ? json_string_value(rj) : "mean";
    double pw;
    if (!same_operands(p, a, pos) || !same_operands(p, a, neg) || p->val[a].ndim < 1 ||
        !degree(node, 4, &pw) || red == NULL ||
        (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) ||
        (old1 && !json_is_null(old1)) || (old2 && !json_is_null(old2))) {
        snprintf(detail, dlen,
                 "triplet_margin_loss with size_average or reduce, a p that is not a positive "
                 "number, or over operands of different shapes (not yet)");
        return -1;
    }
    const double eps = num(node, "eps", 1e-6);
    char dp[48], dn[48], ds[48], m[40], far[112], e[256];
    /* rows: a val of the rows' shape, for the per-row hinge */
    const int rows = distance(p, node, a, pos, pw, eps, dp, detail, dlen);
    if (rows < 0 || distance(p, node, a, neg, pw, eps, dn, detail, dlen) < 0)
        return -1;
    if (json_is_true(param(node, "swap"))) {
        if (distance(p, node, pos, neg, pw, eps, ds, detail, dlen) < 0)
            return -1;
        snprintf(far, sizeof(far), "fminf(%s, %s)", dn, ds);
    } else {
        snprintf(far, sizeof(far), "%s", dn);
    }
    snprintf(e, sizeof(e), "fmaxf(%s + %s - %s, 0.0f)", kfw_ew_lit(num(node, "margin", 1.0), m), dp,
             far);
    int v = pointwise(p, node, k, rows, e, red, detail, dlen);
    if (v < 0)
        return v == -2 ? 1 : -1;
    return kfx_reduce(p, node, k, v, red, NULL, false, detail, dlen);
}

/* F.cross_entropy and nn.CrossEntropyLoss: a KFX_XENT step (expert_xent.c). */
bool kfx_is_xent(const json_t *node) {
    const char *mt = json_string_value(json_object_get(node, "module_type"));
    if (mt)
        return strcmp(mt, "CrossEntropyLoss") == 0 || strcmp(mt, "NLLLoss") == 0;
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    return s && (strcmp(s, "cross_entropy") == 0 || strcmp(s, "nll_loss") == 0);
}

/* nll_loss(log_softmax(z, dim=1), t) is cross_entropy(z, t): the val of z, or -1 when x is not
 * such a log_softmax (of a 2-D z, over its classes). */
static int nll_logits(struct kfx_plan *p, int x) {
    const json_t *src = x >= 0 ? p->val[x].node : NULL;
    const char *mt = json_string_value(json_object_get(src, "module_type"));
    const char *s = kfw_short_name(json_string_value(json_object_get(src, "target")));
    const json_t *dim =
        mt ? json_object_get(json_object_get(src, "attrs"), "dim") : operand(src, 1, "dim");
    if (src == NULL || !(mt ? !strcmp(mt, "LogSoftmax") : s && !strcmp(s, "log_softmax")) ||
        !json_is_integer(dim) || (json_integer_value(dim) != 1 && json_integer_value(dim) != -1))
        return -1;
    int z = kfx_arg_val(p, operand(src, 0, "input"));
    return z >= 0 && p->val[z].ndim == 2 ? z : -1;
}

static int xent(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    if (!kfx_is_xent(node))
        return 0;
    int x = kfx_arg_val(p, operand(node, 0, "input"));
    int t = kfx_arg_val(p, operand(node, 1, "target"));
    const char *mt = json_string_value(json_object_get(node, "module_type"));
    if (mt ? !strcmp(mt, "NLLLoss")
           : !strcmp(kfw_short_name(json_string_value(json_object_get(node, "target"))),
                     "nll_loss")) {
        x = nll_logits(p, x);
        if (x < 0) {
            snprintf(detail, dlen, "nll_loss of other than a log_softmax over classes (not yet)");
            return -1;
        }
    }
    const json_t *rj = param(node, "reduction"), *w = param(node, "weight");
    const json_t *ls = param(node, "label_smoothing"), *ig = param(node, "ignore_index");
    const json_t *old1 = param(node, "size_average"), *old2 = param(node, "reduce");
    const char *red = rj ? json_string_value(rj) : "mean";
    const json_t *tn = t >= 0 ? json_object_get(p->val[t].node, "output") : NULL;
    const char *tdt = json_string_value(json_object_get(tn, "dtype"));
    if (x < 0 || t < 0 || p->val[x].is_int || p->val[x].ndim != 2 || p->val[t].kind != KFX_INPUT ||
        !tdt || strcmp(tdt, "int64") != 0 || p->val[t].ndim != 1 ||
        p->val[t].shape[0] != p->val[x].shape[0] || red == NULL ||
        (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) ||
        (w && !json_is_null(w)) || (ls && !(json_is_number(ls) && json_number_value(ls) == 0.0)) ||
        (ig && !json_is_integer(ig)) || (old1 && !json_is_null(old1)) ||
        (old2 && !json_is_null(old2))) {
        snprintf(detail, dlen,
                 "cross_entropy other than of logits [N, C] and an int64 input of class indices "
                 "[N], without a weight or label smoothing (not yet)");
        return -1;
    }
    if (kfx_materialise(p, x, detail, dlen) != 0)
        return -1;
    struct kfx_step *st = kfx_add_step(p, KFX_XENT, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "xent");
    const char *xs = p->val[x].py;
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    const int mode = !strcmp(red, "none") ? 0 : !strcmp(red, "sum") ? 1 : 2;
    if (mode == 0) /* a loss per row of the logits */
        kfx_line(p, "%s = _alloc((%s.shape[0],), %s)", out, xs, xs);
    else
        kfx_line(p, "%s = _alloc((), %s)", out, xs);
    kfx_line(p, "%s_p = _scratch(self, \"%s_p\", (2048,), %s)", out, out, xs);
    kfx_line(p, "self.k.%s(%s, %s, %s, %s_p, %s.shape[0], %s.shape[1], %lld, %d)", st->fn, xs,
             p->val[t].py, out, out, xs, xs, ig ? (long long)json_integer_value(ig) : -100LL, mode);
    return 1;
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
        {"PairwiseDistance", "pairwise_distance"},
        {"TripletMarginLoss", "triplet_margin_loss"},
        {"BCELoss", "binary_cross_entropy"},
        {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"},
        {"SoftMarginLoss", "soft_margin_loss"},
        {"MarginRankingLoss", "margin_ranking_loss"},
    };
    if (kfx_is_xent(node))
        return xent(p, node, k, detail, dlen);
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
    if (!strcmp(s, "pairwise_distance"))
        return pairwise(p, node, k, detail, dlen);
    if (!strcmp(s, "triplet_margin_loss"))
        return triplet(p, node, k, detail, dlen);
    bool mse = !strcmp(s, "mse_loss"), l1 = !strcmp(s, "l1_loss");
    bool sl1 = !strcmp(s, "smooth_l1_loss"), huber = !strcmp(s, "huber_loss");
    bool bce = !strcmp(s, "binary_cross_entropy"),
         bcel = !strcmp(s, "binary_cross_entropy_with_logits");
    bool soft = !strcmp(s, "soft_margin_loss"), rank = !strcmp(s, "margin_ranking_loss");
    if (!mse && !l1 && !sl1 && !huber && !bce && !bcel && !soft && !rank)
        return 0;
    int a = kfx_arg_val(p, operand(node, 0, rank ? "input1" : "input"));
    int b = kfx_arg_val(p, operand(node, 1, rank ? "input2" : "target"));
    int y = rank ? kfx_arg_val(p, operand(node, 2, "target")) : b;
    const json_t *rj = param(node, "reduction"), *w = param(node, "weight");
    const json_t *pw = param(node, "pos_weight");
    const json_t *old1 = param(node, "size_average"), *old2 = param(node, "reduce");
    const char *red = rj ? json_string_value(rj) : "mean";
    if (!same_operands(p, a, b) || !same_operands(p, a, y) || red == NULL ||
        (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) ||
        (w && !json_is_null(w)) || (pw && !json_is_null(pw)) || module_buffers(p, node) ||
        (old1 && !json_is_null(old1)) || (old2 && !json_is_null(old2))) {
        snprintf(detail, dlen,
                 "%s with a weight, size_average or reduce, or over operands of different "
                 "shapes (not yet)",
                 s);
        return -1;
    }
    char d[40], e[512], c[40], h[40];
    snprintf(d, sizeof(d), "(v%d - v%d)", a, b);
    const double beta = num(node, "beta", 1.0), delta = num(node, "delta", 1.0);
    if (bce) /* PyTorch clamps each log at -100 */
        snprintf(e, sizeof(e),
                 "-(v%d * fmaxf(logf(v%d), -100.0f) + (1.0f - v%d) * fmaxf(logf(1.0f - v%d), "
                 "-100.0f))",
                 b, a, b, a);
    else if (bcel) /* max(x, 0) - x y + log(1 + e^-|x|): no overflow either side */
        snprintf(e, sizeof(e), "fmaxf(v%d, 0.0f) - v%d * v%d + log1pf(expf(-fabsf(v%d)))", a, a, b,
                 a);
    else if (soft)
        snprintf(e, sizeof(e), "log1pf(expf(-v%d * v%d))", b, a);
    else if (rank)
        snprintf(e, sizeof(e), "fmaxf(-v%d * (v%d - v%d) + %s, 0.0f)", y, a, b,
                 kfw_ew_lit(num(node, "margin", 0.0), c));
    else if (mse)
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
