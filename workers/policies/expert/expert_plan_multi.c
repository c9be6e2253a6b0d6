/* expert_plan_multi.c: the planner's fusion of sibling reductions. Reductions of inputs of one
 * shape over the same dims (a cosine similarity's three sums, a mean and a standard deviation,
 * two losses' means) would each read the tensors once; planned one after the other with nothing
 * between them, they become one KFX_MULTI step (expert_multi.c) that reads the inputs once and
 * keeps one accumulator per reduction. The first one's launch line moves after the later
 * one's allocation and takes every output. A mean and a var or std of one input over the last
 * dimension become a norm's statistics instead (moments_pair), which a pass may join. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_plan.h"

/* The reductions a KFX_MULTI step accumulates (sums and products in double). */
static bool sum_like(const char *op) {
    static const char *const ops[] = {"sum", "mean", "prod", "var0", "var1", "std0", "std1"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

/* Whether val v is one of the step's outputs or a view of one. */
static bool reads_output(const struct kfx_plan *p, const struct kfx_step *st, int v) {
    int root = p->val[v].view_of ? p->val[v].view_of - 1 : v;
    int n = st->kind == KFX_MULTI ? st->n_sub : 1;
    for (int j = 0; j < n; j++) {
        int out = st->kind == KFX_MULTI ? st->sub_out[j] : st->red_out;
        if (root == out || v == out)
            return true;
    }
    return false;
}

/* Adds the new reduction's leaves to the step's (each once), mapping them in sb. false when the
 * step would have too many. */
static bool union_leaves(struct kfx_step *st, const struct kfx_step *tmp, struct kfx_sub *sb) {
    for (int j = 0; j < tmp->n_leaves; j++) {
        int at = -1;
        for (int i = 0; i < st->n_leaves && at < 0; i++)
            if (st->pro_val[i] == tmp->pro_val[j] && st->pro_scalar[i] == tmp->pro_scalar[j])
                at = i;
        if (at < 0) {
            if (st->n_leaves >= KFX_MAX_LEAVES)
                return false;
            at = st->n_leaves++;
            st->pro_val[at] = tmp->pro_val[j];
            st->pro_scalar[at] = tmp->pro_scalar[j];
        }
        sb->map[j] = at;
    }
    return true;
}

/* "self.k.kf_opS(in0, in1, .., ": the start of the step's launch, its leaves, into line. */
static void launch_leaves(const struct kfx_plan *p, const struct kfx_step *st,
                          struct kf_buf *line) {
    kf_buf_printf(line, "self.k.%s(", st->fn);
    for (int i = 0; i < st->n_leaves; i++)
        kf_buf_printf(line, "%s, ", p->val[st->pro_val[i]].py);
}

/* The step's launch line, at the end of forward(): every leaf, every output, the geometry. */
static void launch(struct kfx_plan *p, struct kfx_step *st) {
    struct kf_buf line = {0};
    launch_leaves(p, st, &line);
    for (int j = 0; j < st->n_sub; j++)
        kf_buf_printf(&line, "%s, ", p->val[st->sub_out[j]].py);
    st->launch_at = p->fwd->len;
    kfx_line(p, "%s*t%d_g[:3])", line.data ? line.data : "", st->red_out);
    st->launch_len = p->fwd->len - st->launch_at;
    kf_buf_free(&line);
}

/* A reduction over the last dimension, kept: rows the statistics kernels take (dims are
 * written counted from the front, kfx_reduce). */
static bool last_dim(const struct kfx_plan *p, const struct kfx_step *st) {
    char last[32];
    snprintf(last, sizeof(last), "(%d,)", p->val[st->red_in].ndim - 1);
    return st->red_keep && p->val[st->red_in].ndim > 0 && strcmp(st->red_dims, last) == 0;
}

/* 1 var, 2 std (correction in *corr) for "var0", "var1", "std0" and "std1"; else 0. */
static int spread(const char *op, int *corr) {
    if (strlen(op) != 4 || (op[3] != '0' && op[3] != '1'))
        return 0;
    *corr = op[3] - '0';
    return !strncmp(op, "var", 3) ? 1 : !strncmp(op, "std", 3) ? 2 : 0;
}

/* The step's launch line taken out of forward(), and the new reduction's output val k
 * allocated in the first one's shape: the caller writes the launch again, after it. */
static void new_output(struct kfx_plan *p, struct kfx_step *st, const json_t *node, int k) {
    struct kf_buf *f = p->fwd;
    memmove(f->data + st->launch_at, f->data + st->launch_at + st->launch_len,
            f->len - st->launch_at - st->launch_len + 1);
    f->len -= st->launch_len;
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    kfx_line(p, "%s = _alloc(t%d_g[3], %s)", out, st->red_out, p->like);
}

/* A mean and a var or std (either first) of one input with one prologue over the last
 * dimension, kept (x.mean(-1, keepdim=True) and x.std(-1, keepdim=True)): the REDUCE step
 * becomes a norm's statistics (KFX_MOMENTS, its second value the var or std), which the
 * elementwise pass that reads both may join (expert_plan_fuse.c) as a layer norm's does. true
 * when it did; tmp is the new reduction's prologue. */
static bool moments_pair(struct kfx_plan *p, struct kfx_step *st, const struct kfx_step *tmp,
                         const json_t *node, int k, const char *op) {
    int corr_new = 0, corr_old = 0;
    int new_spread = spread(op, &corr_new), old_spread = spread(st->op, &corr_old);
    bool mean_first = !strcmp(st->op, "mean") && new_spread > 0;
    if (!mean_first && !(old_spread > 0 && !strcmp(op, "mean")))
        return false;
    int second = mean_first ? new_spread : old_spread, corr = mean_first ? corr_new : corr_old;
    if (st->kind != KFX_REDUCE || st->ew_body != NULL || !last_dim(p, st) ||
        tmp->n_leaves != st->n_leaves || !st->body || !tmp->body || strcmp(st->body, tmp->body))
        return false;
    for (int j = 0; j < st->n_leaves; j++)
        if (tmp->pro_val[j] != st->pro_val[j] || tmp->pro_scalar[j] != st->pro_scalar[j])
            return false;
    int m = mean_first ? st->red_out : k, r = mean_first ? k : st->red_out;
    st->kind = KFX_MOMENTS;
    snprintf(st->op, sizeof(st->op), "moments");
    st->second = second;
    st->corr = corr;
    st->fusable = 1;
    st->stat_in = st->red_in;
    st->stat_m = m;
    st->stat_r = r;
    /* the launch moves after the new output's allocation, in the statistics' signature:
     * (inputs, mean, second, A = 1, G groups, B = the row's length, rep = 1, eps unused) */
    new_output(p, st, node, k);
    struct kf_buf line = {0};
    launch_leaves(p, st, &line);
    st->launch_at = p->fwd->len;
    kfx_line(p, "%st%d, t%d, 1, t%d.numel(), %s.numel() // max(t%d.numel(), 1), 1, 0.0)",
             line.data ? line.data : "", m, r, m, p->val[st->pro_val[0]].py, m);
    st->launch_len = p->fwd->len - st->launch_at;
    kf_buf_free(&line);
    return true;
}

int kfx_multi_join(struct kfx_plan *p, const json_t *node, int k, int in, const char *op,
                   const char *dims, bool keepdim, char *detail, size_t dlen) {
    if (p->n_steps == 0 || !sum_like(op) || p->val[in].is_int)
        return 0;
    struct kfx_step *st = &p->step[p->n_steps - 1];
    bool reduce = st->kind == KFX_REDUCE && sum_like(st->op) && st->ew_body == NULL;
    if (!reduce && !(st->kind == KFX_MULTI && st->n_sub < KFX_MAX_SUB))
        return 0;
    if (strcmp(st->red_dims, dims) != 0 || st->red_keep != keepdim ||
        !kfx_same_shape(&p->val[st->red_in], &p->val[in]) || st->launch_len < 10 ||
        st->launch_at + st->launch_len > p->fwd->len)
        return 0;
    struct kfx_step tmp;
    memset(&tmp, 0, sizeof(tmp));
    char leaves[1024];
    int steps = p->n_steps;
    if (kfx_prologue(p, in, &tmp, leaves, sizeof(leaves), detail, dlen) != 0) {
        free(tmp.body);
        return -1;
    }
    st = &p->step[steps - 1];
    /* no copy was planned between (the chain did not fuse); no broadcast leaves */
    bool ok = p->n_steps == steps && !kfx_step_bcast(st) && !kfx_step_bcast(&tmp);
    for (int j = 0; ok && j < tmp.n_leaves; j++)
        ok = !reads_output(p, st, tmp.pro_val[j]);
    if (ok && moments_pair(p, st, &tmp, node, k, op)) {
        free(tmp.body);
        return 1;
    }
    struct kfx_step saved = *st;
    if (ok && st->kind == KFX_REDUCE) {
        st->kind = KFX_MULTI;
        st->n_sub = 1;
        struct kfx_sub *s0 = &st->sub[0];
        memcpy(s0->op, st->op, sizeof(s0->op));
        s0->body = st->body;
        s0->n = st->n_leaves;
        for (int i = 0; i < st->n_leaves; i++)
            s0->map[i] = i;
        st->body = NULL;
        st->sub_out[0] = st->red_out;
        st->fusable = 0;
        snprintf(st->op, sizeof(st->op), "multi");
    }
    struct kfx_sub *sb = ok ? &st->sub[st->n_sub] : NULL;
    if (ok && !union_leaves(st, &tmp, sb)) {
        *st = saved; /* too many leaves: the new reduction stays a step of its own */
        ok = false;
    }
    if (!ok) {
        free(tmp.body);
        return 0;
    }
    snprintf(sb->op, sizeof(sb->op), "%s", op);
    sb->body = tmp.body;
    sb->n = tmp.n_leaves;
    st->sub_out[st->n_sub++] = k;
    /* the launch moves after the new output's allocation, with every output */
    new_output(p, st, node, k);
    launch(p, st);
    return 1;
}
