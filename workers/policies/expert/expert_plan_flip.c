/* expert_plan_flip.c: torch.flip, planned where it is the two ends of a reverse scan:
 * flip(cumsum(flip(x, d), d), d) (or cumprod) is the scan of x from its end, written in x's
 * order (KernelBench's reverse cumsum). No kernel reads a flipped tensor: the first flip is
 * x itself marked flipped along d (an identity chain, so the scan reads x through its
 * prologue), the scan runs backwards and its output stays marked, and the second flip
 * unmarks it. Any other flip is a gather (expert_plan_gather.c); a flip of a marked val that
 * is not the closing one is refused, so a marked val reaches nothing else. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* One dim (an int, or a list of one int) of an nd-dimensional tensor, from the front; -1 when
 * it is something else. */
static long long one_dim(const json_t *d, int nd) {
    if (json_is_array(d) && json_array_size(d) == 1)
        d = json_array_get(d, 0);
    if (!json_is_integer(d))
        return -1;
    long long v = json_integer_value(d);
    if (v < -nd || v >= nd)
        return -1;
    return v < 0 ? v + nd : v;
}

static bool is_flip(const json_t *node) {
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    const char *op = json_string_value(json_object_get(node, "op"));
    return s && op && strcmp(op, "call_module") != 0 && strcmp(s, "flip") == 0;
}

static bool is_scan(const json_t *node) {
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    const char *op = json_string_value(json_object_get(node, "op"));
    return s && op && strcmp(op, "call_module") != 0 &&
           (strcmp(s, "cumsum") == 0 || strcmp(s, "cumprod") == 0 ||
            strcmp(s, "logcumsumexp") == 0);
}

/* Whether node (a flip of val in along d) opens a reverse scan: its one user a scan along d
 * whose one user flips it back along d. */
static bool opens_reverse_scan(const struct kfx_plan *p, const json_t *node, int in, long long d) {
    const json_t *scan = kfx_sole_user(p, node);
    if (scan == NULL || !is_scan(scan) ||
        one_dim(kfx_node_arg(scan, 1, "dim"), p->val[in].ndim) != d)
        return false;
    const json_t *dt = json_object_get(json_object_get(scan, "kwargs"), "dtype");
    if (dt && !json_is_null(dt))
        return false;
    const json_t *back = kfx_sole_user(p, scan);
    return back && is_flip(back) && one_dim(kfx_node_arg(back, 1, "dims"), p->val[in].ndim) == d;
}

int kfx_plan_flip(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    if (!is_flip(node))
        return 0;
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    long long d = in < 0 ? -1 : one_dim(kfx_node_arg(node, 1, "dims"), p->val[in].ndim);
    if (d >= 0 && p->val[in].flipped == d + 1) { /* the closing flip: the scan's output as is */
        struct kfx_val v = p->val[in];
        if (v.kind != KFX_TENSOR)
            return -1;
        v.node = node;
        v.flipped = 0;
        p->val[k] = v;
        return 1;
    }
    if (in >= 0 && p->val[in].flipped) {
        snprintf(detail, dlen, "a flip inside a reverse scan that does not close it (not yet)");
        return -1;
    }
    if (d < 0 || p->val[in].is_int || !opens_reverse_scan(p, node, in, d))
        return 0; /* a flip of its own: a gather (expert_plan_gather.c) */
    char e[16];
    snprintf(e, sizeof(e), "v%d", in);
    if (kfx_set_lazy(p, k, node, e) != 0)
        return -1;
    p->val[k].flipped = (int)d + 1;
    return 1;
}
