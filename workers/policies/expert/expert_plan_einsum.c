/* expert_plan_einsum.c: torch.einsum of two operands that is a matrix product, for the expert:
 * the planner rewrites the node as torch.matmul of its operands, each as it is or with its
 * last two dims swapped (a view that the matmul reads in place), and plans that. The forms:
 *
 *   "ij,jk->ik", "ik,jk->ij", "ki,kj->ij"    one contracted index, either operand transposed
 *   "bij,bjk->bik", "bhqd,bhkd->bhqk"        batch indices leading both operands and the output
 *   "bijl,lk->bijk"                          a tensor's last dim times a matrix (no batch index)
 *
 * Anything else (more than one contracted index, an index summed within one operand, an
 * output in another order, three operands) is contracted a pair at a time by
 * expert_plan_contract.c. The rewritten nodes live in the plan's copy of the graph (its
 * "kfx_einsum" array), which the plan owns as long as the steps that point into it. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

#define MAX_IDX 8

struct eq {
    char a[MAX_IDX + 1], b[MAX_IDX + 1], out[MAX_IDX + 1];
};

/* "bij, bjk -> bik" into its three subscripts; implicit outputs are the indices used once, in
 * alphabetical order (einsum's rule). 0, or -1. */
static int parse(const char *text, struct eq *e) {
    char s[64];
    size_t n = 0;
    for (const char *c = text; *c && n + 1 < sizeof(s); c++)
        if (*c != ' ')
            s[n++] = *c;
    s[n] = '\0';
    char *arrow = strstr(s, "->"), *comma = strchr(s, ',');
    if (comma == NULL || strchr(comma + 1, ',') || (arrow && arrow < comma))
        return -1;
    *comma = '\0';
    if (arrow)
        *arrow = '\0';
    const char *parts[3] = {s, comma + 1, arrow ? arrow + 2 : NULL};
    char *dst[3] = {e->a, e->b, e->out};
    for (int i = 0; i < 3; i++) {
        if (parts[i] == NULL)
            continue;
        if (strlen(parts[i]) > MAX_IDX)
            return -1;
        for (const char *c = parts[i]; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) ||
                strchr(c + 1, *c) != NULL)
                return -1; /* an ellipsis, or an index repeated within one subscript */
        snprintf(dst[i], MAX_IDX + 1, "%s", parts[i]);
    }
    if (arrow == NULL) {
        size_t o = 0;
        for (int c = 'A'; c <= 'z'; c++)
            if (((strchr(e->a, c) != NULL) + (strchr(e->b, c) != NULL)) == 1 && o < MAX_IDX)
                e->out[o++] = (char)c;
        e->out[o] = '\0';
    }
    return 0;
}

/* The indices of s that are (in_other) or are not in other, and (in_out) or are not in out, in
 * s's order, into r. */
static void pick(const char *s, const char *other, bool in_other, const char *out, bool in_out,
                 char *r) {
    size_t n = 0;
    for (const char *c = s; *c; c++)
        if ((strchr(other, *c) != NULL) == in_other && (strchr(out, *c) != NULL) == in_out)
            r[n++] = *c;
    r[n] = '\0';
}

/* Whether operand s is as the matmul reads it (0): batch + rows + k for a (rows: m), batch + k
 * + cols for b (cols: n); or those two swapped with one row or column index (1, read through a
 * transposed view); -1 when neither. */
static int layout(const char *s, const char *batch, const char *mn, const char *k, bool is_b) {
    char want[3 * MAX_IDX + 1];
    snprintf(want, sizeof(want), "%s%s%s", batch, is_b ? k : mn, is_b ? mn : k);
    if (!strcmp(s, want))
        return 0;
    snprintf(want, sizeof(want), "%s%s%s", batch, is_b ? mn : k, is_b ? k : mn);
    return strlen(mn) == 1 && !strcmp(s, want) ? 1 : -1;
}

json_t *kfx_plan_synth(struct kfx_plan *p, const char *name, const char *target, json_t *args,
                       json_t *output) {
    json_t *list = json_object_get(p->graph, "kfx_einsum");
    if (list == NULL) {
        list = json_array();
        json_object_set_new(p->graph, "kfx_einsum", list);
    }
    json_t *n = json_pack("{s:s, s:s, s:s, s:o, s:{}, s:o}", "name", name, "op", "call_function",
                          "target", target, "args", args, "kwargs", "output", output);
    if (n == NULL || json_array_append_new(list, n) != 0)
        return NULL;
    return n;
}

/* Operand val v as the matmul reads it: its own node's name, or (swap) a view with its last two
 * dims swapped, planned as a new val whose node's name is written into name. 0, or -1. */
static int operand(struct kfx_plan *p, int v, bool swap, const char *tag, char *name, size_t n,
                   char *detail, size_t dlen) {
    const json_t *node = p->val[v].node;
    const char *own = node ? json_string_value(json_object_get(node, "name")) : NULL;
    if (own == NULL)
        return -1;
    if (!swap) {
        snprintf(name, n, "%s", own);
        return 0;
    }
    snprintf(name, n, "%s@%s", own, tag);
    json_t *shape = json_array();
    for (int d = 0; d < p->val[v].ndim; d++) {
        int from = d == p->val[v].ndim - 2 ? d + 1 : d == p->val[v].ndim - 1 ? d - 1 : d;
        json_array_append_new(shape, json_integer(p->val[v].shape[from]));
    }
    json_t *t =
        kfx_plan_synth(p, name, "torch.transpose", json_pack("[{s:s}, i, i]", "node", own, -2, -1),
                       json_pack("{s:o, s:s}", "shape", shape, "dtype", "float32"));
    return kfx_plan_synth_val(p, t, detail, dlen) >= 0 ? 0 : -1;
}

json_t *kfx_synth_ref(const struct kfx_plan *p, int v) {
    const json_t *node = v >= 0 ? p->val[v].node : NULL;
    const char *name = node ? json_string_value(json_object_get(node, "name")) : NULL;
    return name ? json_pack("{s:s}", "node", name) : NULL;
}

int kfx_synth_tagged(struct kfx_plan *p, const char *name, const char *tag, const char *target,
                     json_t *args, json_t *out, char *detail, size_t dlen) {
    char n[192];
    snprintf(n, sizeof(n), "%s@%s", name, tag);
    if (args == NULL || out == NULL) {
        json_decref(args);
        json_decref(out);
        return -1;
    }
    return kfx_plan_synth_val(p, kfx_plan_synth(p, n, target, args, out), detail, dlen);
}

int kfx_plan_synth_val(struct kfx_plan *p, json_t *t, char *detail, size_t dlen) {
    if (t == NULL || p->n_vals >= KFX_MAX_VALS)
        return -1;
    int k = p->n_vals++;
    memset(&p->val[k], 0, sizeof(p->val[k]));
    p->val[k].node = t;
    return kfx_plan_anchor(p, t, k, detail, dlen) == 1 ? k : -1;
}

int kfx_plan_einsum(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                    size_t dlen) {
    if (strcmp(s, "einsum") != 0)
        return 0;
    const json_t *args = json_object_get(node, "args");
    const char *text = json_string_value(json_array_get(args, 0));
    /* the operands as one list: torch.einsum(eq, [a, b]) or torch.einsum(eq, a, b, ...) */
    json_t *ops = json_array();
    if (json_array_size(args) == 2 && json_is_array(json_array_get(args, 1)))
        json_array_extend(ops, json_array_get(args, 1));
    else
        for (size_t i = 1; i < json_array_size(args); i++)
            json_array_append(ops, json_array_get(args, i));
    struct eq e = {{0}, {0}, {0}};
    int a = json_array_size(ops) == 2 ? kfx_arg_val(p, json_array_get(ops, 0)) : -1;
    int b = json_array_size(ops) == 2 ? kfx_arg_val(p, json_array_get(ops, 1)) : -1;
    char batch[MAX_IDX + 1], m[MAX_IDX + 1], nn[MAX_IDX + 1], kk[MAX_IDX + 1], lone[2][MAX_IDX + 1];
    bool ok = text && parse(text, &e) == 0 && a >= 0 && b >= 0 && p->val[a].kind != KFX_SIZE &&
              p->val[b].kind != KFX_SIZE && !p->val[a].is_int && !p->val[b].is_int &&
              (int)strlen(e.a) == p->val[a].ndim && (int)strlen(e.b) == p->val[b].ndim;
    int ta = -1, tb = -1;
    if (ok) {
        pick(e.a, e.b, true, e.out, true, batch);
        pick(e.a, e.b, false, e.out, true, m);
        pick(e.b, e.a, false, e.out, true, nn);
        pick(e.a, e.b, true, e.out, false, kk);
        pick(e.a, e.b, false, e.out, false, lone[0]);
        pick(e.b, e.a, false, e.out, false, lone[1]);
        char want[3 * MAX_IDX + 1];
        snprintf(want, sizeof(want), "%s%s%s", batch, m, nn);
        ta = layout(e.a, batch, m, kk, false);
        tb = layout(e.b, batch, nn, kk, true);
        /* one contracted index; the output in the matmul's order; with batch indices, one row
         * index on each side (more would broadcast against the batch); without, b a matrix */
        ok = strlen(kk) == 1 && !lone[0][0] && !lone[1][0] && !strcmp(e.out, want) && ta >= 0 &&
             tb >= 0 && strlen(nn) == 1 &&
             (batch[0] ? strlen(m) == 1 : (ta == 0 || strlen(m) == 1));
    }
    if (!ok) { /* any other form: contracted a pair at a time (expert_plan_contract.c) */
        int rc = kfx_plan_contract(p, node, k, text, ops, detail, dlen);
        json_decref(ops);
        return rc;
    }
    json_decref(ops);
    char na[160], nb[160];
    if (operand(p, a, ta == 1, "einsum_a", na, sizeof(na), detail, dlen) != 0 ||
        operand(p, b, tb == 1, "einsum_b", nb, sizeof(nb), detail, dlen) != 0)
        return -1;
    json_t *mm = kfx_plan_synth(p, json_string_value(json_object_get(node, "name")), "torch.matmul",
                                json_pack("[{s:s}, {s:s}]", "node", na, "node", nb),
                                json_deep_copy(json_object_get(node, "output")));
    if (mm == NULL)
        return -1;
    p->val[k].node = mm;
    return kfx_plan_anchor(p, mm, k, detail, dlen);
}
