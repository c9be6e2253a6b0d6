/* expert_plan_contract.c: any torch.einsum of named indices, for the expert, where
 * expert_plan_einsum.c's direct matrix product does not apply (three or four operands, as
 * Mamba2's "bclhn,bcshn,bhcls,bcshp->bclhp"; an index summed within one operand; an output in
 * another order; several contracted indices). The operands are contracted two at a time, the
 * pair whose result is smallest first (opt_einsum's greedy rule), each result keeping the
 * indices that a later operand or the output still reads. One contraction of A and B:
 *
 *   an index of one operand alone that nothing later reads         summed out first (torch.sum)
 *   batch (both, kept), m (A only), n (B only), k (both, summed):
 *     with a k:  A.permute(batch m k).reshape(B, M, K) @ B.permute(batch k n).reshape(B, K, N)
 *     without:   A.permute(batch m).reshape(batch m 1..) * B.permute(batch n).reshape(batch 1.. n)
 *
 * all synthetic nodes (kfx_plan_synth) that the planner plans as it plans those operators (a
 * reshape of a permuted view is a copy). The result's indices are batch m n; the last
 * contraction takes its orders from the output's, so that the output needs no copy of its own
 * where it is batch m n or batch n m. Refused with the equation named: an ellipsis, an index
 * repeated within one operand (a diagonal), an index of two sizes (broadcast), more than
 * KFX_MAX_DIMS indices in one result. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

#define MAX_OPS 8
#define MAX_SUB 16

struct term {
    int val;
    char sub[MAX_SUB + 1];
};

struct job {
    struct kfx_plan *p;
    const char *name; /* the einsum node's */
    long long size[128];
    int tags;
    char *detail;
    size_t dlen;
};

/* "ab,bc->ac" into its operands' subscripts and the output's (implicit: the indices used once,
 * alphabetically). The number of operands, or -1. */
static int parse(const char *text, char sub[MAX_OPS][MAX_SUB + 1], char *out) {
    char s[128];
    size_t n = 0;
    for (const char *c = text; *c && n + 1 < sizeof(s); c++)
        if (*c != ' ')
            s[n++] = *c;
    s[n] = '\0';
    char *arrow = strstr(s, "->");
    if (arrow)
        *arrow = '\0';
    int count[128] = {0}, ops = 0;
    for (char *part = s, *next; part && ops < MAX_OPS; part = next) {
        next = strchr(part, ',');
        if (next)
            *next++ = '\0';
        if (strlen(part) > MAX_SUB)
            return -1;
        for (const char *c = part; *c; c++) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) || strchr(c + 1, *c))
                return -1; /* an ellipsis, or an index repeated within one operand */
            count[(int)*c]++;
        }
        snprintf(sub[ops++], MAX_SUB + 1, "%s", part);
        if (next == NULL)
            break;
    }
    if (arrow) {
        if (strlen(arrow + 2) > MAX_SUB)
            return -1;
        for (const char *c = arrow + 2; *c; c++)
            if (c[0] < 0 || count[(int)*c] == 0 || strchr(c + 1, *c))
                return -1;
        snprintf(out, MAX_SUB + 1, "%s", arrow + 2);
    } else {
        size_t o = 0;
        for (int c = 'A'; c <= 'z' && o < MAX_SUB; c++)
            if (count[c] == 1)
                out[o++] = (char)c;
        out[o] = '\0';
    }
    return ops;
}

static bool has(const char *s, char c) {
    return strchr(s, c) != NULL;
}

/* The indices of s that are in yes (when given) and not in no (when given), in s's order,
 * appended to r where r does not hold them yet (r stays terminated after each, since it is
 * searched as it grows). */
static void take(const char *s, const char *yes, const char *no, char *r) {
    size_t n = strlen(r);
    for (const char *c = s; *c; c++)
        if ((yes == NULL || has(yes, *c)) && (no == NULL || !has(no, *c)) && !has(r, *c)) {
            r[n++] = *c;
            r[n] = '\0';
        }
}

static json_t *meta(const struct job *j, const char *sub, bool strided, const long long *stride) {
    json_t *sh = json_array(), *st = strided ? json_array() : NULL;
    for (const char *c = sub; *c; c++) {
        json_array_append_new(sh, json_integer(j->size[(int)*c]));
        if (st)
            json_array_append_new(st, json_integer(stride[c - sub]));
    }
    json_t *m = json_pack("{s:o, s:s}", "shape", sh, "dtype", "float32");
    if (st)
        json_object_set_new(m, "stride", st);
    return m;
}

/* A synthetic node over val v (target, then the integers ints[0..n)) with output indices sub
 * (strided: a view with those strides): its val, or -1. */
static int synth(struct job *j, const char *target, int v, const long long *ints, int n,
                 const char *sub, bool strided, const long long *stride) {
    json_t *args = json_array();
    json_array_append_new(args, kfx_synth_ref(j->p, v));
    for (int i = 0; i < n; i++)
        json_array_append_new(args, json_integer(ints[i]));
    char tag[24];
    snprintf(tag, sizeof(tag), "contract%d", j->tags++);
    return kfx_synth_tagged(j->p, j->name, tag, target, args, meta(j, sub, strided, stride),
                            j->detail, j->dlen);
}

/* Term t with the indices of its own that keep does not hold summed out. */
static int sum_lone(struct job *j, struct term *t, const char *keep) {
    for (int d = (int)strlen(t->sub) - 1; d >= 0; d--) {
        if (has(keep, t->sub[d]))
            continue;
        char sub[MAX_SUB + 1];
        snprintf(sub, sizeof(sub), "%.*s%s", d, t->sub, t->sub + d + 1);
        const long long dim = d;
        t->val = synth(j, "torch.sum", t->val, &dim, 1, sub, false, NULL);
        if (t->val < 0)
            return -1;
        snprintf(t->sub, sizeof(t->sub), "%s", sub);
    }
    return 0;
}

/* Term t permuted to the order want (a view; nothing when it is t's order). */
static int permute(struct job *j, struct term *t, const char *want) {
    if (!strcmp(t->sub, want))
        return 0;
    long long perm[MAX_SUB] = {0}, stride[MAX_SUB] = {0}, own[MAX_SUB] = {0}, s = 1;
    int nd = (int)strlen(t->sub);
    for (int d = nd - 1; d >= 0; d--) {
        own[d] = s;
        s *= j->size[(int)t->sub[d]];
    }
    for (int d = 0; d < nd; d++) {
        perm[d] = strchr(t->sub, want[d]) - t->sub;
        stride[d] = own[perm[d]];
    }
    t->val = synth(j, "permute", t->val, perm, nd, want, true, stride);
    snprintf(t->sub, sizeof(t->sub), "%s", want);
    return t->val < 0 ? -1 : 0;
}

/* Term t reshaped to the sizes of the indices of groups (a run of indices each, merged into one
 * dim; "1" a dim of size 1), and its new indices as sub. */
static int reshape(struct job *j, struct term *t, const char *const *groups, int n) {
    long long dims[MAX_SUB];
    for (int g = 0; g < n; g++) {
        dims[g] = 1;
        for (const char *c = groups[g]; *c; c++)
            dims[g] *= *c == '1' ? 1 : j->size[(int)*c];
    }
    json_t *sh = json_array();
    for (int g = 0; g < n; g++)
        json_array_append_new(sh, json_integer(dims[g]));
    json_t *args = json_array();
    json_array_append_new(args, kfx_synth_ref(j->p, t->val));
    for (int g = 0; g < n; g++)
        json_array_append_new(args, json_integer(dims[g]));
    if (n == 0) /* a 0-d tensor: x.reshape(()) */
        json_array_append_new(args, json_array());
    char tag[24];
    snprintf(tag, sizeof(tag), "contract%d", j->tags++);
    t->val = kfx_synth_tagged(j->p, j->name, tag, "reshape", args,
                              json_pack("{s:o, s:s}", "shape", sh, "dtype", "float32"), j->detail,
                              j->dlen);
    return t->val < 0 ? -1 : 0;
}

/* The broadcast product of vals a and b, of indices sub: a lazy val of a synthetic torch.mul
 * node (elementwise code, fused with what reads it), or -1. */
static int product(struct job *j, int a, int b, const char *sub) {
    char n[192], e[48];
    snprintf(n, sizeof(n), "%s@contract%d", j->name, j->tags++);
    json_t *args = json_pack("[o, o]", kfx_synth_ref(j->p, a), kfx_synth_ref(j->p, b));
    json_t *t = args ? kfx_plan_synth(j->p, n, "torch.mul", args, meta(j, sub, false, NULL)) : NULL;
    if (t == NULL || j->p->n_vals >= KFX_MAX_VALS)
        return -1;
    int v = j->p->n_vals++;
    memset(&j->p->val[v], 0, sizeof(j->p->val[v]));
    j->p->val[v].node = t;
    snprintf(e, sizeof(e), "v%d * v%d", a, b);
    return kfx_set_lazy(j->p, v, t, e) == 0 ? v : -1;
}

/* a and b contracted into r, keeping the indices of keep; order: the output's indices (the last
 * contraction) or NULL. */
static int contract(struct job *j, struct term *a, struct term *b, const char *keep,
                    const char *order, struct term *r) {
    char ka[MAX_SUB + 1] = "", kb[MAX_SUB + 1] = "";
    take(a->sub, keep, NULL, ka);
    take(a->sub, b->sub, NULL, ka);
    take(b->sub, keep, NULL, kb);
    take(b->sub, a->sub, NULL, kb);
    if (sum_lone(j, a, ka) != 0 || sum_lone(j, b, kb) != 0)
        return -1;
    /* batch, m, n in the output's order when it is given, else in a's and b's */
    char batch[MAX_SUB + 1] = "", m[MAX_SUB + 1] = "", n[MAX_SUB + 1] = "", k[MAX_SUB + 1] = "";
    char both[2 * MAX_SUB + 1];
    snprintf(both, sizeof(both), "%s%s", a->sub, b->sub);
    const char *src = order ? order : both;
    for (const char *c = src; *c; c++) {
        bool in_a = has(a->sub, *c), in_b = has(b->sub, *c), kept = has(keep, *c);
        char *to = !kept ? NULL : in_a && in_b ? batch : in_a ? m : in_b ? n : NULL;
        size_t len = to ? strlen(to) : 0;
        if (to && !has(to, *c) && len < MAX_SUB) {
            to[len] = *c;
            to[len + 1] = '\0';
        }
    }
    take(a->sub, b->sub, keep, k);
    if (order) { /* b on the left when the output is batch n m */
        char bnm[3 * MAX_SUB + 1];
        snprintf(bnm, sizeof(bnm), "%s%s%s", batch, n, m);
        if (!strcmp(bnm, order) && strcmp(n, "") != 0 && strcmp(m, "") != 0) {
            struct term *t = a;
            a = b;
            b = t;
            char sw[MAX_SUB + 1];
            memcpy(sw, m, sizeof(sw));
            memcpy(m, n, sizeof(sw));
            memcpy(n, sw, sizeof(sw));
        }
    }
    char wa[3 * MAX_SUB + 1], wb[3 * MAX_SUB + 1];
    snprintf(r->sub, sizeof(r->sub), "%s%s%s", batch, m, n);
    if (k[0] == '\0') { /* a product of elements: a broadcast multiply */
        snprintf(wa, sizeof(wa), "%s%s", batch, m);
        snprintf(wb, sizeof(wb), "%s%s", batch, n);
        const char *ga[MAX_SUB], *gb[MAX_SUB];
        int nd = 0;
        static const char one[] = "1";
        char idx[MAX_SUB][2];
        for (const char *c = r->sub; *c; c++, nd++) {
            idx[nd][0] = *c;
            idx[nd][1] = '\0';
            ga[nd] = has(wa, *c) ? idx[nd] : one;
            gb[nd] = has(wb, *c) ? idx[nd] : one;
        }
        if (permute(j, a, wa) != 0 || permute(j, b, wb) != 0 || reshape(j, a, ga, nd) != 0 ||
            reshape(j, b, gb, nd) != 0)
            return -1;
        r->val = product(j, a->val, b->val, r->sub);
        return r->val < 0 ? -1 : 0;
    }
    snprintf(wa, sizeof(wa), "%s%s%s", batch, m, k);
    snprintf(wb, sizeof(wb), "%s%s%s", batch, k, n);
    const char *la[3] = {batch, m, k}, *lb[3] = {batch, k, n};
    if (permute(j, a, wa) != 0 || permute(j, b, wb) != 0 || reshape(j, a, la, 3) != 0 ||
        reshape(j, b, lb, 3) != 0)
        return -1;
    char mn[2 * MAX_SUB + 1];
    snprintf(mn, sizeof(mn), "%s%s", m, n);
    long long dims[3] = {1, 1, 1};
    const char *parts[3] = {batch, m, n};
    for (int g = 0; g < 3; g++)
        for (const char *c = parts[g]; *c; c++)
            dims[g] *= j->size[(int)*c];
    json_t *sh = json_pack("[I, I, I]", dims[0], dims[1], dims[2]);
    json_t *args = json_pack("[o, o]", kfx_synth_ref(j->p, a->val), kfx_synth_ref(j->p, b->val));
    char tag[24];
    snprintf(tag, sizeof(tag), "contract%d", j->tags++);
    struct term prod;
    prod.val = kfx_synth_tagged(j->p, j->name, tag, "torch.matmul", args,
                                json_pack("{s:o, s:s}", "shape", sh, "dtype", "float32"), j->detail,
                                j->dlen);
    if (prod.val < 0)
        return -1;
    /* [B, M, N] back to one dim an index */
    const char *each[3 * MAX_SUB];
    char idx[3 * MAX_SUB][2];
    int nd = 0;
    for (const char *c = r->sub; *c; c++, nd++) {
        idx[nd][0] = *c;
        idx[nd][1] = '\0';
        each[nd] = idx[nd];
    }
    if (reshape(j, &prod, each, nd) != 0)
        return -1;
    r->val = prod.val;
    return 0;
}

/* The indices that terms other than t[x] and t[y] (of n), and out, read. */
static void still_read(const struct term *t, int n, int x, int y, const char *out, char *r) {
    snprintf(r, MAX_SUB * (MAX_OPS + 1) + 1, "%s", out);
    for (int i = 0; i < n; i++)
        if (i != x && i != y)
            take(t[i].sub, NULL, NULL, r);
}

int kfx_plan_contract(struct kfx_plan *p, const json_t *node, int k, const char *text,
                      const json_t *ops, char *detail, size_t dlen) {
    char sub[MAX_OPS][MAX_SUB + 1], out[MAX_SUB + 1];
    struct job j = {.p = p,
                    .name = json_string_value(json_object_get(node, "name")),
                    .detail = detail,
                    .dlen = dlen};
    int n = text ? parse(text, sub, out) : -1;
    bool ok = n >= 1 && (size_t)n == json_array_size(ops) && j.name != NULL;
    struct term t[MAX_OPS];
    for (int i = 0; ok && i < n; i++) {
        int v = kfx_arg_val(p, json_array_get(ops, (size_t)i));
        ok = v >= 0 && p->val[v].kind != KFX_SIZE && p->val[v].kind != KFX_TUPLE &&
             !p->val[v].is_int && (int)strlen(sub[i]) == p->val[v].ndim;
        for (int d = 0; ok && d < p->val[v].ndim; d++) {
            long long *s = &j.size[(int)sub[i][d]];
            ok = *s == 0 || *s == p->val[v].shape[d]; /* one size an index: no broadcast */
            *s = p->val[v].shape[d];
        }
        t[i].val = v;
        snprintf(t[i].sub, sizeof(t[i].sub), "%s", sub[i]);
    }
    if (!ok) {
        snprintf(detail, dlen,
                 "einsum \"%s\" (an ellipsis, a repeated index, an index of two sizes, or an "
                 "operand that is not a float tensor: not yet)",
                 text ? text : "?");
        return -1;
    }
    while (n > 1) { /* the pair with the smallest result first */
        int bx = 0, by = 1;
        double best = -1.0;
        char keep[MAX_SUB * (MAX_OPS + 1) + 1];
        for (int x = 0; x < n; x++)
            for (int y = x + 1; y < n; y++) {
                still_read(t, n, x, y, out, keep);
                char r[2 * MAX_SUB + 1] = "";
                take(t[x].sub, keep, NULL, r);
                take(t[y].sub, keep, NULL, r);
                double size = 1.0;
                for (const char *c = r; *c; c++)
                    size *= (double)j.size[(int)*c];
                if (best < 0.0 || size < best) {
                    best = size;
                    bx = x;
                    by = y;
                }
            }
        still_read(t, n, bx, by, out, keep);
        char r[2 * MAX_SUB + 1] = "";
        take(t[bx].sub, keep, NULL, r);
        take(t[by].sub, keep, NULL, r);
        if (strlen(r) > KFX_MAX_DIMS) {
            snprintf(detail, dlen, "einsum \"%s\" (a contraction of more than %d indices: not yet)",
                     text, KFX_MAX_DIMS);
            return -1;
        }
        struct term res;
        if (contract(&j, &t[bx], &t[by], keep, n == 2 ? out : NULL, &res) != 0)
            return -1;
        t[bx] = res;
        t[by] = t[--n];
    }
    if (sum_lone(&j, &t[0], out) != 0 || permute(&j, &t[0], out) != 0)
        return -1;
    /* the einsum's own node: its output, contiguous (a copy where the last step is a view) */
    json_t *args = json_array();
    json_array_append_new(args, kfx_synth_ref(p, t[0].val));
    const json_t *shape = json_object_get(json_object_get(node, "output"), "shape");
    for (size_t i = 0; i < json_array_size(shape); i++)
        json_array_append_new(args, json_integer(json_integer_value(json_array_get(shape, i))));
    if (json_array_size(shape) == 0) /* a 0-d output: x.reshape(()) */
        json_array_append_new(args, json_array());
    json_t *fin =
        kfx_plan_synth(p, j.name, "reshape", args, json_deep_copy(json_object_get(node, "output")));
    if (fin == NULL)
        return -1;
    p->val[k].node = fin;
    return kfx_plan_anchor(p, fin, k, detail, dlen);
}
