/* expert_plan_node.c: the planner's operators that are not elementwise: reductions over
 * dimensions, softmax, the norms (statistics kernel + lazy normalisation), and the nodes handed
 * to expert_ops.h (matmuls, convolutions, pooling) with their bias left lazy. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_ops.h"
#include "expert_plan.h"

static bool is(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* A dim of an nd-dimensional tensor counted from the front (-1 is nd - 1), so that one dim has
 * one spelling and sibling reductions over it are seen to be siblings. */
static long long dim_of(long long d, int nd) {
    return d < 0 && d >= -nd ? d + nd : d;
}

/* The Python text of a dim argument of an nd-dimensional input: "(1,)", "(1, 2)" or "None"; -1
 * when it is something else. */
static int dims_text(const json_t *d, int nd, char *out, size_t n) {
    if (d == NULL || json_is_null(d)) {
        snprintf(out, n, "None");
        return 0;
    }
    if (json_is_integer(d)) {
        snprintf(out, n, "(%lld,)", dim_of(json_integer_value(d), nd));
        return 0;
    }
    if (!json_is_array(d) || json_array_size(d) == 0)
        return -1;
    snprintf(out, n, "(");
    size_t i;
    const json_t *x;
    json_array_foreach(d, i, x) {
        if (!json_is_integer(x))
            return -1;
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%lld, ", dim_of(json_integer_value(x), nd));
    }
    size_t len = strlen(out);
    snprintf(out + len, n - len, ")");
    return 0;
}

/* Whether a dim list names one run of adjacent dimensions of an ndim-dimensional input (an
 * int, None or an empty list always does). */
static bool adjacent_dims(const json_t *dim, int ndim) {
    if (!json_is_array(dim) || ndim <= 0)
        return true;
    bool seen[KFX_MAX_DIMS] = {false};
    size_t i;
    const json_t *d;
    json_array_foreach(dim, i, d) {
        long long v = json_integer_value(d);
        v = v < 0 ? v + ndim : v;
        if (v >= 0 && v < ndim && v < KFX_MAX_DIMS)
            seen[v] = true;
    }
    int runs = 0;
    for (int j = 0; j < ndim && j < KFX_MAX_DIMS; j++)
        runs += seen[j] && (j == 0 || !seen[j - 1]);
    return runs <= 1;
}

int kfx_reduce(struct kfx_plan *p, const json_t *node, int k, int in, const char *op,
               const json_t *dim, bool keepdim, char *detail, size_t dlen) {
    char dims[128];
    if (dims_text(dim, p->val[in].ndim, dims, sizeof(dims)) != 0) {
        snprintf(detail, dlen, "%s over a dim argument that is not an int or list of ints", op);
        return -1;
    }
    if (!adjacent_dims(dim, p->val[in].ndim)) { /* _geom's rows: one run of dimensions */
        snprintf(detail, dlen, "%s over dims %s that are not adjacent (not yet)", op, dims);
        return -1;
    }
    int joined = kfx_multi_join(p, node, k, in, op, dims, keepdim, detail, dlen);
    if (joined != 0)
        return joined;
    struct kfx_step *st = kfx_add_step(p, KFX_REDUCE, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "%s", op);
    st->red_in = in;
    st->red_out = k;
    st->red_keep = keepdim;
    snprintf(st->red_dims, sizeof(st->red_dims), "%s", dims);
    char leaves[1024];
    if (kfx_prologue(p, in, st, leaves, sizeof(leaves), detail, dlen) != 0)
        return -1;
    bool arg_ = strncmp(op, "arg", 3) == 0;
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    kfx_line(p, "%s_g = _geom(%.*s.shape, %s, %s)", out, (int)strcspn(leaves, ","), leaves, dims,
             keepdim ? "True" : "False");
    kfx_line(p, "%s = _alloc(%s_g[3], %s%s)", out, out, p->like, arg_ ? ", torch.int64" : "");
    /* a sum or mean over the last dimension, kept: contiguous rows whose result a following
     * pass may read in the same kernel (expert_plan_fuse.c) */
    int nd = p->val[in].ndim;
    if (keepdim && (!strcmp(op, "sum") || !strcmp(op, "mean")) && json_is_integer(dim) && nd > 0 &&
        (json_integer_value(dim) == -1 || json_integer_value(dim) == nd - 1)) {
        st->fusable = 1;
        st->stat_in = in;
        st->stat_m = k;
        st->stat_r = -1;
    }
    st->launch_at = p->fwd->len;
    kfx_line(p, "self.k.%s(%s%s, *%s_g[:3])", st->fn, leaves, out, out);
    st->launch_len = p->fwd->len - st->launch_at;
    p->val[k].is_int = arg_;
    return 1;
}

static bool boolean(const json_t *v) {
    return json_is_true(v);
}

int kfx_new_out(struct kfx_plan *p) {
    if (p->n_vals >= KFX_MAX_VALS)
        return -1;
    int r = p->n_vals++;
    memset(&p->val[r], 0, sizeof(p->val[r]));
    return r;
}

int kfx_new_lazy(struct kfx_plan *p, int like, const char *expr) {
    if (p->n_vals >= KFX_MAX_VALS)
        return -1;
    int a = p->n_vals++;
    struct kfx_val *v = &p->val[a];
    memset(v, 0, sizeof(*v));
    v->kind = KFX_LAZY;
    v->ndim = p->val[like].ndim;
    memcpy(v->shape, p->val[like].shape, sizeof(v->shape));
    v->expr = strdup(expr);
    return v->expr ? a : -1;
}

/* torch.var and torch.std (functions and methods) with correction 0 or 1, in either
 * signature: (x, dim, unbiased, keepdim) or (x, dim, *, correction, keepdim); expert_rows.c's
 * var0, var1, std0 and std1 accumulators. */
/* The reduction op of a var, std, var_mean or std_mean node ("var1", "std0": the correction),
 * its dim and keepdim; -1 (with detail) for a correction other than 0 or 1, or a dtype. */
static int var_args(struct kfx_plan *p, const json_t *node, const char *s, char op[8],
                    const json_t **dim, bool *keepdim, char *detail, size_t dlen) {
    const json_t *kw = json_object_get(node, "kwargs");
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *ub = kfx_node_arg(node, 2, "unbiased");
    const json_t *cj = json_object_get(kw, "correction"), *dt = json_object_get(kw, "dtype");
    double corr = 1.0;
    *dim = kfx_node_arg(node, 1, "dim");
    if (json_is_boolean(*dim)) { /* torch.var(x, unbiased) */
        corr = json_is_true(*dim);
        *dim = NULL;
    }
    if (json_is_boolean(ub))
        corr = json_is_true(ub);
    if (cj && !json_is_null(cj))
        corr = json_is_number(cj) ? json_number_value(cj) : -1.0;
    if (in < 0 || (corr != 0.0 && corr != 1.0) || (dt && !json_is_null(dt))) {
        snprintf(detail, dlen, "%s with a correction other than 0 or 1, or a dtype (not yet)", s);
        return -1;
    }
    const json_t *kd = json_object_get(kw, "keepdim");
    if (kd == NULL && json_is_boolean(ub))
        kd = kfx_node_arg(node, 3, NULL);
    *keepdim = boolean(kd);
    snprintf(op, 8, "%.3s%d", s, (int)corr);
    return in;
}

/* var and std: a reduction; var_mean and std_mean: a tuple whose items getitem plans (each its
 * own reduction). */
static int variance(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                    size_t dlen) {
    bool pair = !strcmp(s, "var_mean") || !strcmp(s, "std_mean");
    if (strcmp(s, "var") != 0 && strcmp(s, "std") != 0 && !pair)
        return 0;
    char op[8];
    const json_t *dim;
    bool keepdim;
    int in = var_args(p, node, s, op, &dim, &keepdim, detail, dlen);
    if (in < 0)
        return -1;
    if (pair) {
        kfx_set_val(p, k, node, KFX_TUPLE, "");
        return 1;
    }
    return kfx_reduce(p, node, k, in, op, dim, keepdim, detail, dlen);
}

/* torch.norm(x, p, dim, keepdim), x.norm(..), torch.linalg.vector_norm(x, ord, dim, keepdim)
 * and torch.linalg.norm (a vector norm along one dim, or Frobenius's when ord is None or "fro")
 * for p = 1 and p = 2 (also "fro"): a sum over |x| or x * x (the reduction's prologue), then
 * the square root, lazy, so that what follows (x / norm: an L2 normalisation) fuses with it. */
static int pnorm(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen) {
    bool lin = !strcmp(s, "linalg_norm");
    bool vec = !strcmp(s, "vector_norm") || !strcmp(s, "linalg_vector_norm") || lin;
    bool unit = !strcmp(s, "normalize"); /* F.normalize(x, p=2, dim=1, eps=1e-12) */
    if (strcmp(s, "norm") != 0 && !vec && !unit)
        return 0;
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *pj = kfx_node_arg(node, 1, vec ? "ord" : "p");
    const json_t *dt = json_object_get(json_object_get(node, "kwargs"), "dtype");
    double pv = pj == NULL || json_is_null(pj) ? 2.0
                : json_is_number(pj)           ? json_number_value(pj)
                : json_is_string(pj) && !strcmp(json_string_value(pj), "fro") ? 2.0
                                                                              : 0.0;
    const json_t *dj = kfx_node_arg(node, 2, "dim");
    /* linalg.norm with a numeric ord over a matrix's two dims is a matrix norm (not this) */
    bool matrix = lin && json_is_number(pj) && in >= 0 && p->val[in].ndim >= 2 &&
                  !json_is_integer(dj) && !(json_is_array(dj) && json_array_size(dj) == 1);
    if (in < 0 || matrix || (pv != 1.0 && pv != 2.0) || (dt && !json_is_null(dt))) {
        snprintf(detail, dlen, "%s other than p = 1, 2 or 'fro', or with a dtype (not yet)", s);
        return -1;
    }
    char e[64];
    snprintf(e, sizeof(e), pv == 1.0 ? "fabsf(v%d)" : "v%d * v%d", in, in);
    int a = kfx_new_lazy(p, in, e);
    int r = a < 0 ? -1 : kfx_new_out(p);
    if (r < 0) {
        snprintf(detail, dlen, "a graph of more than %d values", KFX_MAX_VALS);
        return -1;
    }
    if (unit) {
        const json_t *dj = kfx_node_arg(node, 2, "dim"), *ej = kfx_node_arg(node, 3, "eps");
        json_t *dim = json_integer(json_is_integer(dj) ? json_integer_value(dj) : 1);
        int nd = p->val[in].ndim;
        long long d =
            json_integer_value(dim) < 0 ? json_integer_value(dim) + nd : json_integer_value(dim);
        int rc = d < 0 || d >= nd ? -1 : kfx_reduce(p, node, r, a, "sum", dim, true, detail, dlen);
        json_decref(dim);
        if (rc != 1) {
            if (!detail[0])
                snprintf(detail, dlen, "normalize over a dim the input does not have");
            return -1;
        }
        /* the norms' shape: the input's with dim kept as 1 (kfx_reduce took the node's) */
        p->val[r].ndim = nd;
        memcpy(p->val[r].shape, p->val[in].shape, sizeof(long long) * (size_t)nd);
        p->val[r].shape[d] = 1;
        char eps[40];
        kfw_ew_lit(json_is_number(ej) ? json_number_value(ej) : 1e-12, eps);
        snprintf(e, sizeof(e), pv == 1.0 ? "v%d / fmaxf(v%d, %s)" : "v%d / fmaxf(sqrtf(v%d), %s)",
                 in, r, eps);
        return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
    }
    int rc = kfx_reduce(p, node, r, a, "sum", kfx_node_arg(node, 2, "dim"),
                        boolean(kfx_node_arg(node, 3, "keepdim")), detail, dlen);
    if (rc != 1)
        return rc;
    snprintf(e, sizeof(e), pv == 1.0 ? "v%d" : "sqrtf(v%d)", r);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* sum, mean, prod, amax, amin, argmax, argmin, logsumexp, max/min (with a dim: a tuple). */
static int reduction(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                     size_t dlen) {
    static const char *const ops[] = {"sum",       "mean", "amax", "amin", "argmax", "argmin",
                                      "logsumexp", "max",  "min",  "prod", NULL};
    if (!is(s, ops))
        return 0;
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *dim = kfx_node_arg(node, 1, "dim");
    if (in < 0)
        return -1;
    if ((!strcmp(s, "max") || !strcmp(s, "min")) && json_is_object(dim)) {
        /* torch.max(x, y): elementwise */
        int y = kfx_arg_val(p, dim);
        if (y < 0)
            return -1;
        char e[64];
        snprintf(e, sizeof(e), "f%sf(v%d, v%d)", s, in, y);
        return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
    }
    const json_t *kwd = json_object_get(json_object_get(node, "kwargs"), "dtype");
    if (kwd && !json_is_null(kwd)) {
        snprintf(detail, dlen, "%s with a dtype argument (not yet)", s);
        return -1;
    }
    bool keepdim = boolean(kfx_node_arg(node, 2, "keepdim"));
    if (!strcmp(s, "max") || !strcmp(s, "min")) {
        if (dim == NULL || json_is_null(dim))
            return kfx_reduce(p, node, k, in, !strcmp(s, "max") ? "amax" : "amin", NULL, false,
                              detail, dlen);
        kfx_set_val(p, k, node, KFX_TUPLE, "");
        return 1;
    }
    return kfx_reduce(p, node, k, in, s, dim, keepdim, detail, dlen);
}

/* getitem(t, 0 | 1) or getattr(t, "values" | "indices") of a max/min tuple */
static int along(struct kfx_plan *p, const json_t *node, int k, int in, enum kfx_skind kind,
                 const char *op, long long dim, bool reverse, char *detail, size_t dlen);

static int getitem(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int t = kfx_arg_val(p, kfx_node_arg(node, 0, NULL));
    const json_t *idx = kfx_node_arg(node, 1, NULL);
    const char *field = json_string_value(idx); /* .values / .indices */
    if (t < 0 || p->val[t].kind != KFX_TUPLE ||
        !(json_is_integer(idx) ||
          (field && (!strcmp(field, "values") || !strcmp(field, "indices")))))
        return 0;
    if (p->val[t].items && json_is_integer(idx)) /* a recurrent layer's outputs */
        return kfx_plan_rnn_item(p, node, k, t, json_integer_value(idx), detail, dlen);
    const char *tm = json_string_value(json_object_get(p->val[t].node, "module_type"));
    if (tm && !strcmp(tm, "MultiheadAttention")) /* (output, weights): planned when read */
        return kfx_plan_mha(p, node, k, t, json_is_integer(idx) ? json_integer_value(idx) : -1,
                            detail, dlen);
    if (json_is_integer(idx)) { /* a piece of a chunk or a split */
        int rc = kfx_plan_piece(p, node, k, t, json_integer_value(idx), detail, dlen);
        if (rc != 0)
            return rc;
    }
    const json_t *mx = p->val[t].node;
    const char *s = kfw_short_name(json_string_value(json_object_get(mx, "target")));
    if (!strcmp(s, "var_mean") || !strcmp(s, "std_mean")) { /* (var or std, mean) */
        char op[8];
        const json_t *dim;
        bool keepdim;
        int in = var_args(p, mx, s, op, &dim, &keepdim, detail, dlen);
        if (in < 0 || field || json_integer_value(idx) > 1)
            return in < 0 ? -1 : 0;
        return kfx_reduce(p, node, k, in, json_integer_value(idx) == 0 ? op : "mean", dim, keepdim,
                          detail, dlen);
    }
    bool is_max = strcmp(s, "max") == 0;
    bool values = field ? !strcmp(field, "values") : json_integer_value(idx) == 0;
    if (!strcmp(s, "cummax") || !strcmp(s, "cummin")) { /* (values, indices) */
        if (!values) {
            snprintf(detail, dlen, "the indices of %s (not yet)", s);
            return -1;
        }
        const json_t *dim = kfx_node_arg(mx, 1, "dim");
        int in = kfx_arg_val(p, kfx_node_arg(mx, 0, "input"));
        const int nd = in >= 0 ? p->val[in].ndim : 0;
        const long long d = json_is_integer(dim) ? json_integer_value(dim) : -99;
        if (in < 0 || p->val[in].is_int || p->val[in].flipped || d < -nd || d >= nd || nd == 0) {
            snprintf(detail, dlen, "%s of other than a float tensor along an int dim", s);
            return -1;
        }
        return along(p, node, k, in, KFX_SCAN, s, d, false, detail, dlen);
    }
    int in = kfx_arg_val(p, kfx_node_arg(mx, 0, "input"));
    if (in < 0)
        return -1;
    return kfx_reduce(
        p, node, k, in, values ? (is_max ? "amax" : "amin") : (is_max ? "argmax" : "argmin"),
        kfx_node_arg(mx, 1, "dim"), boolean(kfx_node_arg(mx, 2, "keepdim")), detail, dlen);
}

/* A step of kind (softmax, scan) with operator op along dim of val in, read through its
 * prologue, whose output (val k) has the input's shape; reverse: a scan from the end of the dim.
 * 1, or -1 with detail. */
static int along(struct kfx_plan *p, const json_t *node, int k, int in, enum kfx_skind kind,
                 const char *op, long long dim, bool reverse, char *detail, size_t dlen) {
    struct kfx_step *st = kfx_add_step(p, kind, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "%s", op);
    st->reverse = reverse; /* here: the prologue may add a step of its own after this one */
    char leaves[1024], out[16];
    if (kfx_prologue(p, in, st, leaves, sizeof(leaves), detail, dlen) != 0)
        return -1;
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    kfx_line(p, "%s_g = _geom(%.*s.shape, (%lld,), True)", out, (int)strcspn(leaves, ","), leaves,
             dim);
    kfx_line(p, "%s = _alloc(%.*s.shape, %s)", out, (int)strcspn(leaves, ","), leaves, p->like);
    kfx_line(p, "self.k.%s(%s%s, *%s_g[:3])", st->fn, leaves, out, out);
    return 1;
}

/* a dtype argument that changes nothing: none, or float32 (every tensor a plan reads is) */
static bool same_dtype(const json_t *dt) {
    return dt == NULL || json_is_null(dt) ||
           (json_is_string(dt) && !strcmp(json_string_value(dt), "float32"));
}

/* Whether a log_softmax node (over dim of val in) is read only by an nll_loss that
 * expert_plan_loss.c plans as the cross entropy of in: over the classes of a 2-D in. */
static bool read_by_nll(struct kfx_plan *p, const json_t *node, int in, long long dim) {
    const json_t *user = kfx_sole_user(p, node);
    const char *mt = json_string_value(json_object_get(user, "module_type"));
    const char *us = kfw_short_name(json_string_value(json_object_get(user, "target")));
    const json_t *first = json_array_get(json_object_get(user, "args"), 0);
    const char *ref = json_string_value(json_object_get(first, "node"));
    const char *name = json_string_value(json_object_get(node, "name"));
    return user && (mt ? !strcmp(mt, "NLLLoss") : us && !strcmp(us, "nll_loss")) && ref && name &&
           !strcmp(ref, name) && p->val[in].ndim == 2 && (dim == 1 || dim == -1) &&
           !p->val[in].is_int;
}

static int softmax(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
                   char *detail, size_t dlen) {
    const json_t *dim = module ? json_object_get(json_object_get(node, "attrs"), "dim")
                               : kfx_node_arg(node, 1, "dim");
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *dt = json_object_get(json_object_get(node, "kwargs"), "dtype");
    /* nn.Softmax2d: over the channels of [C, H, W] or [N, C, H, W] */
    const char *mt = module ? json_string_value(json_object_get(node, "module_type")) : NULL;
    const bool channels = mt && !strcmp(mt, "Softmax2d");
    if (channels && (in < 0 || (p->val[in].ndim != 3 && p->val[in].ndim != 4))) {
        snprintf(detail, dlen, "Softmax2d of other than a 3-D or 4-D tensor");
        return -1;
    }
    if (in < 0 || !(channels || json_is_integer(dim)) || !same_dtype(dt)) {
        snprintf(detail, dlen, "%s without an integer dim, or with a dtype (not yet)", s);
        return -1;
    }
    if (!strcmp(s, "softmin")) { /* softmax of the negation, which the prologue reads */
        if (p->n_vals >= KFX_MAX_VALS || p->val[in].is_int) {
            snprintf(detail, dlen, "softmin of something that is not a float tensor");
            return -1;
        }
        int w = p->n_vals++;
        char e[24];
        snprintf(e, sizeof(e), "-v%d", in);
        memset(&p->val[w], 0, sizeof(p->val[w]));
        if (kfx_set_lazy(p, w, node, e) != 0)
            return -1;
        p->val[w].node = NULL; /* the node's readers find val k, the softmax */
        in = w;
        s = "softmax";
    }
    if (!strcmp(s, "log_softmax") && read_by_nll(p, node, in, json_integer_value(dim))) {
        /* expert_plan_loss.c plans the nll as the cross entropy of in: no pass of its own */
        kfx_set_val(p, k, node, KFX_TENSOR, "None");
        return 1;
    }
    return along(p, node, k, in, KFX_SOFTMAX, s, channels ? -3 : json_integer_value(dim), false,
                 detail, dlen);
}

/* torch.cumsum and torch.cumprod (functions and methods) over one dim: a scan step
 * (expert_scan.c) that reads the chain before it as its prologue, its output of the input's
 * shape. */
static int scan(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                size_t dlen) {
    const json_t *dim = kfx_node_arg(node, 1, "dim");
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *dt = json_object_get(json_object_get(node, "kwargs"), "dtype");
    if (in < 0 || !json_is_integer(dim) || !same_dtype(dt)) {
        snprintf(detail, dlen, "%s without an integer dim, or with a dtype (not yet)", s);
        return -1;
    }
    int nd = p->val[in].ndim;
    long long d = json_integer_value(dim);
    if (nd == 0 || d < -nd || d >= nd) {
        snprintf(detail, dlen, "%s over dim %lld of a %d-d tensor (not yet)", s, d, nd);
        return -1;
    }
    /* over a flip along the same dim (expert_plan_flip.c): backwards, its output flipped too */
    const int flipped = p->val[in].flipped;
    if (flipped && flipped != dim_of(d, nd) + 1) {
        snprintf(detail, dlen, "%s over a tensor flipped along another dim (not yet)", s);
        return -1;
    }
    int rc = along(p, node, k, in, KFX_SCAN, s, d, flipped != 0, detail, dlen);
    if (rc == 1)
        p->val[k].flipped = flipped;
    return rc;
}

static bool named(const json_t *t, const char *name) {
    const char *n = json_string_value(json_object_get(t, "name"));
    return n && strcmp(n, name) == 0;
}

/* A parameter (or buffer) of the graph as a val, viewed with `ones` trailing unit dims, bound
 * to a local of forward() (pN, N its val's index). A view of the module's own tensor is kept
 * between calls (_pview: a view is an ATen call, about 8 us under the judge's guard). */
static int param_val(struct kfx_plan *p, const json_t *a, const char *module_path,
                     const char *pname, int ones) {
    char py[160], local[16], full[128] = "";
    long long shape[KFX_MAX_DIMS];
    int nd = 0;
    bool own = true, buffer = false;
    snprintf(local, sizeof(local), "p%d", p->n_vals);
    if (module_path) {
        snprintf(full, sizeof(full), "%s.%s", module_path, pname);
        size_t i;
        const json_t *t, *found = NULL;
        json_array_foreach(json_object_get(p->graph, "parameters"), i, t) {
            if (named(t, full))
                found = t;
        }
        json_array_foreach(json_object_get(p->graph, "buffers"), i, t) {
            if (named(t, full)) {
                found = t;
                buffer = true;
            }
        }
        if (found == NULL)
            return -1;
        size_t j;
        const json_t *d;
        json_array_foreach(json_object_get(found, "shape"), j, d) {
            if (nd < KFX_MAX_DIMS)
                shape[nd++] = json_integer_value(d);
        }
        kfx_bind_param(p, local, full, buffer);
        snprintf(py, sizeof(py), "%s", local);
    } else {
        int v = kfx_arg_val(p, a);
        if (v < 0 || p->val[v].kind == KFX_LAZY || p->val[v].is_int)
            return -1;
        if (ones == 0)
            return v;
        snprintf(py, sizeof(py), "%s", p->val[v].py);
        own = p->val[v].kind == KFX_PARAM;
        nd = p->val[v].ndim;
        memcpy(shape, p->val[v].shape, sizeof(long long) * (size_t)nd);
    }
    if (ones > 0 && nd == 1) {
        const char *dims = ones == 1 ? ", 1" : ones == 2 ? ", 1, 1" : ", 1, 1, 1";
        if (own)
            kfx_line(p, "%s = _pview(self, \"%s\", %s, (-1%s))", local, local, py, dims);
        else
            kfx_line(p, "%s = %s.view(-1%s)", local, py, dims);
        snprintf(py, sizeof(py), "%s", local);
        for (int i = 0; i < ones && nd < KFX_MAX_DIMS; i++)
            shape[nd++] = 1;
    }
    return kfx_new_val(p, py, shape, nd);
}

/* Appends " * vW" / " + vB" for present affine vals. */
static void affine(char *e, size_t n, int w, int b) {
    size_t len = strlen(e);
    if (w >= 0)
        snprintf(e + len, n - len, " * v%d", w);
    len = strlen(e);
    if (b >= 0)
        snprintf(e + len, n - len, " + v%d", b);
}

enum norm { LAYER, BATCH, GROUP };

/* A statistics step over val in: mean and rstd vals of shape stat_shape; their indices. */
static int moments(struct kfx_plan *p, int in, enum norm kind, int L, long long groups, double eps,
                   int *m, int *r, char *detail, size_t dlen) {
    const struct kfx_val *x = &p->val[in];
    int nd = x->ndim;
    long long shape[KFX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        shape[i] =
            (kind == LAYER && i >= nd - L) || (kind == BATCH && i != 1) || (kind == GROUP && i >= 2)
                ? 1
                : x->shape[i];
    int sn = kind == BATCH ? nd - 1 : nd;
    const long long *sp = kind == BATCH ? shape + 1 : shape;
    struct kfx_step *st = kfx_add_step(p, KFX_MOMENTS, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "moments");
    char leaves[1024], lead[160], mp[16], rp[16], e[40];
    snprintf(e, sizeof(e), "%.9g", eps); /* a Python float */
    if (kfx_prologue(p, in, st, leaves, sizeof(leaves), detail, dlen) != 0)
        return -1;
    snprintf(lead, sizeof(lead), "%.*s", (int)strcspn(leaves, ","), leaves);
    *m = kfx_new_val(p, "", sp, sn);
    *r = kfx_new_val(p, "", sp, sn);
    if (*m < 0 || *r < 0)
        return -1;
    snprintf(mp, sizeof(mp), "t%d", *m);
    snprintf(rp, sizeof(rp), "t%d", *r);
    snprintf(p->val[*m].py, sizeof(p->val[*m].py), "%s", mp);
    snprintf(p->val[*r].py, sizeof(p->val[*r].py), "%s", rp);
    p->val[*m].kind = p->val[*r].kind = KFX_TENSOR;
    /* a layer norm's and a group norm's groups are contiguous: the elementwise pass that reads the
     * statistics may fuse (expert_plan_fuse.c). A group norm's statistics are per channel, rep
     * channels a group: on the cpu only, where the fused kernel writes each rep times */
    st->fusable = kind == LAYER || (kind == GROUP && strcmp(p->backend, "cpu") == 0);
    st->stat_in = in;
    st->stat_m = *m;
    st->stat_r = *r;
    kfx_line(p, "%s_s = list(%s.shape)", mp, lead);
    if (kind == LAYER) {
        kfx_line(p, "%s_b = math.prod(%s_s[len(%s_s) - %d :])", mp, mp, mp, L);
        kfx_line(p, "%s = _alloc(%s_s[: len(%s_s) - %d] + [1] * %d, %s)", mp, mp, mp, L, L,
                 p->like);
        kfx_line(p, "%s = _alloc(%s.shape, %s)", rp, mp, p->like);
        st->launch_at = p->fwd->len;
        kfx_line(p, "self.k.%s(%s%s, %s, 1, %s.numel(), %s_b, 1, %s)", st->fn, leaves, mp, rp, mp,
                 mp, e);
        st->launch_len = p->fwd->len - st->launch_at;
    } else if (kind == BATCH) {
        kfx_line(p, "%s = _alloc(%s_s[1:2] + [1] * (len(%s_s) - 2), %s)", mp, mp, mp, p->like);
        kfx_line(p, "%s = _alloc(%s.shape, %s)", rp, mp, p->like);
        kfx_line(p, "self.k.%s(%s%s, %s, %s_s[0], %s_s[1], math.prod(%s_s[2:]), 1, %s)", st->fn,
                 leaves, mp, rp, mp, mp, mp, e);
    } else {
        kfx_line(p, "%s = _alloc(%s_s[:2] + [1] * (len(%s_s) - 2), %s)", mp, mp, mp, p->like);
        kfx_line(p, "%s = _alloc(%s.shape, %s)", rp, mp, p->like);
        st->launch_at = p->fwd->len;
        kfx_line(p,
                 "self.k.%s(%s%s, %s, 1, %s_s[0] * %lld, %s_s[1] // %lld * math.prod(%s_s[2:]), "
                 "%s_s[1] // %lld, %s)",
                 st->fn, leaves, mp, rp, mp, groups, mp, groups, mp, mp, groups, e);
        st->launch_len = p->fwd->len - st->launch_at;
    }
    return 0;
}

static double num(const json_t *v, double def) {
    return json_is_number(v) ? json_number_value(v) : def;
}

/* RMS norm (nn.RMSNorm, F.rms_norm): x / sqrt(mean(x^2 over the last L dims) + eps) * weight,
 * a mean of squares (kfx_reduce, keepdim) and the lazy scaling after it. eps None is the
 * dtype's machine epsilon, as in PyTorch. 1, or -1. */
static int rms(struct kfx_plan *p, const json_t *node, int k, bool module, char *detail,
               size_t dlen) {
    const json_t *attrs = json_object_get(node, "attrs");
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (in < 0)
        return -1;
    int nd = p->val[in].ndim;
    const json_t *ns = module ? json_object_get(attrs, "normalized_shape")
                              : kfx_node_arg(node, 1, "normalized_shape");
    int L = json_is_array(ns) ? (int)json_array_size(ns) : 1;
    double eps = num(module ? json_object_get(attrs, "eps") : kfx_node_arg(node, 3, "eps"),
                     1.1920928955078125e-07);
    if (L < 1 || L > nd) {
        snprintf(detail, dlen, "RMS norm over %d of %d dimensions", L, nd);
        return -1;
    }
    int w = -1;
    const json_t *wa = kfx_node_arg(node, 2, "weight");
    if (module) {
        if (json_is_array(json_object_get(json_object_get(node, "parameters"), "weight")) &&
            (w = param_val(p, NULL, json_string_value(json_object_get(node, "target")), "weight",
                           0)) < 0)
            return -1;
    } else if (wa && !json_is_null(wa) && (w = param_val(p, wa, NULL, NULL, 0)) < 0) {
        return -1;
    }
    char e[160];
    snprintf(e, sizeof(e), "v%d * v%d", in, in);
    int a = kfx_new_lazy(p, in, e);
    int r = a < 0 ? -1 : kfx_new_out(p);
    if (r < 0) {
        snprintf(detail, dlen, "a graph of more than %d values", KFX_MAX_VALS);
        return -1;
    }
    json_t *dims = json_array();
    for (int d = nd - L; d < nd; d++)
        json_array_append_new(dims, json_integer(d));
    int rc = kfx_reduce(p, node, r, a, "mean", dims, true, detail, dlen);
    json_decref(dims);
    if (rc != 1)
        return -1;
    /* the statistics' shape: the input's with the normalised dims kept as 1 */
    p->val[r].ndim = nd;
    memcpy(p->val[r].shape, p->val[in].shape, sizeof(long long) * (size_t)nd);
    for (int d = nd - L; d < nd; d++)
        p->val[r].shape[d] = 1;
    char lit[40];
    snprintf(e, sizeof(e), "v%d * (1.0f / sqrtf(v%d + %s))", in, r, kfw_ew_lit(eps, lit));
    affine(e, sizeof(e), w, -1);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

static int norm(struct kfx_plan *p, const json_t *node, int k, const char *s, const char *mtype,
                char *detail, size_t dlen) {
    const json_t *attrs = json_object_get(node, "attrs");
    const char *path = json_string_value(json_object_get(node, "target"));
    bool module = mtype != NULL;
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (in < 0)
        return -1;
    int nd = p->val[in].ndim;
    enum norm kind;
    int L = 0, w = -1, b = -1, m, r, ones = 0;
    long long groups = 1;
    double eps;
    bool training = true;
    const json_t *wa = NULL, *ba = NULL;
    if (module ? !strcmp(mtype, "LayerNorm") : !strcmp(s, "layer_norm")) {
        kind = LAYER;
        const json_t *ns = module ? json_object_get(attrs, "normalized_shape")
                                  : kfx_node_arg(node, 1, "normalized_shape");
        L = json_is_array(ns) ? (int)json_array_size(ns) : 1;
        eps = num(module ? json_object_get(attrs, "eps") : kfx_node_arg(node, 4, "eps"), 1e-5);
        wa = kfx_node_arg(node, 2, "weight");
        ba = kfx_node_arg(node, 3, "bias");
    } else if (module ? !strncmp(mtype, "BatchNorm", 9) : !strcmp(s, "batch_norm")) {
        kind = BATCH;
        ones = nd - 2;
        training = module ? json_is_true(json_object_get(attrs, "training")) ||
                                !json_is_true(json_object_get(attrs, "track_running_stats"))
                          : json_is_true(kfx_node_arg(node, 5, "training"));
        eps = num(module ? json_object_get(attrs, "eps") : kfx_node_arg(node, 7, "eps"), 1e-5);
        wa = kfx_node_arg(node, 3, "weight");
        ba = kfx_node_arg(node, 4, "bias");
    } else if (module ? !strcmp(mtype, "GroupNorm") : !strcmp(s, "group_norm")) {
        kind = GROUP;
        ones = nd - 2;
        groups = (long long)num(
            module ? json_object_get(attrs, "num_groups") : kfx_node_arg(node, 1, "num_groups"), 1);
        eps = num(module ? json_object_get(attrs, "eps") : kfx_node_arg(node, 4, "eps"), 1e-5);
        wa = kfx_node_arg(node, 2, "weight");
        ba = kfx_node_arg(node, 3, "bias");
    } else if (module ? !strncmp(mtype, "InstanceNorm", 12) : !strcmp(s, "instance_norm")) {
        /* statistics per sample and channel: a group norm with a group per channel */
        kind = GROUP;
        ones = nd - 2;
        groups = nd >= 2 ? p->val[in].shape[1] : 1;
        eps = num(module ? json_object_get(attrs, "eps") : kfx_node_arg(node, 7, "eps"), 1e-5);
        wa = kfx_node_arg(node, 3, "weight");
        ba = kfx_node_arg(node, 4, "bias");
        const json_t *uis = kfx_node_arg(node, 5, "use_input_stats");
        if (module ? json_is_true(json_object_get(attrs, "track_running_stats")) &&
                         !json_is_true(json_object_get(attrs, "training"))
                   : uis != NULL && json_is_false(uis)) {
            snprintf(detail, dlen, "%s with running statistics (not yet)", mtype ? mtype : s);
            return -1;
        }
    } else if (module ? !strcmp(mtype, "RMSNorm") : !strcmp(s, "rms_norm")) {
        return rms(p, node, k, module, detail, dlen);
    } else {
        return 0;
    }
    if (nd < (kind == LAYER ? 1 : 2) || L > nd || groups < 1 || (kind == BATCH && nd > 5)) {
        snprintf(detail, dlen, "%s on a %d-dimensional input (not yet)", mtype ? mtype : s, nd);
        return -1;
    }
    if (module) {
        const json_t *params = json_object_get(node, "parameters");
        if (json_is_array(json_object_get(params, "weight")))
            w = param_val(p, NULL, path, "weight", ones);
        if (json_is_array(json_object_get(params, "bias")))
            b = param_val(p, NULL, path, "bias", ones);
    } else {
        if (wa && !json_is_null(wa) && (w = param_val(p, wa, NULL, NULL, ones)) < 0)
            return -1;
        if (ba && !json_is_null(ba) && (b = param_val(p, ba, NULL, NULL, ones)) < 0)
            return -1;
    }
    char e[256];
    if (kind == BATCH && !training) {
        int rm = module ? param_val(p, NULL, path, "running_mean", ones)
                        : param_val(p, kfx_node_arg(node, 1, "running_mean"), NULL, NULL, ones);
        int rv = module ? param_val(p, NULL, path, "running_var", ones)
                        : param_val(p, kfx_node_arg(node, 2, "running_var"), NULL, NULL, ones);
        char lit[40];
        if (rm < 0 || rv < 0)
            return -1;
        snprintf(e, sizeof(e), "(v%d - v%d) / sqrtf(v%d + %s)", in, rm, rv, kfw_ew_lit(eps, lit));
    } else {
        if (moments(p, in, kind, L, groups, eps, &m, &r, detail, dlen) != 0)
            return -1;
        snprintf(e, sizeof(e), "(v%d - v%d) * v%d", in, m, r);
    }
    affine(e, sizeof(e), w, b);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* A node for expert_ops.h: operands materialised, output in a new tensor, bias lazy. */
static int library(struct kfx_plan *p, const json_t *node, int k, enum kfx_skind kind, int n_ops,
                   int bias_ones, char *detail, size_t dlen) {
    const char *path = json_string_value(json_object_get(node, "target"));
    bool module = !strcmp(json_string_value(json_object_get(node, "op")), "call_module");
    int ops[2];
    bool trans_b = false, trans_a = false;
    const char *b_view = NULL, *a_view = NULL;
    for (int i = 0; i < n_ops; i++) {
        if (module && i == 1) {
            ops[i] = param_val(p, NULL, path, "weight", 0);
        } else {
            ops[i] = kfx_arg_val(p, kfx_node_arg(node, (size_t)i, i == 0 ? "input" : "weight"));
            if (ops[i] < 0) {
                const json_t *a = kfx_node_arg(node, (size_t)i, i == 0 ? "input" : "other");
                ops[i] = kfx_arg_val(p, a);
            }
        }
        /* a matmul's operand that is a contiguous tensor with its last two dims swapped: that
         * tensor, read with op = transpose (no copy); a only as a matrix (a batched a times one
         * b is one product of all its rows, which its transpose's layout does not hold) */
        if (kind == KFX_GEMM && bias_ones < 0 && ops[i] >= 0 && p->val[ops[i]].last2_of &&
            (i == 1 || p->val[ops[i]].ndim == 2)) {
            *(i == 0 ? &a_view : &b_view) = p->val[ops[i]].py;
            *(i == 0 ? &trans_a : &trans_b) = true;
            ops[i] = p->val[ops[i]].last2_of - 1;
        }
        if (ops[i] < 0 || kfx_materialise(p, ops[i], detail, dlen) != 0) {
            if (!detail[0])
                snprintf(detail, dlen, "%s: an operand that is not a tensor", path);
            return -1;
        }
    }
    struct kfx_step *st = kfx_add_step(p, kind, detail, dlen);
    if (st == NULL)
        return -1;
    st->node = node;
    st->n_ins = n_ops;
    st->trans_b = trans_b;
    st->trans_a = trans_a;
    for (int i = 0; i < n_ops; i++)
        snprintf(st->ins[i], sizeof(st->ins[i]), "%s", p->val[ops[i]].py);
    int bias = -1;
    if (bias_ones >= 0) {
        if (module) {
            if (json_is_array(json_object_get(json_object_get(node, "parameters"), "bias")))
                bias = param_val(p, NULL, path, "bias", bias_ones);
        } else {
            const json_t *ba = kfx_node_arg(node, 2, "bias");
            if (ba && !json_is_null(ba) && (bias = param_val(p, ba, NULL, NULL, bias_ones)) < 0) {
                snprintf(detail, dlen, "%s: a bias that is not a tensor", path);
                return -1;
            }
        }
    }
    int outv = k;
    if (bias >= 0 && (outv = kfx_new_val(p, "", p->val[k].shape, 0)) < 0)
        return -1;
    kfx_set_val(p, outv, node, KFX_TENSOR, "");
    snprintf(p->val[outv].py, sizeof(p->val[outv].py), "t%d", outv);
    if (kind == KFX_CONV)
        st->conv_out = outv;
    struct kfx_call c = {.node = node,
                         .fn = st->fn,
                         .n_in = n_ops,
                         .out = p->val[outv].py,
                         .backend = p->backend,
                         .trans_b = trans_b,
                         .trans_a = trans_a,
                         .b_view = b_view,
                         .a_view = a_view};
    for (int i = 0; i < n_ops; i++)
        c.in[i] = st->ins[i];
    int rc = kind == KFX_GEMM   ? kfx_gemm_py(&c, p->fwd, detail, dlen)
             : kind == KFX_CONV ? kfx_conv_py(&c, p->fwd, detail, dlen)
                                : kfx_pool_py(&c, p->fwd, detail, dlen);
    if (rc != 0)
        return -1;
    if (bias >= 0) {
        char e[64];
        snprintf(e, sizeof(e), "v%d + v%d", outv, bias);
        return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
    }
    return 1;
}

/* nn.Conv1d/2d/3d with padding_mode reflect, replicate or circular, as PyTorch runs it: F.pad of
 * the input in that mode (a gather step, expert_plan_gather.c), then the convolution with no
 * padding, a copy of the node reading the padded input (kept in the plan's graph). 1 handled, 0
 * not such a convolution, -1 with detail. */
static int conv_padded(struct kfx_plan *p, const json_t *node, int k, const char *mtype,
                       char *detail, size_t dlen) {
    const json_t *at = json_object_get(node, "attrs");
    const char *mode = json_string_value(json_object_get(at, "padding_mode"));
    const char *name = json_string_value(json_object_get(node, "name"));
    const int rank = !strcmp(mtype, "Conv2d") ? 2 : kfx_convnd_rank(node);
    if (!mode || !strcmp(mode, "zeros") || rank < 1 || strncmp(mtype, "Conv", 4) != 0 || !name)
        return 0;
    const json_t *pad = json_object_get(at, "padding");
    int x = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (!json_is_array(pad) || (int)json_array_size(pad) != rank || x < 0 ||
        p->val[x].ndim < rank + 1 || p->val[x].ndim > KFX_MAX_DIMS) {
        snprintf(detail, dlen, "%s %s with padding_mode %s and a padding other than ints (not yet)",
                 mtype, name, mode);
        return -1;
    }
    /* F.pad's list runs from the last dim: (left, right) of each, as _reversed_padding_.. */
    const int nd = p->val[x].ndim;
    long long shape[KFX_MAX_DIMS];
    memcpy(shape, p->val[x].shape, sizeof(shape[0]) * (size_t)nd);
    json_t *pads = json_array(), *dims = json_array(), *zeros = json_array();
    for (int d = rank - 1; d >= 0; d--) {
        long long v = json_integer_value(json_array_get(pad, (size_t)d));
        json_array_append_new(pads, json_integer(v));
        json_array_append_new(pads, json_integer(v));
        shape[nd - rank + d] += 2 * v;
        json_array_append_new(zeros, json_integer(0));
    }
    for (int d = 0; d < nd; d++)
        json_array_append_new(dims, json_integer(shape[d]));
    int xp =
        kfx_synth_tagged(p, name, "pad", "torch.nn.functional.pad",
                         json_pack("[o, o, s]", kfx_synth_ref(p, x), pads, mode),
                         json_pack("{s:o, s:s}", "shape", dims, "dtype", "float32"), detail, dlen);
    json_t *c = xp < 0 ? NULL : json_deep_copy(node);
    json_t *list = json_object_get(p->graph, "kfx_einsum");
    char cname[192];
    snprintf(cname, sizeof(cname), "%s@conv", name);
    if (c == NULL || list == NULL || json_array_append_new(list, c) != 0) {
        json_decref(zeros);
        if (!detail[0])
            snprintf(detail, dlen, "%s %s with padding_mode %s: the pad", mtype, name, mode);
        return -1;
    }
    json_object_set_new(c, "name", json_string(cname));
    json_array_set_new(json_object_get(c, "args"), 0, kfx_synth_ref(p, xp));
    json_object_set_new(json_object_get(c, "attrs"), "padding", zeros);
    json_object_set_new(json_object_get(c, "attrs"), "padding_mode", json_string("zeros"));
    int rc = library(p, c, k, KFX_CONV, 2, rank, detail, dlen);
    p->val[k].node = node; /* later readers find k by the node's own name */
    return rc;
}

/* nn.AdaptiveAvgPool1d/2d/3d(1) and F.adaptive_avg_pool1d/2d/3d(x, 1) (also (1, 1) ..): the
 * mean over the last 1, 2 or 3 dimensions, kept; other output sizes are not planned. */
static int adaptive_to_1(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                         size_t dlen) {
    static const char *const names[4][3] = {
        {"AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"},
        {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"},
        {"AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"},
        {"adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"}};
    int rank = 0;
    bool module = false, max = false;
    for (int m = 0; m < 4; m++)
        for (int r = 0; r < 3; r++)
            if (!strcmp(s, names[m][r])) {
                rank = r + 1;
                module = m % 2 == 0;
                max = m >= 2;
            }
    if (rank == 0)
        return 0;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *os =
        module ? json_object_get(attrs, "output_size") : kfx_node_arg(node, 1, "output_size");
    const json_t *ri =
        module ? json_object_get(attrs, "return_indices") : kfx_node_arg(node, 2, "return_indices");
    bool one = json_is_integer(os) && json_integer_value(os) == 1;
    if (json_is_array(os) && json_array_size(os) == (size_t)rank) {
        one = true;
        for (int i = 0; i < rank; i++)
            one = one && json_integer_value(json_array_get(os, (size_t)i)) == 1;
    }
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (!one || in < 0 || p->val[in].ndim < rank + 1 || json_is_true(ri)) {
        snprintf(detail, dlen, "%s to an output other than 1, or with indices (not yet)", s);
        return -1;
    }
    /* the mean or the max over the last rank dims, kept: an output of 1 along each */
    json_t *dims = json_array();
    for (int i = rank; i >= 1; i--)
        json_array_append_new(dims, json_integer(-i));
    int rc = kfx_reduce(p, node, k, in, max ? "amax" : "mean", dims, true, detail, dlen);
    json_decref(dims);
    return rc;
}

/* nn.PReLU and F.prelu(x, weight): x > 0 ? x : w * x, the weight (one value, or one per
 * channel) along dim 1. */
static int prelu(struct kfx_plan *p, const json_t *node, int k, bool module, char *detail,
                 size_t dlen) {
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (in < 0 || p->val[in].is_int) {
        snprintf(detail, dlen, "prelu of something that is not a float tensor");
        return -1;
    }
    int ones = p->val[in].ndim >= 2 ? p->val[in].ndim - 2 : 0;
    int w = module ? param_val(p, NULL, json_string_value(json_object_get(node, "target")),
                               "weight", ones)
                   : param_val(p, kfx_node_arg(node, 1, "weight"), NULL, NULL, ones);
    if (w < 0) {
        snprintf(detail, dlen, "prelu with a weight that is not a parameter (not yet)");
        return -1;
    }
    char e[96];
    snprintf(e, sizeof(e), "v%d > 0.0f ? v%d : v%d * v%d", in, in, w, in);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

int kfx_plan_anchor(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    const char *mtype = NULL;
    int vrc = kfx_plan_view(p, node, k, detail, dlen);
    if (vrc != 0)
        return vrc;
    if (!strcmp(op, "call_module")) {
        mtype = json_string_value(json_object_get(node, "module_type"));
        if (mtype == NULL)
            return 0;
        if (!strcmp(mtype, "Softmax") || !strcmp(mtype, "LogSoftmax") ||
            !strcmp(mtype, "Softmin") || !strcmp(mtype, "Softmax2d"))
            return softmax(p, node, k,
                           !strncmp(mtype, "Softmax", 7) ? "softmax"
                           : !strcmp(mtype, "Softmin")   ? "softmin"
                                                         : "log_softmax",
                           true, detail, dlen);
        if (!strcmp(mtype, "Linear"))
            return library(p, node, k, KFX_GEMM, 2, 0, detail, dlen);
        if (!strcmp(mtype, "Embedding"))
            return kfx_plan_embedding(
                p, node, k,
                param_val(p, NULL, json_string_value(json_object_get(node, "target")), "weight", 0),
                detail, dlen);
        if (kfx_is_rnn(node))
            return kfx_plan_rnn(p, node, k, detail, dlen);
        if (!strcmp(mtype, "MultiheadAttention")) { /* a tuple: its items planned when read */
            kfx_set_val(p, k, node, KFX_TUPLE, "");
            return 1;
        }
        if (!strcmp(mtype, "PReLU"))
            return prelu(p, node, k, true, detail, dlen);
        int prc = conv_padded(p, node, k, mtype, detail, dlen);
        if (prc != 0)
            return prc;
        if (!strcmp(mtype, "Conv2d"))
            return library(p, node, k, KFX_CONV, 2, 2, detail, dlen);
        if (kfx_convnd_rank(node) > 0)
            return library(p, node, k, KFX_CONV, 2, kfx_convnd_rank(node), detail, dlen);
        if (!strcmp(mtype, "MaxPool2d") || !strcmp(mtype, "AvgPool2d") ||
            !strcmp(mtype, "MaxPool1d") || !strcmp(mtype, "AvgPool1d") ||
            !strcmp(mtype, "MaxPool3d") || !strcmp(mtype, "AvgPool3d"))
            return library(p, node, k, KFX_POOL, 1, -1, detail, dlen);
        int rc = kfx_plan_gather(p, node, k, mtype, detail, dlen);
        if (rc == 0)
            rc = kfx_plan_loss(p, node, k, mtype, detail, dlen);
        if (rc == 0)
            rc = adaptive_to_1(p, node, k, mtype, detail, dlen);
        return rc != 0 ? rc : norm(p, node, k, s, mtype, detail, dlen);
    }
    if (!strcmp(s, "getitem") || !strcmp(s, "getattr"))
        return getitem(p, node, k, detail, dlen);
    if (kfx_is_embedding(node))
        return kfx_plan_embedding(p, node, k, kfx_arg_val(p, kfx_node_arg(node, 1, "weight")),
                                  detail, dlen);
    if (!strcmp(s, "softmax") || !strcmp(s, "log_softmax") || !strcmp(s, "softmin"))
        return softmax(p, node, k, s, false, detail, dlen);
    if (!strcmp(s, "cumsum") || !strcmp(s, "cumprod") || !strcmp(s, "logcumsumexp"))
        return scan(p, node, k, s, detail, dlen);
    if (!strcmp(s, "cummax") || !strcmp(s, "cummin")) { /* a tuple: its values planned when read */
        kfx_set_val(p, k, node, KFX_TUPLE, "");
        return 1;
    }
    if (!strcmp(s, "flip")) { /* the ends of a reverse scan, else a gather */
        int frc = kfx_plan_flip(p, node, k, detail, dlen);
        return frc != 0 ? frc : kfx_plan_gather(p, node, k, s, detail, dlen);
    }
    if (!strcmp(s, "diag"))
        return kfx_plan_diag(p, node, k, detail, dlen);
    int crc = kfx_plan_cat(p, node, k, s, detail, dlen);
    if (crc == 0)
        crc = kfx_plan_tri(p, node, k, s, detail, dlen);
    if (crc == 0)
        crc = kfx_plan_fill(p, node, k, s, detail, dlen);
    if (crc == 0)
        crc = kfx_plan_einsum(p, node, k, s, detail, dlen);
    if (crc == 0)
        crc = kfx_plan_rewrite(p, node, k, s, detail, dlen);
    if (crc == 0)
        crc = kfx_plan_sdpa(p, node, k, s, detail, dlen);
    if (crc != 0)
        return crc;
    int drc = kfx_plan_diag_product(p, node, k, detail, dlen);
    if (drc != 0)
        return drc;
    static const char *const gemm[] = {"matmul", "mm", "bmm", NULL};
    if (is(s, gemm))
        return library(p, node, k, KFX_GEMM, 2, -1, detail, dlen);
    if (!strcmp(s, "linear"))
        return library(p, node, k, KFX_GEMM, 2, 0, detail, dlen);
    if (!strcmp(s, "prelu"))
        return prelu(p, node, k, false, detail, dlen);
    if (!strcmp(s, "conv2d"))
        return library(p, node, k, KFX_CONV, 2, 2, detail, dlen);
    if (kfx_convnd_rank(node) > 0)
        return library(p, node, k, KFX_CONV, 2, kfx_convnd_rank(node), detail, dlen);
    if (!strcmp(s, "max_pool2d") || !strcmp(s, "avg_pool2d") || !strcmp(s, "max_pool1d") ||
        !strcmp(s, "avg_pool1d") || !strcmp(s, "max_pool3d") || !strcmp(s, "avg_pool3d"))
        return library(p, node, k, KFX_POOL, 1, -1, detail, dlen);
    int rc = kfx_plan_gather(p, node, k, s, detail, dlen);
    if (rc == 0)
        rc = adaptive_to_1(p, node, k, s, detail, dlen);
    if (rc == 0)
        rc = reduction(p, node, k, s, detail, dlen);
    if (rc == 0)
        rc = pnorm(p, node, k, s, detail, dlen);
    if (rc == 0)
        rc = variance(p, node, k, s, detail, dlen);
    if (rc == 0)
        rc = kfx_plan_loss(p, node, k, s, detail, dlen);
    if (rc != 0)
        return rc;
    return norm(p, node, k, s, NULL, detail, dlen);
}
