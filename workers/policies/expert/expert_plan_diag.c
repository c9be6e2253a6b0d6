/* expert_plan_diag.c: torch.diag(v) of a vector v as one operand of a matmul (KernelBench's
 * diag(A) @ B). The N x N matrix is never made: diag(v) @ b scales b's rows by v and
 * b @ diag(v) its columns, an elementwise chain of v viewed as a column or a row times b,
 * which fuses with whatever follows. A diag used any other way is refused. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

static bool named_call(const json_t *node, const char *a, const char *b) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    return op && s && strcmp(op, "call_module") != 0 && (!strcmp(s, a) || (b && !strcmp(s, b)));
}

/* Which operand of matmul node user the node called name is: 0 (a), 1 (b), or -1. */
static int operand_of(const json_t *user, const char *name) {
    for (size_t i = 0; i < 2; i++) {
        const char *n = json_string_value(
            json_object_get(kfx_node_arg(user, i, i ? "other" : "input"), "node"));
        if (n && strcmp(n, name) == 0)
            return (int)i;
    }
    return -1;
}

int kfx_plan_diag(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    if (!named_call(node, "diag", NULL))
        return 0;
    int v = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *dg = kfx_node_arg(node, 1, "diagonal");
    const json_t *user = kfx_sole_user(p, node);
    const char *name = json_string_value(json_object_get(node, "name"));
    int side = user && named_call(user, "matmul", "mm") && name ? operand_of(user, name) : -1;
    if (v < 0 || p->val[v].is_int || p->val[v].ndim != 1 || side < 0 ||
        (dg && !(json_is_integer(dg) && json_integer_value(dg) == 0))) {
        snprintf(detail, dlen,
                 "diag (not yet, except diag(v) of a vector as one operand of a matmul)");
        return -1;
    }
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    char w[16];
    snprintf(w, sizeof(w), "w%d", k);
    kfx_line(p, "%s = %s.view(%s)", w, p->val[v].py, side == 0 ? "-1, 1" : "1, -1");
    const long long n = p->val[v].shape[0];
    kfx_set_val(p, k, node, p->val[v].kind, w);
    p->val[k].ndim = 2;
    p->val[k].shape[0] = side == 0 ? n : 1;
    p->val[k].shape[1] = side == 0 ? 1 : n;
    p->val[k].view_of = p->val[v].view_of ? p->val[v].view_of : v + 1;
    p->val[k].diag = side + 1;
    return 1;
}

int kfx_plan_diag_product(struct kfx_plan *p, const json_t *node, int k, char *detail,
                          size_t dlen) {
    if (!named_call(node, "matmul", "mm"))
        return 0;
    int a = kfx_arg_val(p, kfx_node_arg(node, 0, "input")),
        b = kfx_arg_val(p, kfx_node_arg(node, 1, "other"));
    if (a < 0 || b < 0 || (!p->val[a].diag && !p->val[b].diag))
        return 0;
    const int d = p->val[a].diag ? a : b, o = d == a ? b : a;
    if (p->val[o].diag || p->val[o].is_int || p->val[o].ndim < 2) {
        snprintf(detail, dlen, "a matmul of diag(v) with a diag or a vector (not yet)");
        return -1;
    }
    char e[40];
    snprintf(e, sizeof(e), "v%d * v%d", d, o);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}
