/* expert_plan_mha.c: nn.MultiheadAttention, planned when its output (item 0 of the tuple it
 * returns) is read, from synthetic nodes (kfx_plan_synth), as PyTorch's
 * multi_head_attention_forward computes it. Self-attention (query, key and value one tensor x):
 *   proj = F.linear(x, in_proj_weight, in_proj_bias)            [L, N, 3E] ([N, L, 3E] batch_first)
 *   q, k, v = proj.view(L, N, 3, H, D).permute(2, 1, 3, 0, 4)[i]   [N, H, L, D] each, a view
 * Cross-attention (a decoder reading an encoder's memory m of S steps): the query projected by
 * the in-projection's first E rows, the key and value by the rest, in one product when they
 * are one tensor (m: [S, N, 2E], two parts), else one each. Then
 *   y = F.scaled_dot_product_attention(q, k, v)                  (expert_plan_attention.c)
 *   y.permute(2, 0, 1, 3).reshape(L, N, E)                       (batch_first: transpose(1, 2))
 *   F.linear(y, out_proj.weight, out_proj.bias)
 * An attn_mask of [L, S] and a key padding mask of [N, S] are added to the scores (a bool one
 * as -inf where it is true); with is_causal, need_weights=False and no key padding mask the
 * attention is causal, the mask only a hint, as PyTorch computes it. The attention weights
 * (item 1) where something reads them, a mask that is a view of a bool tensor, dropout in
 * training, separate key or value sizes, bias_k/bias_v and add_zero_attn are refused. */
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* {"shape": [..n], "dtype": "float32"} with "stride" when stride is given. */
static json_t *meta(const long long *shape, const long long *stride, int n) {
    json_t *sh = json_array(), *st = stride ? json_array() : NULL;
    for (int i = 0; i < n; i++) {
        json_array_append_new(sh, json_integer(shape[i]));
        if (st)
            json_array_append_new(st, json_integer(stride[i]));
    }
    json_t *m = json_pack("{s:o, s:s}", "shape", sh, "dtype", "float32");
    if (st)
        json_object_set_new(m, "stride", st);
    return m;
}

/* The val of the module's parameter path.leaf, from a synthetic get_attr node; -1 when the
 * module has no such parameter. */
static int param(struct kfx_plan *p, const char *name, const char *path, const char *leaf,
                 char *detail, size_t dlen) {
    char target[192], n[192];
    snprintf(target, sizeof(target), "%s.%s", path, leaf);
    snprintf(n, sizeof(n), "%s@%s", name, leaf);
    size_t i;
    const json_t *t, *found = NULL;
    json_array_foreach(json_object_get(p->graph, "parameters"), i, t) {
        const char *pn = json_string_value(json_object_get(t, "name"));
        if (pn && !strcmp(pn, target))
            found = t;
    }
    if (found == NULL || p->n_vals >= KFX_MAX_VALS)
        return -1;
    json_t *node = kfx_plan_synth(
        p, n, target, json_array(),
        json_pack("{s:O, s:s}", "shape", json_object_get(found, "shape"), "dtype", "float32"));
    if (node == NULL)
        return -1;
    json_object_set_new(node, "op", json_string("get_attr"));
    int k = p->n_vals++;
    memset(&p->val[k], 0, sizeof(p->val[k]));
    p->val[k].node = node;
    return kfx_plan_attribute(p, node, k, detail, dlen) == 0 ? k : -1;
}

/* Contiguous strides of shape[0..n). */
static void strides(const long long *shape, int n, long long *out) {
    long long s = 1;
    for (int d = n - 1; d >= 0; d--) {
        out[d] = s;
        s *= shape[d];
    }
}

/* Rows [from, from + n) of parameter val w (the in-projection's [3E, E] weight or its [3E]
 * bias), a synthetic getitem; its val, or -1. */
static int rows(struct kfx_plan *p, const char *name, const char *tag, int w, long long from,
                long long n, char *detail, size_t dlen) {
    const long long shape[2] = {n, p->val[w].ndim == 2 ? p->val[w].shape[1] : 0};
    char sl[64];
    snprintf(sl, sizeof(sl), "slice(%lld, %lld, None)", from, from + n);
    return kfx_synth_tagged(p, name, tag, "_operator.getitem",
                            json_pack("[o, [s]]", kfx_synth_ref(p, w), sl),
                            meta(shape, NULL, p->val[w].ndim), detail, dlen);
}

/* src ([A, N, E], or [N, A, E] batch first) projected by the in-projection's rows [c0 E,
 * (c0 + c) E) (weight w, bias b or -1) in one product, split into c heads views [N, H, A, D]:
 * their vals in part[0..c). tag names the synthetic nodes. 0, or -1. */
static int project(struct kfx_plan *p, const char *name, const char *tag, int src, int w, int b,
                   int c0, int c, long long H, bool bf, int *part, char *detail, size_t dlen) {
    const long long E = p->val[src].shape[2], D = E / H;
    char t[64];
    if (c < 3) { /* the rows of this projection */
        snprintf(t, sizeof(t), "%s_weight", tag);
        w = rows(p, name, t, w, c0 * E, c * E, detail, dlen);
        snprintf(t, sizeof(t), "%s_bias", tag);
        b = b >= 0 ? rows(p, name, t, b, c0 * E, c * E, detail, dlen) : -1;
        if (w < 0)
            return -1;
    }
    const long long pshape[3] = {p->val[src].shape[0], p->val[src].shape[1], c * E};
    json_t *largs = b >= 0 ? json_pack("[o, o, o]", kfx_synth_ref(p, src), kfx_synth_ref(p, w),
                                       kfx_synth_ref(p, b))
                           : json_pack("[o, o, n]", kfx_synth_ref(p, src), kfx_synth_ref(p, w));
    snprintf(t, sizeof(t), "%s_proj", tag);
    int proj = kfx_synth_tagged(p, name, t, "torch.nn.functional.linear", largs,
                                meta(pshape, NULL, 3), detail, dlen);
    if (proj < 0)
        return -1;
    if (c == 1) { /* viewed as [A, N, H, D] (or [N, A, H, D]), permuted to [N, H, A, D] */
        const long long hshape[4] = {pshape[0], pshape[1], H, D};
        snprintf(t, sizeof(t), "%s_heads", tag);
        int hv = kfx_synth_tagged(
            p, name, t, "view",
            json_pack("[o, I, I, I, I]", kfx_synth_ref(p, proj), hshape[0], hshape[1], H, D),
            meta(hshape, NULL, 4), detail, dlen);
        if (hv < 0)
            return -1;
        long long hs[4], oshape[4], ost[4];
        strides(hshape, 4, hs);
        const int perm[4] = {bf ? 0 : 1, 2, bf ? 1 : 0, 3};
        for (int d = 0; d < 4; d++) {
            oshape[d] = hshape[perm[d]];
            ost[d] = hs[perm[d]];
        }
        snprintf(t, sizeof(t), "%s_parts", tag);
        part[0] = kfx_synth_tagged(
            p, name, t, "permute",
            json_pack("[o, i, i, i, i]", kfx_synth_ref(p, hv), perm[0], perm[1], perm[2], perm[3]),
            meta(oshape, ost, 4), detail, dlen);
        return part[0] < 0 ? -1 : 0;
    }
    /* viewed as [A, N, c, H, D] (or [N, A, c, H, D]), permuted to [c, N, H, A, D] */
    const long long vshape[5] = {pshape[0], pshape[1], c, H, D};
    json_t *vargs =
        json_pack("[o, I, I, i, I, I]", kfx_synth_ref(p, proj), vshape[0], vshape[1], c, H, D);
    snprintf(t, sizeof(t), "%s_heads", tag);
    int pv = kfx_synth_tagged(p, name, t, "view", vargs, meta(vshape, NULL, 5), detail, dlen);
    if (pv < 0)
        return -1;
    long long vs[5], qshape[5], qst[5];
    strides(vshape, 5, vs);
    const int perm[5] = {2, bf ? 0 : 1, 3, bf ? 1 : 0, 4};
    for (int d = 0; d < 5; d++) {
        qshape[d] = vshape[perm[d]];
        qst[d] = vs[perm[d]];
    }
    snprintf(t, sizeof(t), "%s_parts", tag);
    int all = kfx_synth_tagged(p, name, t, "permute",
                               json_pack("[o, i, i, i, i, i]", kfx_synth_ref(p, pv), perm[0],
                                         perm[1], perm[2], perm[3], perm[4]),
                               meta(qshape, qst, 5), detail, dlen);
    if (all < 0)
        return -1;
    for (int i = 0; i < c; i++) {
        snprintf(t, sizeof(t), "%s_%d", tag, i);
        part[i] = kfx_synth_tagged(p, name, t, "_operator.getitem",
                                   json_pack("[o, i]", kfx_synth_ref(p, all), i),
                                   meta(qshape + 1, qst + 1, 4), detail, dlen);
        if (part[i] < 0)
            return -1;
    }
    return 0;
}

/* Whether val v is a float or bool tensor of [a, b]. */
static bool mask_of(const struct kfx_plan *p, int v, long long a, long long b) {
    return v >= 0 && p->val[v].ndim == 2 && p->val[v].shape[0] == a && p->val[v].shape[1] == b &&
           p->val[v].kind != KFX_TUPLE && p->val[v].kind != KFX_SIZE && !p->val[v].is_int;
}

/* "vR" when mask val v is float, the -inf-where-true of vR when it is bool, into e (r: v or a
 * view of it). */
static void mask_term(const struct kfx_plan *p, int v, int r, char *e, size_t n) {
    const json_t *o = p->val[v].node ? json_object_get(p->val[v].node, "output") : NULL;
    const char *dt = json_string_value(json_object_get(o, "dtype"));
    if (dt && !strcmp(dt, "bool"))
        snprintf(e, n, "(v%d != 0.0f ? (-INFINITY) : 0.0f)", r);
    else
        snprintf(e, n, "v%d", r);
}

/* The float mask added to the scores [N, H, L, S], as PyTorch merges them: attn_mask m ([L, S])
 * plus the key padding mask kp ([N, S]) viewed as [N, 1, 1, S], either -1 when absent; a lazy
 * val of [L, S], [N, 1, 1, S] or [N, 1, L, S], or -1. */
static int scores_mask(struct kfx_plan *p, const char *name, int m, int kp, long long N,
                       long long L, long long S, char *detail, size_t dlen) {
    char tm[64] = "", tk[64] = "", e[160], tag[192];
    int like = m;
    long long shape[4] = {L, S, 0, 0};
    int nd = 2;
    if (kp >= 0) {
        const long long vsh[4] = {N, 1, 1, S};
        like = kfx_synth_tagged(p, name, "padding", "view",
                                json_pack("[o, I, i, i, I]", kfx_synth_ref(p, kp), N, 1, 1, S),
                                meta(vsh, NULL, 4), detail, dlen);
        if (like < 0)
            return -1;
        mask_term(p, kp, like, tk, sizeof(tk));
        const long long full[4] = {N, 1, m >= 0 ? L : 1, S};
        memcpy(shape, full, sizeof(full));
        nd = 4;
    }
    if (m >= 0)
        mask_term(p, m, m, tm, sizeof(tm));
    snprintf(e, sizeof(e), "%s%s%s", tm, tm[0] && tk[0] ? " + " : "", tk);
    int v = like >= 0 ? kfx_new_lazy(p, like, e) : -1;
    if (v < 0) {
        snprintf(detail, dlen, "MultiheadAttention's masks: more values than a plan holds");
        return -1;
    }
    p->val[v].ndim = nd;
    memcpy(p->val[v].shape, shape, sizeof(shape));
    snprintf(tag, sizeof(tag), "%s@float_mask", name);
    p->val[v].node =
        kfx_plan_synth(p, tag, "kforge.float_mask", json_array(), meta(shape, NULL, nd));
    if (p->val[v].node == NULL)
        snprintf(detail, dlen, "MultiheadAttention's masks: out of memory");
    return p->val[v].node ? v : -1;
}

int kfx_plan_mha(struct kfx_plan *p, const json_t *node, int k, int t, long long item, char *detail,
                 size_t dlen) {
    const json_t *mha = p->val[t].node, *attrs = json_object_get(mha, "attrs");
    const char *path = json_string_value(json_object_get(mha, "target"));
    const char *name = json_string_value(json_object_get(node, "name"));
    const json_t *kw = json_object_get(mha, "kwargs");
    if (item == 1 && kfx_unused(p, node)) { /* `out, _ = attn(x, x, x)`: the weights unread */
        kfx_set_val(p, k, node, KFX_TUPLE, "");
        return 1;
    }
    int x = kfx_arg_val(p, kfx_node_arg(mha, 0, "query"));
    int xk = kfx_arg_val(p, kfx_node_arg(mha, 1, "key"));
    int xv = kfx_arg_val(p, kfx_node_arg(mha, 2, "value"));
    const long long E = json_integer_value(json_object_get(attrs, "embed_dim"));
    const long long H = json_integer_value(json_object_get(attrs, "num_heads"));
    const bool bf = json_is_true(json_object_get(attrs, "batch_first"));
    const json_t *drop = json_object_get(attrs, "dropout");
    const bool training = json_is_true(json_object_get(attrs, "training"));
    /* the key and value: [S, N, E] (or [N, S, E]) of one S, the query's N */
    const int bd = bf ? 0 : 1;
    bool kv = xk >= 0 && xv >= 0 && x >= 0 && p->val[xk].ndim == 3 && p->val[xv].ndim == 3 &&
              !p->val[xk].is_int && !p->val[xv].is_int && p->val[x].ndim == 3;
    for (int d = 0; kv && d < 3; d++)
        kv = p->val[xk].shape[d] == p->val[xv].shape[d] &&
             (d == 1 - bd || p->val[xk].shape[d] == p->val[x].shape[d]);
    bool ok = item == 0 && path && name && kv && !p->val[x].is_int && E > 0 && H > 0 &&
              E % H == 0 && p->val[x].shape[2] == E &&
              json_array_size(json_object_get(mha, "args")) <= 3 &&
              !json_is_true(json_object_get(attrs, "add_zero_attn")) &&
              !(training && json_is_number(drop) && json_number_value(drop) > 0) &&
              json_object_get(json_object_get(mha, "parameters"), "bias_k") == NULL;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)kw, key, val) { /* anything else: refused */
        if (!json_is_null(val) && strcmp(key, "need_weights") != 0 &&
            strcmp(key, "average_attn_weights") != 0 && strcmp(key, "attn_mask") != 0 &&
            strcmp(key, "key_padding_mask") != 0 &&
            !(!strcmp(key, "is_causal") && json_is_boolean(val)))
            ok = false;
    }
    const long long L = ok ? p->val[x].shape[bf ? 1 : 0] : 0, S = ok ? p->val[xk].shape[bd ^ 1] : 0;
    const long long N = ok ? p->val[x].shape[bd] : 0;
    const json_t *mj = json_object_get(kw, "attn_mask"),
                 *kj = json_object_get(kw, "key_padding_mask");
    const int m = mj && !json_is_null(mj) ? kfx_arg_val(p, mj) : -1;
    const int kp = kj && !json_is_null(kj) ? kfx_arg_val(p, kj) : -1;
    const bool causal = json_is_true(json_object_get(kw, "is_causal"));
    const json_t *nw = json_object_get(kw, "need_weights");
    if (ok && mj && !json_is_null(mj)) /* an [L, S] mask, float or bool */
        ok = mask_of(p, m, L, S);
    if (ok && kj && !json_is_null(kj)) /* an [N, S] mask */
        ok = mask_of(p, kp, N, S);
    if (!ok || (causal && m < 0)) {
        snprintf(detail, dlen,
                 "MultiheadAttention with an attn_mask other than [L, S] or a key padding mask "
                 "other than [N, S], dropout in training, bias_kv or add_zero_attn, or of query, "
                 "key and value not [L, N, E], [S, N, E] and [S, N, E] (not yet)");
        return -1;
    }
    /* PyTorch's multi_head_attention_forward: with is_causal, need_weights=False and no key
     * padding mask, the attn_mask is only a hint (causal attention, its values unread); else
     * the masks, a bool one -inf where it is true, are added to the scores */
    const bool use_causal = causal && json_is_false(nw) && kp < 0;
    const int mask =
        use_causal || (m < 0 && kp < 0) ? -1 : scores_mask(p, name, m, kp, N, L, S, detail, dlen);
    if (!use_causal && (m >= 0 || kp >= 0) && mask < 0)
        return -1;
    const long long D = E / H;
    int w = param(p, name, path, "in_proj_weight", detail, dlen);
    int b = param(p, name, path, "in_proj_bias", detail, dlen);
    char op[160];
    snprintf(op, sizeof(op), "%s.out_proj", path);
    int wo = param(p, name, op, "weight", detail, dlen);
    int bo = param(p, name, op, "bias", detail, dlen);
    if (w < 0 || wo < 0) {
        snprintf(detail, dlen,
                 "MultiheadAttention without in_proj_weight (kdim or vdim other "
                 "than embed_dim: not yet)");
        return -1;
    }
    /* q, k and v, [N, H, L, D] and [N, H, S, D]: one product for what is one tensor */
    int part[3];
    if (x == xk && x == xv) {
        if (project(p, name, "qkv", x, w, b, 0, 3, H, bf, part, detail, dlen) != 0)
            return -1;
    } else if (project(p, name, "q", x, w, b, 0, 1, H, bf, part, detail, dlen) != 0 ||
               (xk == xv ? project(p, name, "kv", xk, w, b, 1, 2, H, bf, part + 1, detail, dlen)
                         : project(p, name, "k", xk, w, b, 1, 1, H, bf, part + 1, detail, dlen) ||
                               project(p, name, "v", xv, w, b, 2, 1, H, bf, part + 2, detail,
                                       dlen)) != 0)
        return -1;
    const long long yshape[4] = {N, H, L, D};
    int y = kfx_synth_tagged(
        p, name, "attention", "torch.nn.functional.scaled_dot_product_attention",
        mask >= 0 ? json_pack("[o, o, o, o]", kfx_synth_ref(p, part[0]), kfx_synth_ref(p, part[1]),
                              kfx_synth_ref(p, part[2]), kfx_synth_ref(p, mask))
        : use_causal ? json_pack("[o, o, o, n, f, b]", kfx_synth_ref(p, part[0]),
                                 kfx_synth_ref(p, part[1]), kfx_synth_ref(p, part[2]), 0.0, 1)
                     : json_pack("[o, o, o]", kfx_synth_ref(p, part[0]), kfx_synth_ref(p, part[1]),
                                 kfx_synth_ref(p, part[2])),
        meta(yshape, NULL, 4), detail, dlen);
    if (y < 0)
        return -1;
    /* back to [L, N, H, D] (or [N, L, H, D]) and [L, N, E] */
    long long ys[4], bshape[4], bst[4];
    strides(yshape, 4, ys);
    const int back[4] = {bf ? 0 : 2, bf ? 2 : 0, 1, 3};
    for (int d = 0; d < 4; d++) {
        bshape[d] = yshape[back[d]];
        bst[d] = ys[back[d]];
    }
    int yb = kfx_synth_tagged(
        p, name, "merged", "permute",
        json_pack("[o, i, i, i, i]", kfx_synth_ref(p, y), back[0], back[1], back[2], back[3]),
        meta(bshape, bst, 4), detail, dlen);
    const long long oshape[3] = {bshape[0], bshape[1], E};
    int yr = yb < 0 ? -1
                    : kfx_synth_tagged(
                          p, name, "rows", "reshape",
                          json_pack("[o, I, I, I]", kfx_synth_ref(p, yb), oshape[0], oshape[1], E),
                          meta(oshape, NULL, 3), detail, dlen);
    if (yr < 0)
        return -1;
    json_t *oargs = bo >= 0 ? json_pack("[o, o, o]", kfx_synth_ref(p, yr), kfx_synth_ref(p, wo),
                                        kfx_synth_ref(p, bo))
                            : json_pack("[o, o, n]", kfx_synth_ref(p, yr), kfx_synth_ref(p, wo));
    json_t *out = oargs ? kfx_plan_synth(p, name, "torch.nn.functional.linear", oargs,
                                         json_deep_copy(json_object_get(node, "output")))
                        : NULL;
    if (out == NULL)
        return -1;
    p->val[k].node = out;
    return kfx_plan_anchor(p, out, k, detail, dlen);
}
