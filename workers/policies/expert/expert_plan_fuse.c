/* expert_plan_fuse.c: the planner's fusions across steps.
 * - A layer norm's statistics kernel (or a sum or mean over the last dimension, as an RMS
 *   norm's) and the elementwise pass that reads them (normalise, affine, and whatever
 *   activation or residual follows) become one kernel, one block per group on cuda and one
 *   thread per group on the cpu, so the input is read from memory once for both (the second
 *   read of a group hits the cache). The statistics are still written to their tensors, so
 *   later uses of them read the same values.
 * - On cuda, a convolution and the elementwise pass that reads its output (its bias, an
 *   activation, a scale, a residual) become one step: the convolution's kernels apply the pass as
 * they store (expert_conv_epi.c), so the output is written once and never read back. Only where
 * nothing planned later reads the convolution's raw output, which the step no longer writes. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_plan.h"

bool kfx_fuse_norm(struct kfx_plan *p, int v, const int *leaf, int n, char *body,
                   const char *names) {
    if (p->n_steps == 0 || n > KFX_MAX_LEAVES)
        return false;
    struct kfx_step *st = &p->step[p->n_steps - 1];
    struct kfx_val *x = &p->val[v];
    if ((st->kind != KFX_MOMENTS && st->kind != KFX_REDUCE) || !st->fusable ||
        st->ew_body != NULL || x->ndim > 4 || !kfx_same_shape(x, &p->val[st->stat_in]) ||
        kfx_step_bcast(st))
        return false;
    signed char stat[KFX_MAX_LEAVES];
    int stats = 0;
    for (int k = 0; k < n; k++) {
        stat[k] = (signed char)(leaf[k] == st->stat_m ? 1 : leaf[k] == st->stat_r ? 2 : 0);
        stats += stat[k] != 0;
    }
    struct kf_buf *f = p->fwd;
    char launch[1024];
    if (stats == 0 || st->launch_at + st->launch_len > f->len || st->launch_len < 10 ||
        st->launch_len >= sizeof(launch))
        return false;
    /* "        self.k.kf_opS(<statistics' arguments>)\n" without its ")\n" */
    memcpy(launch, f->data + st->launch_at, st->launch_len);
    launch[st->launch_len] = '\0';
    char *close = strrchr(launch, ')');
    if (close == NULL)
        return false;
    *close = '\0';
    /* the statistics' launch moves after the output's allocation, with the pass's arguments */
    memmove(f->data + st->launch_at, f->data + st->launch_at + st->launch_len,
            f->len - st->launch_at - st->launch_len + 1);
    f->len -= st->launch_len;
    snprintf(x->py, sizeof(x->py), "t%d", v);
    kfx_line(p, "%s = _alloc(_broadcast(%s), %s)", x->py, names, p->like);
    kfx_line(p, "%s, %s%s, %s.numel(), *_dims4(%s), *_strides4(%s, %s))",
             launch + strspn(launch, " "), names, x->py, x->py, x->py, x->py, names);
    /* the statistics' inputs held raw in registers when the pass reads every one of them */
    memset(st->ew_held, 0, sizeof(st->ew_held));
    int found = 0;
    for (int j = 0; j < st->n_leaves; j++)
        for (int k = 0; k < n; k++)
            if (leaf[k] == st->pro_val[j] && !st->ew_held[k]) {
                st->ew_held[k] = (unsigned char)(j + 1);
                found++;
                break;
            }
    bool scalar = false; /* a 0-d input is read as element 0: never held as a row */
    for (int j = 0; j < st->n_leaves; j++)
        scalar = scalar || st->pro_scalar[j];
    if (found != st->n_leaves || scalar)
        memset(st->ew_held, 0, sizeof(st->ew_held));
    st->ew_body = body;
    st->ew_leaves = n;
    memcpy(st->ew_stat, stat, (size_t)n);
    x->kind = KFX_TENSOR;
    return true;
}

/* Whether JSON argument a (a node reference, or lists and dicts of them) names a val other than
 * x that reads val t. */
static bool arg_reads(const struct kfx_plan *p, const json_t *a, int t, int x) {
    if (json_is_array(a)) {
        size_t i;
        const json_t *e;
        json_array_foreach(a, i, e) {
            if (arg_reads(p, e, t, x))
                return true;
        }
        return false;
    }
    if (!json_is_object(a))
        return false;
    if (json_is_string(json_object_get(a, "node"))) {
        const int u = kfx_arg_val(p, a);
        return u >= 0 && u != x && kfx_reads_val(p, u, t);
    }
    const char *key;
    const json_t *e;
    json_object_foreach((json_t *)a, key, e) {
        if (arg_reads(p, e, t, x))
            return true;
    }
    return false;
}

/* Whether a graph node from the one being planned on reads val t other than through val x. */
static bool read_later(const struct kfx_plan *p, int t, int x) {
    const json_t *nodes = json_object_get(json_object_get(p->graph, "graph"), "nodes");
    for (size_t i = p->at_node < 0 ? 0 : (size_t)p->at_node; i < json_array_size(nodes); i++) {
        const json_t *node = json_array_get(nodes, i);
        if (arg_reads(p, json_object_get(node, "args"), t, x) ||
            arg_reads(p, json_object_get(node, "kwargs"), t, x))
            return true;
    }
    return false;
}

int kfx_fuse_conv(struct kfx_plan *p, int v, int *leaf, int n, unsigned char *kind) {
    if (p->n_steps == 0 || strcmp(p->backend, "cuda") != 0 || n > KFX_MAX_LEAVES)
        return -1;
    const int s = p->n_steps - 1;
    const struct kfx_step *st = &p->step[s];
    const int t = st->conv_out;
    if (st->kind != KFX_CONV || st->ew_body != NULL || t < 0 ||
        !kfx_same_shape(&p->val[v], &p->val[t]))
        return -1;
    int order[KFX_MAX_LEAVES], m = 1, outs = 0, bcast = 0;
    unsigned char k[KFX_MAX_LEAVES] = {0};
    order[0] = t;
    for (int i = 0; i < n; i++) {
        if (leaf[i] == t) {
            outs++;
            continue;
        }
        const int kd = kfx_leaf_kind(p, leaf[i], v);
        /* a leaf that reads the output itself (a view of it) is not the accumulator */
        if (kd < 0 || kfx_reads_val(p, leaf[i], t))
            return -1;
        bcast += kd == 2;
        order[m] = leaf[i];
        k[m++] = (unsigned char)kd;
    }
    /* each broadcast leaf costs an index division per element, as in a reduction's prologue */
    if (outs != 1 || bcast > 2 || read_later(p, t, v))
        return -1;
    memcpy(leaf, order, sizeof(int) * (size_t)n);
    memcpy(kind, k, (size_t)n);
    return s;
}

int kfx_fuse_conv_emit(struct kfx_plan *p, int s, int v, const int *leaf, int n,
                       const unsigned char *kind, char *body) {
    struct kfx_step *st = &p->step[s];
    struct kfx_val *x = &p->val[v];
    const char *out = p->val[st->conv_out].py;
    struct kf_buf *f = p->fwd;
    /* the convolution's launch, "        self.k.kf_opS(...)\n": the last such line */
    char call[32], launch[1024], leaves[1024] = "";
    snprintf(call, sizeof(call), "self.k.%s(", st->fn);
    const char *at = NULL;
    for (const char *q = f->data; q && (q = strstr(q, call)) != NULL; q++)
        at = q;
    const char *end = at ? strchr(at, '\n') : NULL;
    if (end == NULL || end[-1] != ')' || (size_t)(end - at) >= sizeof(launch)) {
        free(body);
        return -1;
    }
    memcpy(launch, at, (size_t)(end - at - 1)); /* without its ")" */
    launch[end - at - 1] = '\0';
    size_t len = 0;
    for (int k = 1; k < n && len < sizeof(leaves); k++) {
        const char *py = p->val[leaf[k]].py;
        len += (size_t)(kind[k] == 2 ? snprintf(leaves + len, sizeof(leaves) - len,
                                                "%s, *_bqm(%s.shape, %s.shape), ", py, py, out)
                                     : snprintf(leaves + len, sizeof(leaves) - len, "%s, ", py));
    }
    if (len >= sizeof(leaves)) {
        free(body);
        return -1;
    }
    /* the line out of the body (its indent too): it runs again below, after the output's
     * allocation */
    size_t start = (size_t)(at - f->data);
    const size_t stop = (size_t)(end + 1 - f->data);
    while (start > 0 && f->data[start - 1] == ' ')
        start--;
    memmove(f->data + start, f->data + stop, f->len - stop + 1);
    f->len -= stop - start;
    snprintf(x->py, sizeof(x->py), "t%d", v);
    kfx_line(p, "%s = _alloc(%s.shape, %s)", x->py, out, p->like);
    kfx_line(p, "%s, %s%s)", launch, leaves, x->py);
    st->ew_body = body;
    st->ew_leaves = n;
    for (int k = 0; k < n; k++) {
        st->pro_scalar[k] = kind[k] == 1;
        st->pro_bcast[k] = kind[k] == 2;
    }
    x->kind = KFX_TENSOR;
    return 0;
}
