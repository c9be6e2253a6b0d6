/* expert_plan_attention.c: F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
 * is_causal, scale) planned as the computation PyTorch documents for it, from synthetic nodes
 * (kfx_plan_synth):
 *   scores = q @ k.transpose(-2, -1)   a matmul reading k transposed (expert_gemm.c)
 *   scores * scale                     1 / sqrt(E) unless scale is given; lazy
 *   masked                             is_causal: -inf above the diagonal of a tril mask
 *                                      (expert_tri.c's KFX_MASK, top-left aligned as PyTorch's
 *                                      torch.ones(L, S).tril()); a bool attn_mask: -inf where it
 *                                      is False; a float one: added
 *   softmax over the keys              its prologue takes the lazy chain above
 *   @ v                                a matmul
 * dropout_p other than 0 (random), grouped-query attention (enable_gqa) and a mask together with
 * is_causal (an error in PyTorch) are refused. The fused attention kernels eager runs keep the
 * scores out of memory; this plan writes them once (L x S floats a head). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* The output meta of a float32 tensor of x's shape with its last dim last (or, swap, its last
 * two swapped), and its last dim replaced by last when last > 0. */
static json_t *meta(const struct kfx_val *x, bool swap, long long last) {
    json_t *shape = json_array();
    for (int d = 0; d < x->ndim; d++) {
        int from = !swap ? d : d == x->ndim - 2 ? d + 1 : d == x->ndim - 1 ? d - 1 : d;
        long long n = d == x->ndim - 1 && last > 0 ? last : x->shape[from];
        json_array_append_new(shape, json_integer(n));
    }
    return json_pack("{s:o, s:s}", "shape", shape, "dtype", "float32");
}

static bool float_tensor(const struct kfx_plan *p, int v) {
    return v >= 0 && !p->val[v].is_int && p->val[v].kind != KFX_TUPLE &&
           p->val[v].kind != KFX_SIZE && p->val[v].ndim >= 2;
}

int kfx_plan_sdpa(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen) {
    if (strcmp(s, "scaled_dot_product_attention") != 0)
        return 0;
    const char *name = json_string_value(json_object_get(node, "name"));
    int q = kfx_arg_val(p, kfx_node_arg(node, 0, "query"));
    int kk = kfx_arg_val(p, kfx_node_arg(node, 1, "key"));
    int v = kfx_arg_val(p, kfx_node_arg(node, 2, "value"));
    const json_t *mj = kfx_node_arg(node, 3, "attn_mask"), *dj = kfx_node_arg(node, 4, "dropout_p");
    const json_t *cj = kfx_node_arg(node, 5, "is_causal"), *sj = kfx_node_arg(node, 6, "scale");
    const json_t *gj = kfx_node_arg(node, 7, "enable_gqa");
    const bool has_mask = mj && !json_is_null(mj), causal = json_is_true(cj);
    int m = has_mask ? kfx_arg_val(p, mj) : -1;
    const char *mdt =
        m >= 0 && p->val[m].node
            ? json_string_value(json_object_get(json_object_get(p->val[m].node, "output"), "dtype"))
            : NULL;
    bool ok = name && float_tensor(p, q) && float_tensor(p, kk) && float_tensor(p, v) &&
              p->val[q].ndim == p->val[kk].ndim && p->val[kk].ndim == p->val[v].ndim &&
              (!dj || (json_is_number(dj) && json_number_value(dj) == 0.0)) &&
              (!cj || json_is_boolean(cj)) && !json_is_true(gj) &&
              (!sj || json_is_null(sj) || json_is_number(sj)) && !(has_mask && causal) &&
              (!has_mask || (m >= 0 && p->val[m].kind != KFX_TUPLE && p->val[m].kind != KFX_SIZE &&
                             !p->val[m].is_int)); /* a bool input is read as float: not is_int */
    const int nd = ok ? p->val[q].ndim : 0;
    for (int d = 0; ok && d < nd - 2; d++) /* the leading (batch, head) dims: equal */
        ok = p->val[q].shape[d] == p->val[kk].shape[d] && p->val[kk].shape[d] == p->val[v].shape[d];
    if (!ok || p->val[q].shape[nd - 1] != p->val[kk].shape[nd - 1] ||
        p->val[kk].shape[nd - 2] != p->val[v].shape[nd - 2]) {
        snprintf(detail, dlen,
                 "scaled_dot_product_attention of other than float q, k, v of one batch shape, "
                 "without dropout, grouped queries, a mask with is_causal, or a mask computed as "
                 "a bool tensor (not yet)");
        return -1;
    }
    const long long E = p->val[q].shape[nd - 1], L = p->val[q].shape[nd - 2];
    const long long S = p->val[kk].shape[nd - 2];
    const double scale = sj && json_is_number(sj) ? json_number_value(sj) : 1.0 / sqrt((double)E);
    json_t *rk = kfx_synth_ref(p, kk), *rq = kfx_synth_ref(p, q);
    int kt = rk ? kfx_synth_tagged(p, name, "keys_t", "torch.transpose",
                                   json_pack("[o, i, i]", rk, -2, -1), meta(&p->val[kk], true, 0),
                                   detail, dlen)
                : -1;
    json_t *rkt = kt >= 0 ? kfx_synth_ref(p, kt) : NULL;
    if (rq == NULL || rkt == NULL) {
        json_decref(rq);
        json_decref(rkt);
        return -1;
    }
    int sc = kfx_synth_tagged(p, name, "scores", "torch.matmul", json_pack("[o, o]", rq, rkt),
                              meta(&p->val[q], false, S), detail, dlen);
    if (sc < 0)
        return -1;
    char lit[40], e[256];
    kfw_ew_lit(scale, lit);
    if (causal) {
        int mv = kfx_tri_mask(p, k, "tril", L, S, 0, detail, dlen);
        if (mv < 0)
            return -1;
        snprintf(e, sizeof(e), "v%d != 0.0f ? v%d * %s : (-INFINITY)", mv, sc, lit);
    } else if (has_mask && mdt && !strcmp(mdt, "bool")) {
        snprintf(e, sizeof(e), "v%d != 0.0f ? v%d * %s : (-INFINITY)", m, sc, lit);
    } else if (has_mask) {
        snprintf(e, sizeof(e), "v%d * %s + v%d", sc, lit, m);
    } else {
        snprintf(e, sizeof(e), "v%d * %s", sc, lit);
    }
    int masked = kfx_new_lazy(p, sc, e);
    if (masked < 0)
        return -1;
    char mn[192];
    snprintf(mn, sizeof(mn), "%s@masked", name);
    p->val[masked].node =
        kfx_plan_synth(p, mn, "kforge.masked_scores", json_array(), meta(&p->val[q], false, S));
    json_t *rm = kfx_synth_ref(p, masked);
    int w = rm ? kfx_synth_tagged(p, name, "weights", "torch.softmax", json_pack("[o, i]", rm, -1),
                                  meta(&p->val[q], false, S), detail, dlen)
               : -1;
    json_t *rw = w >= 0 ? kfx_synth_ref(p, w) : NULL, *rv = kfx_synth_ref(p, v);
    if (rw == NULL || rv == NULL) {
        json_decref(rw);
        json_decref(rv);
        return -1;
    }
    json_t *out = kfx_plan_synth(p, name, "torch.matmul", json_pack("[o, o]", rw, rv),
                                 json_deep_copy(json_object_get(node, "output")));
    if (out == NULL)
        return -1;
    p->val[k].node = out;
    return kfx_plan_anchor(p, out, k, detail, dlen);
}
