/* expert_plan_gather.c: operators that move or resample elements, planned as one KFX_GATHER
 * step (expert_gather.c) over their input made contiguous:
 * - F.pad (constant, reflect, replicate, circular) and nn.ZeroPad/ConstantPad/ReflectionPad/
 *   ReplicationPad/CircularPad 1d-3d: a rule per padded dim (a negative constant pad crops);
 * - F.interpolate, F.upsample and nn.Upsample, UpsamplingNearest2d, UpsamplingBilinear2d:
 *   nearest and nearest-exact (an index), linear, bilinear and trilinear (two taps a dim),
 *   area (an adaptive mean), with PyTorch's scales: 1 / scale_factor when one is given and
 *   not recomputed, else in / out; align_corners: (in - 1) / (out - 1). Bicubic and antialias
 *   are refused;
 * - pixel_shuffle and pixel_unshuffle (functions and modules): the output seen as
 *   [.., C, H, r, W, r] (or [.., C, r, r, H, W]), each dim read at the input's stride for it;
 * - torch.flip over any dims (expert_plan_flip.c keeps the reverse scans);
 * - adaptive average and max pools (1-3d, without indices) to outputs other than all 1s
 *   (those are reductions: expert_plan_node.c), a window a dim;
 * - the copy of a strided view whose dims do not fold into the 4 that the elementwise
 *   kernels read through (a 6-D permute: Swin's window partition), at the view's strides;
 * - x.repeat, torch.tile and repeat_interleave by ints (a count a dim);
 * - torch.roll by ints, along dims or the flattened tensor (a circular rule);
 * - torch.gather by an int64 input of indices (each output element's own index).
 * Elements are float32 only. The output's shape is the graph's. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* A step's geometry while it is built: the output's dims and how each reads the input. */
struct gspec {
    int nd;
    long long out[KFX_MAX_DIMS], n[KFX_MAX_DIMS], stride[KFX_MAX_DIMS], lo[KFX_MAX_DIMS];
    unsigned char rule[KFX_MAX_DIMS];
    double scale[KFX_MAX_DIMS];
    double fill;
    const char *op;
    int ix; /* KFX_G_INDEX: the val of torch.gather's int64 index (its pointer follows the
               input's), else -1 */
};

/* Every dim read as it is from x, contiguous. */
static void spec_of(struct gspec *g, const struct kfx_val *x, const char *op) {
    memset(g, 0, sizeof(*g));
    g->nd = x->ndim;
    g->op = op;
    g->ix = -1;
    long long s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        g->out[d] = g->n[d] = x->shape[d];
        g->stride[d] = s;
        s *= x->shape[d];
    }
}

/* The node's output shape into shape; its rank, or -1 when it is not one float32 tensor. */
static int out_shape(const json_t *node, long long *shape) {
    const json_t *o = json_object_get(node, "output");
    const json_t *sh = json_object_get(o, "shape");
    const char *dt = json_string_value(json_object_get(o, "dtype"));
    if (!json_is_array(sh) || json_array_size(sh) > KFX_MAX_DIMS || !dt || strcmp(dt, "float32"))
        return -1;
    for (size_t i = 0; i < json_array_size(sh); i++)
        shape[i] = json_integer_value(json_array_get(sh, i));
    return (int)json_array_size(sh);
}

/* Adjacent dims both read as they are, the outer at the inner's whole extent: one dim. */
static void compact(struct gspec *g) {
    for (int d = g->nd - 2; d >= 0; d--)
        if (g->rule[d] == KFX_G_SAME && g->rule[d + 1] == KFX_G_SAME &&
            g->out[d + 1] == g->n[d + 1] && g->stride[d] == g->stride[d + 1] * g->n[d + 1]) {
            g->out[d] *= g->out[d + 1];
            g->n[d] = g->out[d];
            g->stride[d] = g->stride[d + 1];
            for (int e = d + 1; e + 1 < g->nd; e++) {
                g->out[e] = g->out[e + 1];
                g->n[e] = g->n[e + 1];
                g->stride[e] = g->stride[e + 1];
                g->lo[e] = g->lo[e + 1];
                g->rule[e] = g->rule[e + 1];
                g->scale[e] = g->scale[e + 1];
            }
            g->nd--;
        }
}

/* Fills step st (made by the caller) to read through g into val k, a new tensor of
 * shape[0..nd) whose Python name is set here: its leaves (their Python names, each followed by
 * ", ") the first of which has root_numel elements. 0, or -1. */
static int fill_step(struct kfx_plan *p, struct kfx_step *st, int k, const char *leaves,
                     long long root_numel, struct gspec *g, const long long *shape, int nd) {
    compact(g);
    snprintf(st->op, sizeof(st->op), "%s", g->op);
    st->g_nd = g->nd;
    for (int d = 0; d < g->nd; d++) {
        st->g_out[d] = g->out[d];
        st->g_n[d] = g->n[d];
        st->g_stride[d] = g->stride[d];
        st->g_lo[d] = g->lo[d];
        st->g_rule[d] = g->rule[d];
        st->g_scale[d] = g->scale[d];
    }
    st->g_fill = g->fill;
    st->g_numel = root_numel;
    char dims[KFX_MAX_DIMS * 24] = "";
    for (int d = 0; d < nd; d++) {
        size_t a = strlen(dims);
        snprintf(dims + a, sizeof(dims) - a, "%lld, ", shape[d]);
    }
    snprintf(p->val[k].py, sizeof(p->val[k].py), "t%d", k);
    kfx_line(p, "%s = _alloc((%s), %s)", p->val[k].py, dims, p->like);
    char ix[160] = "";
    if (g->ix >= 0)
        snprintf(ix, sizeof(ix), "%s, ", p->val[g->ix].py);
    kfx_line(p, "self.k.%s(%s%s%s, %.*s.numel())", st->fn, leaves, ix, p->val[k].py,
             (int)strcspn(leaves, ","), leaves);
    return 0;
}

/* The step reading val in through g, whose output is val k of the node's shape: the
 * elementwise chain that makes in, when it is lazy, read as the step's prologue (evaluated
 * at each element the rules read: no pass of its own). 1, or -1. */
static int emit(struct kfx_plan *p, const json_t *node, int k, int in, struct gspec *g,
                char *detail, size_t dlen) {
    long long shape[KFX_MAX_DIMS], numel = 1, total = 1, in_numel = 1;
    const int nd = out_shape(node, shape);
    for (int d = 0; d < nd; d++)
        numel *= shape[d];
    for (int d = 0; d < g->nd; d++)
        total *= g->out[d];
    if (nd < 0 || numel != total) {
        snprintf(detail, dlen, "%s: an output of %lld elements where %lld were planned", g->op,
                 numel, total);
        return -1;
    }
    struct kfx_step *st = kfx_add_step(p, KFX_GATHER, detail, dlen);
    char leaves[1024];
    if (st == NULL || kfx_prologue(p, in, st, leaves, sizeof(leaves), detail, dlen) != 0)
        return -1;
    for (int d = 0; d < p->val[in].ndim; d++)
        in_numel *= p->val[in].shape[d];
    kfx_set_val(p, k, node, KFX_TENSOR, "");
    return fill_step(p, st, k, leaves, in_numel, g, shape, nd) == 0 ? 1 : -1;
}

/* The strides inspect recorded for strided view v (of its ndim), into stride; false when it
 * has none, starts past its root's first element, or its root is not in memory. */
static bool view_strides(const struct kfx_plan *p, int v, long long *stride) {
    const struct kfx_val *x = &p->val[v];
    const json_t *rec =
        x->node ? json_object_get(json_object_get(x->node, "output"), "stride") : NULL;
    if (x->kind == KFX_LAZY || !x->noncontig || x->offset || x->view_of < 1 ||
        p->val[x->view_of - 1].kind == KFX_LAZY || json_array_size(rec) != (size_t)x->ndim)
        return false;
    for (int d = 0; d < x->ndim; d++)
        stride[d] = json_integer_value(json_array_get(rec, (size_t)d));
    return true;
}

bool kfx_gather_wants(const struct kfx_plan *p, int v) {
    const struct kfx_val *x = &p->val[v];
    long long stride[KFX_MAX_DIMS];
    if (x->ndim <= 4 || !view_strides(p, v, stride))
        return false;
    struct gspec g;
    spec_of(&g, x, "copy");
    for (int d = 0; d < x->ndim; d++)
        g.stride[d] = stride[d];
    for (int d = x->ndim - 1; d >= 0; d--) /* dims of 1 read nothing */
        if (g.out[d] == 1 && g.nd > 1) {
            for (int e = d; e + 1 < g.nd; e++) {
                g.out[e] = g.out[e + 1];
                g.n[e] = g.n[e + 1];
                g.stride[e] = g.stride[e + 1];
            }
            g.nd--;
        }
    compact(&g);
    return g.nd > 4;
}

int kfx_gather_copy(struct kfx_plan *p, int v, char *detail, size_t dlen) {
    struct kfx_val *x = &p->val[v];
    long long stride[KFX_MAX_DIMS], root_numel = 1;
    if (!view_strides(p, v, stride)) {
        snprintf(detail, dlen, "a copy of a strided view without its strides (not yet)");
        return -1;
    }
    const int root = x->view_of - 1;
    for (int d = 0; d < p->val[root].ndim; d++)
        root_numel *= p->val[root].shape[d];
    struct gspec g;
    spec_of(&g, x, "copy");
    for (int d = 0; d < x->ndim; d++)
        g.stride[d] = stride[d];
    struct kfx_step *st = kfx_add_step(p, KFX_GATHER, detail, dlen);
    if (st == NULL)
        return -1;
    char leaves[sizeof(p->val[root].py) + 2];
    snprintf(leaves, sizeof(leaves), "%s, ", p->val[root].py); /* read as it is: no prologue */
    x->kind = KFX_TENSOR;
    x->noncontig = false;
    x->view_of = 0;
    return fill_step(p, st, v, leaves, root_numel, &g, x->shape, x->ndim);
}

/* A list of ints (or one int, repeated n times) into v, each a literal or a size inspect kept
 * the number of (kfx_int); false for anything else. */
static bool ints(const struct kfx_plan *p, const json_t *a, long long *v, int n, int *got) {
    long long one;
    if (kfx_int(p, a, &one)) {
        for (int i = 0; i < n; i++)
            v[i] = one;
        *got = n;
        return true;
    }
    if (!json_is_array(a) || json_array_size(a) > (size_t)2 * KFX_MAX_DIMS)
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!kfx_int(p, json_array_get(a, i), &v[i]))
            return false;
    *got = (int)json_array_size(a);
    return true;
}

/* The input val of a node (args[0] or input=), a float tensor; -1 otherwise. */
static int input_of(const struct kfx_plan *p, const json_t *node) {
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    if (in < 0 || p->val[in].is_int || p->val[in].kind == KFX_TUPLE ||
        p->val[in].kind == KFX_SIZE || p->val[in].ndim < 1)
        return -1;
    return in;
}

/* --- padding ----------------------------------------------------------------------------- */

static const char *pad_module_mode(const char *s) {
    static const char *const map[][2] = {{"ZeroPad", "constant"},
                                         {"ConstantPad", "constant"},
                                         {"ReflectionPad", "reflect"},
                                         {"ReplicationPad", "replicate"},
                                         {"CircularPad", "circular"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        size_t n = strlen(map[i][0]);
        if (!strncmp(s, map[i][0], n) && s[n] >= '1' && s[n] <= '3' && !strcmp(s + n + 1, "d"))
            return map[i][1];
    }
    return NULL;
}

static int pad(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
               char *detail, size_t dlen) {
    const char *mode = module ? pad_module_mode(s) : "constant";
    if (mode == NULL || (!module && strcmp(s, "pad") != 0))
        return 0;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *pj = module ? json_object_get(attrs, "padding") : kfx_node_arg(node, 1, "pad");
    const json_t *vj = module ? json_object_get(attrs, "value") : kfx_node_arg(node, 3, "value");
    const json_t *mj = module ? NULL : kfx_node_arg(node, 2, "mode");
    if (mj && json_is_string(mj))
        mode = json_string_value(mj);
    else if (mj && !json_is_null(mj))
        mode = "?";
    int in = input_of(p, node), np = 0;
    long long pads[2 * KFX_MAX_DIMS];
    struct gspec g;
    if (in < 0 || !ints(p, pj, pads, 2, &np) || np % 2 || np / 2 > p->val[in].ndim ||
        (vj && !json_is_null(vj) && !json_is_number(vj)) ||
        (vj && json_is_number(vj) && !isfinite(json_number_value(vj)))) {
        snprintf(detail, dlen, "%s with padding or a value that is not numbers (not yet)", s);
        return -1;
    }
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    static const enum kfx_grule rules[] = {KFX_G_CONST, KFX_G_REFLECT, KFX_G_REPLICATE,
                                           KFX_G_CIRCULAR};
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(mode, modes[i]))
            m = i;
    if (m < 0) {
        snprintf(detail, dlen, "%s in mode %s (not yet)", s, mode);
        return -1;
    }
    spec_of(&g, &p->val[in], "pad");
    g.fill = vj && json_is_number(vj) ? json_number_value(vj) : 0.0;
    for (int j = 0; j < np / 2; j++) {
        const int d = p->val[in].ndim - 1 - j;
        const long long lo = pads[2 * j], hi = pads[2 * j + 1], n = g.n[d];
        if (lo == 0 && hi == 0)
            continue;
        const bool fits = m == 0   ? n + lo + hi >= 0
                          : m == 1 ? lo >= 0 && hi >= 0 && lo < n && hi < n
                          : m == 2 ? lo >= 0 && hi >= 0 && n > 0
                                   : lo >= 0 && hi >= 0 && lo <= n && hi <= n;
        if (!fits) {
            snprintf(detail, dlen, "%s (%s) by %lld, %lld of a dim of %lld (not yet)", s, mode, lo,
                     hi, n);
            return -1;
        }
        g.rule[d] = (unsigned char)rules[m];
        g.lo[d] = lo;
        g.out[d] = n + lo + hi;
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

/* --- interpolation ----------------------------------------------------------------------- */

/* PyTorch's compute_scales_value: 1 / scale_factor (as a float) when a factor is given and
 * not recomputed, else in / out. */
static double scale_of(const json_t *sf, int i, bool recompute, long long in, long long out) {
    const json_t *f = json_is_array(sf) ? json_array_get(sf, (size_t)i) : sf;
    if (!recompute && json_is_number(f) && json_number_value(f) > 0)
        return (float)(1.0 / json_number_value(f));
    return (float)in / (float)out;
}

static int interpolate(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
                       char *detail, size_t dlen) {
    const bool up_module = module && (!strcmp(s, "Upsample") || !strcmp(s, "UpsamplingNearest2d") ||
                                      !strcmp(s, "UpsamplingBilinear2d"));
    if (!up_module && (module || (strcmp(s, "interpolate") != 0 && strcmp(s, "upsample") != 0)))
        return 0;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *sf =
        module ? json_object_get(attrs, "scale_factor") : kfx_node_arg(node, 2, "scale_factor");
    const json_t *mj = module ? json_object_get(attrs, "mode") : kfx_node_arg(node, 3, "mode");
    const json_t *ac =
        module ? json_object_get(attrs, "align_corners") : kfx_node_arg(node, 4, "align_corners");
    const json_t *rc = module ? json_object_get(attrs, "recompute_scale_factor")
                              : kfx_node_arg(node, 5, "recompute_scale_factor");
    const json_t *aa = module ? NULL : kfx_node_arg(node, 6, "antialias");
    const char *mode = mj ? json_string_value(mj) : "nearest";
    int in = input_of(p, node);
    long long shape[KFX_MAX_DIMS];
    const int nd = out_shape(node, shape);
    if (in < 0 || mode == NULL || nd != p->val[in].ndim || nd < 3 || nd > 5 ||
        shape[0] != p->val[in].shape[0] || shape[1] != p->val[in].shape[1] ||
        (sf && !json_is_null(sf) && !json_is_number(sf) && !json_is_array(sf)) ||
        json_is_true(aa)) {
        snprintf(detail, dlen, "%s of a form not planned (antialias, or a scale not a number)", s);
        return -1;
    }
    enum kfx_grule rule;
    if (!strcmp(mode, "nearest"))
        rule = KFX_G_NEAREST;
    else if (!strcmp(mode, "nearest-exact"))
        rule = KFX_G_NEAREST_EXACT;
    else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear") || !strcmp(mode, "trilinear"))
        rule = KFX_G_LINEAR;
    else if (!strcmp(mode, "area"))
        rule = KFX_G_WINDOW;
    else {
        snprintf(detail, dlen, "%s in mode %s (not yet)", s, mode);
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], rule == KFX_G_WINDOW ? "avg" : mode);
    const bool align = json_is_true(ac), recompute = json_is_true(rc);
    for (int d = 2; d < nd; d++) {
        const long long n = g.n[d], o = shape[d];
        if (o < 1) {
            snprintf(detail, dlen, "%s to an empty output", s);
            return -1;
        }
        g.out[d] = o;
        g.rule[d] = (unsigned char)rule;
        if (rule == KFX_G_LINEAR && align) {
            g.lo[d] = 1;
            g.scale[d] = o > 1 ? (float)(n - 1) / (float)(o - 1) : 0.0;
        } else if (rule != KFX_G_WINDOW) {
            g.scale[d] = scale_of(sf, d - 2, recompute, n, o);
        }
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

/* --- pixel shuffle ----------------------------------------------------------------------- */

static int shuffle(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
                   char *detail, size_t dlen) {
    const bool un = module ? !strcmp(s, "PixelUnshuffle") : !strcmp(s, "pixel_unshuffle");
    if (!un && strcmp(s, module ? "PixelShuffle" : "pixel_shuffle") != 0)
        return 0;
    const json_t *rj = module ? json_object_get(json_object_get(node, "attrs"),
                                                un ? "downscale_factor" : "upscale_factor")
                              : kfx_node_arg(node, 1, un ? "downscale_factor" : "upscale_factor");
    int in = input_of(p, node);
    const long long r = json_is_integer(rj) ? json_integer_value(rj) : 0;
    const int lead = in >= 0 ? p->val[in].ndim - 3 : -1;
    if (in < 0 || r < 1 || lead < 0 || lead + 5 > KFX_MAX_DIMS) {
        snprintf(detail, dlen, "%s of other than a float tensor of 3 to 5 dims by an int", s);
        return -1;
    }
    const struct kfx_val *x = &p->val[in];
    long long C = x->shape[lead], H = x->shape[lead + 1], W = x->shape[lead + 2];
    struct gspec g;
    spec_of(&g, x, un ? "pixel_unshuffle" : "pixel_shuffle");
    if (un ? H % r || W % r : C % (r * r)) {
        snprintf(detail, dlen, "%s by %lld of a shape it does not divide", s, r);
        return -1;
    }
    long long *o = g.out + lead, *st = g.stride + lead;
    if (!un) { /* [C r r H W] read as [C H r W r] */
        C /= r * r;
        const long long e[5] = {C, H, r, W, r}, t[5] = {r * r * H * W, W, r * H * W, 1, H * W};
        for (int i = 0; i < 5; i++)
            o[i] = e[i], st[i] = t[i];
    } else { /* [C H r W r] read as [C r r H W] */
        H /= r;
        W /= r;
        const long long e[5] = {C, r, r, H, W}, t[5] = {H * r * W * r, W * r, 1, r * W * r, r};
        for (int i = 0; i < 5; i++)
            o[i] = e[i], st[i] = t[i];
    }
    g.nd = lead + 5;
    for (int d = 0; d < g.nd; d++)
        g.n[d] = g.out[d];
    return emit(p, node, k, in, &g, detail, dlen);
}

/* --- flip and adaptive pools ------------------------------------------------------------- */

static int flip(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int in = input_of(p, node), nd = 0;
    long long dims[2 * KFX_MAX_DIMS];
    if (in < 0 || p->val[in].flipped || !ints(p, kfx_node_arg(node, 1, "dims"), dims, 1, &nd)) {
        snprintf(detail, dlen, "flip of other than a float tensor over listed dims");
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], "flip");
    for (int i = 0; i < nd; i++) {
        long long d = dims[i] < 0 ? dims[i] + g.nd : dims[i];
        if (d < 0 || d >= g.nd) {
            snprintf(detail, dlen, "flip over dim %lld of a tensor of %d", dims[i], g.nd);
            return -1;
        }
        g.rule[d] = KFX_G_FLIP;
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

static int adaptive(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
                    char *detail, size_t dlen) {
    const char *base = module ? "Adaptive" : "adaptive_";
    if (strncmp(s, base, strlen(base)) != 0)
        return 0;
    const char *rest = s + strlen(base);
    const bool max = !strncmp(rest, module ? "MaxPool" : "max_pool", module ? 7 : 8);
    if (!max && strncmp(rest, module ? "AvgPool" : "avg_pool", module ? 7 : 8) != 0)
        return 0;
    const char *r = rest + (module ? 7 : 8);
    if (r[0] < '1' || r[0] > '3' || strcmp(r + 1, "d") != 0)
        return 0;
    const int rank = r[0] - '0';
    long long shape[KFX_MAX_DIMS];
    const int nd = out_shape(node, shape);
    bool ones = nd >= rank;
    for (int d = nd - rank; ones && d < nd; d++)
        ones = shape[d] == 1;
    if (ones) /* a mean or max over the dims: a reduction (expert_plan_node.c) */
        return 0;
    const json_t *ri = module ? json_object_get(json_object_get(node, "attrs"), "return_indices")
                              : kfx_node_arg(node, 2, "return_indices");
    int in = input_of(p, node);
    if (in < 0 || json_is_true(ri) || nd != p->val[in].ndim || nd < rank + 1) {
        snprintf(detail, dlen, "%s with indices, or of a shape not planned (not yet)", s);
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], max ? "max" : "avg");
    for (int d = nd - rank; d < nd; d++) {
        if (shape[d] < 1) {
            snprintf(detail, dlen, "%s to an empty output", s);
            return -1;
        }
        g.out[d] = shape[d];
        g.rule[d] = KFX_G_WINDOW;
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

/* --- repeats ----------------------------------------------------------------------------- */

/* x.repeat(sizes) and torch.tile / x.tile(dims): new leading dims read nothing (stride 0),
 * each dim repeated r times reads o modulo its extent. */
static int repeat(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen) {
    const bool tile = !strcmp(s, "tile");
    const json_t *args = json_object_get(node, "args");
    int in = input_of(p, node), nr = 0;
    long long r[2 * KFX_MAX_DIMS];
    const json_t *first = json_array_get(args, 1);
    if (first == NULL)
        first = json_object_get(json_object_get(node, "kwargs"), tile ? "dims" : "repeats");
    bool ok = in >= 0 && first != NULL;
    if (ok && (json_is_array(first) || json_array_size(args) <= 2))
        ok = ints(p, first, r, 1, &nr);
    else
        for (size_t i = 1; ok && i < json_array_size(args); i++) {
            ok = nr < 2 * KFX_MAX_DIMS && kfx_int(p, json_array_get(args, i), &r[nr]);
            nr += ok;
        }
    const int nd = in >= 0 ? p->val[in].ndim : 0;
    if (ok && tile && nr < nd) { /* tile: ones in front for the dims not given */
        memmove(r + (nd - nr), r, sizeof(r[0]) * (size_t)nr);
        for (int i = 0; i < nd - nr; i++)
            r[i] = 1;
        nr = nd;
    }
    if (!ok || nr < nd || nr > KFX_MAX_DIMS) {
        snprintf(detail, dlen, "%s by other than ints, one a dim (not yet)", s);
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], "repeat");
    const int lead = nr - nd;
    memmove(g.out + lead, g.out, sizeof(g.out[0]) * (size_t)nd);
    memmove(g.n + lead, g.n, sizeof(g.n[0]) * (size_t)nd);
    memmove(g.stride + lead, g.stride, sizeof(g.stride[0]) * (size_t)nd);
    g.nd = nr;
    for (int d = 0; d < nr; d++) {
        if (r[d] < 0) {
            snprintf(detail, dlen, "%s by a negative count", s);
            return -1;
        }
        if (d < lead) {
            g.out[d] = r[d];
            g.n[d] = 1;
            g.stride[d] = 0;
            g.rule[d] = KFX_G_MOD;
        } else if (r[d] != 1) {
            g.out[d] = g.n[d] * r[d];
            g.rule[d] = KFX_G_MOD;
        }
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

/* torch.roll(x, shifts, dims): out[o] = x[(o - shift) mod n] along each dim named (a
 * circular rule, shifts along one dim adding up), or along the flattened tensor when dims is
 * None. */
static int roll(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int in = input_of(p, node), ns = 0, nd = 0;
    long long sh[2 * KFX_MAX_DIMS], dims[2 * KFX_MAX_DIMS];
    const json_t *dj = kfx_node_arg(node, 2, "dims");
    const bool flat = dj == NULL || json_is_null(dj) || (json_is_array(dj) && !json_array_size(dj));
    bool ok = in >= 0 && ints(p, kfx_node_arg(node, 1, "shifts"), sh, 1, &ns);
    if (ok && !flat)
        ok = ints(p, dj, dims, 1, &nd) && nd == ns;
    if (!ok || (flat && ns != 1)) {
        snprintf(detail, dlen, "roll by other than ints, one shift a dim");
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], "roll");
    if (flat) { /* the flattened tensor, one dim */
        long long n = 1;
        for (int d = 0; d < g.nd; d++)
            n *= g.out[d];
        g.nd = 1;
        g.out[0] = g.n[0] = n;
        g.stride[0] = 1;
        nd = 1;
        dims[0] = 0;
    }
    for (int i = 0; i < nd; i++) {
        long long d = dims[i] < 0 ? dims[i] + g.nd : dims[i];
        if (d < 0 || d >= g.nd) {
            snprintf(detail, dlen, "roll along dim %lld of a tensor of %d", dims[i], g.nd);
            return -1;
        }
        const long long n = g.n[d];
        if (n > 0) {
            g.lo[d] = ((g.lo[d] + sh[i]) % n + n) % n;
            g.rule[d] = KFX_G_CIRCULAR;
        }
    }
    return emit(p, node, k, in, &g, detail, dlen);
}

/* x.repeat_interleave(r, dim) and torch.repeat_interleave: each element r times along dim (the
 * flattened tensor when dim is None). */
static int interleave(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int in = input_of(p, node);
    const json_t *rj = kfx_node_arg(node, 1, "repeats"), *dj = kfx_node_arg(node, 2, "dim");
    const int nd = in >= 0 ? p->val[in].ndim : 0;
    long long d = json_is_integer(dj) ? json_integer_value(dj) : -1;
    d = d < 0 ? d + nd : d;
    if (in < 0 || !json_is_integer(rj) || json_integer_value(rj) < 1 ||
        (dj && !json_is_null(dj) && (!json_is_integer(dj) || d < 0 || d >= nd))) {
        snprintf(detail, dlen, "repeat_interleave by other than a positive int (not yet)");
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], "repeat_interleave");
    if (dj == NULL || json_is_null(dj)) { /* the flattened tensor */
        long long total = 1;
        for (int i = 0; i < nd; i++)
            total *= g.n[i];
        g.nd = 1;
        g.out[0] = g.n[0] = total;
        g.stride[0] = 1;
        d = 0;
    }
    g.rule[d] = KFX_G_DIV;
    g.lo[d] = json_integer_value(rj);
    g.out[d] = g.n[d] * g.lo[d];
    return emit(p, node, k, in, &g, detail, dlen);
}

/* torch.gather(x, dim, index) and x.gather(dim, index): out[.., j, ..] = x[.., index[.., j, ..],
 * ..] along dim, index an int64 input of the task (or a view of one) read as it is, of x's rank
 * and no larger than x off dim. */
static int by_index(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    int in = input_of(p, node);
    const json_t *dj = kfx_node_arg(node, 1, "dim");
    int ix = kfx_arg_val(p, kfx_node_arg(node, 2, "index"));
    const int nd = in >= 0 ? p->val[in].ndim : 0;
    long long d = json_is_integer(dj) ? json_integer_value(dj) : -99;
    d = d < 0 ? d + nd : d;
    const json_t *tn =
        ix >= 0 && p->val[ix].node ? json_object_get(p->val[ix].node, "output") : NULL;
    const char *tdt = json_string_value(json_object_get(tn, "dtype"));
    const json_t *sg = json_object_get(json_object_get(node, "kwargs"), "sparse_grad");
    bool ok = in >= 0 && ix >= 0 && d >= 0 && d < nd && p->val[ix].kind == KFX_INPUT &&
              p->val[ix].is_int && !p->val[ix].noncontig && tdt && !strcmp(tdt, "int64") &&
              p->val[ix].ndim == nd && (!sg || !json_is_true(sg));
    for (int i = 0; ok && i < nd; i++)
        ok = i == d || p->val[ix].shape[i] <= p->val[in].shape[i];
    if (!ok) {
        snprintf(detail, dlen,
                 "gather other than by an int64 input of indices of the input's rank (not yet)");
        return -1;
    }
    struct gspec g;
    spec_of(&g, &p->val[in], "gather");
    for (int i = 0; i < nd; i++)
        g.out[i] = p->val[ix].shape[i];
    g.rule[d] = KFX_G_INDEX;
    g.fill = NAN;
    g.ix = ix;
    return emit(p, node, k, in, &g, detail, dlen);
}

int kfx_plan_gather(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                    size_t dlen) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const bool module = op && strcmp(op, "call_module") == 0;
    if (!s)
        return 0;
    if (!module && !strcmp(s, "flip"))
        return flip(p, node, k, detail, dlen);
    if (!module && (!strcmp(s, "repeat") || !strcmp(s, "tile")))
        return repeat(p, node, k, s, detail, dlen);
    if (!module && !strcmp(s, "roll"))
        return roll(p, node, k, detail, dlen);
    if (!module && !strcmp(s, "repeat_interleave"))
        return interleave(p, node, k, detail, dlen);
    if (!module && !strcmp(s, "gather"))
        return by_index(p, node, k, detail, dlen);
    int rc = pad(p, node, k, s, module, detail, dlen);
    if (rc == 0)
        rc = interpolate(p, node, k, s, module, detail, dlen);
    if (rc == 0)
        rc = shuffle(p, node, k, s, module, detail, dlen);
    if (rc == 0)
        rc = adaptive(p, node, k, s, module, detail, dlen);
    return rc;
}
