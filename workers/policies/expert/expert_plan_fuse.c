/* expert_plan_fuse.c: the planner's one fusion across steps: a layer norm's statistics kernel
 * (or a sum or mean over the last dimension, as an RMS norm's) and the elementwise pass that
 * reads them (normalise, affine, and whatever activation or residual follows) become one cuda
 * kernel, one block per group, so the input is read from
 * memory once for both (the second read of a group hits the cache). The statistics are still
 * written to their tensors, so later uses of them read the same values. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_plan.h"

bool kfx_fuse_norm(struct kfx_plan *p, int v, const int *leaf, int n, char *body,
                   const char *names) {
    if (p->n_steps == 0 || strcmp(p->backend, "cuda") != 0 || n > KFX_MAX_LEAVES)
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
