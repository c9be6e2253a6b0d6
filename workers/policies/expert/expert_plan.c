/* expert_plan.c: the expert's planner (see expert_plan.h): values, lazy elementwise
 * expressions, their materialisation as fused kernels, the walk over the graph's nodes. The
 * operators that are not elementwise are expert_plan_node.c's. */
#include "expert_plan.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"

void kfx_line(struct kfx_plan *p, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap); /* a cat of many tensors: a long line, whole */
    va_end(ap);
    char *line = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (line != NULL) {
        vsnprintf(line, (size_t)n + 1, fmt, again);
        kf_buf_printf(p->fwd, "        %s\n", line);
        free(line);
    }
    va_end(again);
}

void kfx_bind_param(struct kfx_plan *p, const char *local, const char *dotted, bool buffer) {
    char expr[512] = "self";
    size_t len = strlen(expr);
    const char *part = dotted;
    for (const char *dot; (dot = strchr(part, '.')) != NULL; part = dot + 1) {
        snprintf(expr + len, sizeof(expr) - len, "._modules[\"%.*s\"]", (int)(dot - part), part);
        len = strlen(expr);
    }
    kfx_line(p, "%s = %s._%s[\"%s\"]", local, expr, buffer ? "buffers" : "parameters", part);
}

static void shape_from(struct kfx_val *v, const json_t *out) {
    const json_t *shape = json_object_get(out, "shape");
    v->ndim = 0;
    size_t i;
    const json_t *d;
    json_array_foreach(shape, i, d) {
        if (v->ndim < KFX_MAX_DIMS)
            v->shape[v->ndim++] = json_integer_value(d);
    }
    const char *dt = json_string_value(json_object_get(out, "dtype"));
    v->is_int = dt && strcmp(dt, "float32") != 0;
}

void kfx_set_val(struct kfx_plan *p, int k, const json_t *node, enum kfx_vkind kind,
                 const char *py) {
    struct kfx_val *v = &p->val[k];
    v->kind = kind;
    snprintf(v->py, sizeof(v->py), "%s", py ? py : "");
    shape_from(v, json_object_get(node, "output"));
}

int kfx_set_lazy(struct kfx_plan *p, int k, const json_t *node, const char *expr) {
    kfx_set_val(p, k, node, KFX_LAZY, NULL);
    free(p->val[k].expr);
    p->val[k].expr = strdup(expr);
    return p->val[k].expr ? 0 : -1;
}

int kfx_new_val(struct kfx_plan *p, const char *py, const long long *shape, int ndim) {
    if (p->n_vals >= KFX_MAX_VALS || ndim > KFX_MAX_DIMS)
        return -1;
    int k = p->n_vals++;
    struct kfx_val *v = &p->val[k];
    memset(v, 0, sizeof(*v));
    v->kind = KFX_PARAM;
    snprintf(v->py, sizeof(v->py), "%s", py);
    v->ndim = ndim;
    memcpy(v->shape, shape, sizeof(long long) * (size_t)ndim);
    return k;
}

int kfx_identity_of(const struct kfx_plan *p, int v) {
    const char *e = v >= 0 && p->val[v].kind == KFX_LAZY ? p->val[v].expr : NULL;
    char *end = NULL;
    long j = e && e[0] == 'v' ? strtol(e + 1, &end, 10) : -1;
    return j >= 0 && j < v && end && *end == '\0' ? (int)j : -1;
}

struct kfx_step *kfx_add_step(struct kfx_plan *p, enum kfx_skind kind, char *detail, size_t dlen) {
    if (p->n_steps >= KFX_MAX_STEPS) {
        snprintf(detail, dlen, "a graph that needs more than %d kernels", KFX_MAX_STEPS);
        return NULL;
    }
    struct kfx_step *st = &p->step[p->n_steps];
    memset(st, 0, sizeof(*st));
    st->kind = kind;
    st->conv_out = -1;
    snprintf(st->fn, sizeof(st->fn), "kf_op%d", p->n_steps);
    p->n_steps++;
    return st;
}

int kfx_arg_val(const struct kfx_plan *p, const json_t *a) {
    const char *name = json_string_value(json_object_get(a, "node"));
    if (!json_is_object(a) || !name)
        return -1;
    for (int k = p->n_vals - 1; k >= 0; k--) {
        const json_t *node = p->val[k].node;
        const char *nn = node ? json_string_value(json_object_get(node, "name")) : NULL;
        if (nn && strcmp(nn, name) == 0)
            return k;
    }
    return -1;
}

bool kfx_int(const struct kfx_plan *p, const json_t *a, long long *out) {
    if (json_is_integer(a)) {
        *out = json_integer_value(a);
        return true;
    }
    int v = kfx_arg_val(p, a);
    const json_t *num =
        v >= 0 && p->val[v].kind == KFX_SIZE && p->val[v].ndim == 0 && p->val[v].node
            ? json_object_get(p->val[v].node, "value")
            : NULL;
    if (!json_is_integer(num))
        return false;
    *out = json_integer_value(num);
    return true;
}

const json_t *kfx_node_arg(const json_t *node, size_t i, const char *name) {
    const json_t *args = json_object_get(node, "args");
    if (i < json_array_size(args))
        return json_array_get(args, i);
    return name ? json_object_get(json_object_get(node, "kwargs"), name) : NULL;
}

/* Whether json value v refers to the node called name ({"node": name}, at any depth). */
static bool refers(const json_t *v, const char *name) {
    if (json_is_object(v)) {
        const char *n = json_string_value(json_object_get(v, "node"));
        if (n && strcmp(n, name) == 0)
            return true;
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            if (refers(x, name))
                return true;
        }
        return false;
    }
    if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
            if (refers(x, name))
                return true;
        }
    }
    return false;
}

/* The nodes that use node's result (the output node among them), into users[0..max): their
 * count, which may exceed max. */
static int users_of(const struct kfx_plan *p, const json_t *node, const json_t **users, int max) {
    const char *name = json_string_value(json_object_get(node, "name"));
    const json_t *nodes = json_object_get(json_object_get(p->graph, "graph"), "nodes"), *n;
    size_t i;
    int count = 0;
    json_array_foreach(nodes, i, n) {
        if (n == node || !name)
            continue;
        if (refers(json_object_get(n, "args"), name) ||
            refers(json_object_get(n, "kwargs"), name)) {
            if (count < max)
                users[count] = n;
            count++;
        }
    }
    return count;
}

bool kfx_unused(const struct kfx_plan *p, const json_t *node) {
    return users_of(p, node, NULL, 0) == 0;
}

const json_t *kfx_sole_user(const struct kfx_plan *p, const json_t *node) {
    const json_t *user = NULL;
    return users_of(p, node, &user, 1) == 1 ? user : NULL;
}

/* The vals an expression reads: "vN" tokens. */
static int refs(const char *e, int *out, int max) {
    int n = 0;
    for (const char *q = e; *q; q++) {
        if (*q == 'v' && isdigit((unsigned char)q[1]) &&
            (q == e || !(isalnum((unsigned char)q[-1]) || q[-1] == '_'))) {
            char *end;
            long k = strtol(q + 1, &end, 10);
            if (n < max)
                out[n++] = (int)k;
            q = end - 1;
        }
    }
    return n;
}

struct chain {
    bool lazy[KFX_MAX_VALS];
    int leaf[KFX_MAX_LEAVES];
    int n_leaves;
};

/* Marks what lazy val v reads, down to its materialised leaves. 0, or -1 (too many leaves, or
 * an integer or tuple among them). */
static int walk(const struct kfx_plan *p, int v, struct chain *c) {
    const struct kfx_val *x = &p->val[v];
    if (x->kind == KFX_LAZY) {
        if (c->lazy[v])
            return 0;
        c->lazy[v] = true;
        int r[64];
        int n = refs(x->expr, r, 64);
        for (int i = 0; i < n; i++)
            if (r[i] < 0 || r[i] >= p->n_vals || walk(p, r[i], c) != 0)
                return -1;
        return 0;
    }
    if (x->kind == KFX_TUPLE || x->is_int)
        return -1;
    for (int i = 0; i < c->n_leaves; i++)
        if (c->leaf[i] == v)
            return 0;
    if (c->n_leaves >= KFX_MAX_LEAVES)
        return -1;
    c->leaf[c->n_leaves++] = v;
    return 0;
}

bool kfx_reads_val(const struct kfx_plan *p, int u, int t) {
    for (int hops = 0; u >= 0 && u < p->n_vals && hops < KFX_MAX_VALS; hops++) {
        if (u == t)
            return true;
        const struct kfx_val *x = &p->val[u];
        if (x->kind == KFX_LAZY) {
            struct chain *c = calloc(1, sizeof(*c));
            bool reads = c == NULL || walk(p, u, c) != 0; /* unknown: taken as read */
            for (int i = 0; !reads && i < c->n_leaves; i++)
                reads = c->leaf[i] != u && kfx_reads_val(p, c->leaf[i], t);
            free(c);
            return reads;
        }
        /* a view's own root, or the tensor a swapped view stands for */
        u = x->view_of ? x->view_of - 1 : x->last2_of ? x->last2_of - 1 : -1;
        if (u == (int)(x - p->val))
            return false;
    }
    return false;
}

/* The body computing val v over the chain's leaves, into b. */
static void chain_body(const struct kfx_plan *p, int v, const struct chain *c, struct kf_buf *b) {
    for (int i = 0; i < c->n_leaves; i++)
        kf_buf_printf(b, "const float v%d = in%d[i];\n", c->leaf[i], i);
    for (int k = 0; k < p->n_vals; k++)
        if (c->lazy[k])
            kf_buf_printf(b, "const float v%d = %s;\n", k, p->val[k].expr);
    kf_buf_printf(b, "out[i] = v%d;\n", v);
}

bool kfx_step_bcast(const struct kfx_step *st) {
    for (int k = 0; k < st->n_leaves; k++)
        if (st->pro_bcast[k])
            return true;
    return false;
}

bool kfx_same_shape(const struct kfx_val *a, const struct kfx_val *b) {
    return a->ndim == b->ndim && !a->noncontig && !b->noncontig &&
           memcmp(a->shape, b->shape, sizeof(long long) * (size_t)a->ndim) == 0;
}

/* The leaves' Python names, "a, b, " into out. */
static void leaf_names(const struct kfx_plan *p, const struct chain *c, char *out, size_t n) {
    out[0] = '\0';
    for (int i = 0; i < c->n_leaves; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s, ", p->val[c->leaf[i]].py);
    }
}

/* The strides the trace recorded for strided view l (inspect writes them for a tensor that is
 * not contiguous), or NULL. The copy kfx_materialise makes of such a view has no node: the
 * node stayed with the view's own val, which became the lazy "vL". */
static const json_t *recorded_strides(const struct kfx_plan *p, int l) {
    const json_t *node = p->val[l].node;
    char e[16];
    snprintf(e, sizeof(e), "v%d", l);
    for (int k = 0; node == NULL && k < p->n_vals; k++)
        if (p->val[k].kind == KFX_LAZY && p->val[k].expr && !strcmp(p->val[k].expr, e) &&
            p->val[k].ndim == p->val[l].ndim)
            node = p->val[k].node;
    return node ? json_object_get(json_object_get(node, "output"), "stride") : NULL;
}

/* Whether view l is laid out as a contiguous tensor of its shape (x[..., :, None], x[1:]): the
 * trace recorded its node's output with no strides, which inspect writes for every other. */
static bool laid_out(const struct kfx_plan *p, int l) {
    const json_t *out = p->val[l].node ? json_object_get(p->val[l].node, "output") : NULL;
    return json_is_array(json_object_get(out, "shape")) && json_object_get(out, "stride") == NULL;
}

/* The dimensions x's broadcast from c's leaves (contiguous, right-aligned) folds into, as the
 * model's _fold4 folds them: sizes of 1 dropped, a dimension merged into the one before it where
 * every leaf walks the two as one. */
static int folded_dims(const struct kfx_plan *p, const struct kfx_val *x, const struct chain *c) {
    long long st[KFX_MAX_LEAVES][KFX_MAX_DIMS], last[KFX_MAX_LEAVES];
    for (int l = 0; l < c->n_leaves; l++) {
        const struct kfx_val *y = &p->val[c->leaf[l]];
        /* a strided view: the strides the trace recorded; without them, no dimension is taken
         * to merge */
        const json_t *rec = y->noncontig ? recorded_strides(p, c->leaf[l]) : NULL;
        if (y->noncontig && json_array_size(rec) != (size_t)y->ndim && !laid_out(p, c->leaf[l]))
            return x->ndim;
        long long run = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int e = d - (x->ndim - y->ndim);
            long long n = e >= 0 ? y->shape[e] : 1;
            long long own =
                rec && e >= 0 ? json_integer_value(json_array_get(rec, (size_t)e)) : run;
            st[l][d] = n == x->shape[d] ? own : 0;
            run *= n;
        }
    }
    int dims = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1)
            continue;
        bool merge = dims > 0;
        for (int l = 0; merge && l < c->n_leaves; l++)
            merge = last[l] == st[l][d] * x->shape[d];
        dims += !merge;
        for (int l = 0; l < c->n_leaves; l++)
            last[l] = st[l][d];
    }
    return dims;
}

/* the most leaves of a reduction's prologue that broadcast (pro_bcast) */
enum { KFX_MAX_BCAST_LEAVES = 2 };

/* Whether contiguous val l broadcasts to x along one run of x's dimensions (its sizes other
 * than 1 equal x's, with no broadcast dimension between them): the model's _bqm gives the
 * (q, m) that index it. */
static bool run_broadcast(const struct kfx_val *l, const struct kfx_val *x) {
    if (l->noncontig || l->offset || l->ndim > x->ndim || x->ndim == 0)
        return false;
    int lead = x->ndim - l->ndim, first = -1, last = -1;
    for (int d = 0; d < x->ndim; d++) {
        long long n = d >= lead ? l->shape[d - lead] : 1;
        if (n == 1)
            continue;
        if (n != x->shape[d])
            return false;
        first = first < 0 ? d : first;
        last = d;
    }
    for (int d = first; first >= 0 && d < last; d++)
        if ((d >= lead ? l->shape[d - lead] : 1) == 1 && x->shape[d] != 1)
            return false;
    return true;
}

/* Whether val l holds one element (0-d, or every dim 1) and is not a strided view. */
static bool one_value(const struct kfx_val *l) {
    long long n = 1;
    for (int d = 0; d < l->ndim; d++)
        n *= l->shape[d];
    return n == 1 && !l->noncontig;
}

/* A lazy val that is another val as it is ("vN": x.contiguous() of a view that a gather has
 * copied) where that val is a step's contiguous output of the same shape: v becomes that
 * tensor, without a pass that copies it. */
static bool alias_of_tensor(struct kfx_plan *p, int v) {
    struct kfx_val *x = &p->val[v];
    char *end = NULL;
    long n = x->expr && x->expr[0] == 'v' ? strtol(x->expr + 1, &end, 10) : -1;
    if (n < 0 || n >= p->n_vals || n == v || *end != '\0')
        return false;
    const struct kfx_val *t = &p->val[n];
    if (t->kind != KFX_TENSOR || t->noncontig || t->offset || t->view_of || t->is_int ||
        !kfx_same_shape(t, x))
        return false;
    free(x->expr);
    x->expr = NULL;
    x->kind = KFX_TENSOR;
    memcpy(x->py, t->py, sizeof(x->py));
    return true;
}

int kfx_materialise(struct kfx_plan *p, int v, char *detail, size_t dlen) {
    struct kfx_val *x = &p->val[v];
    if (x->kind == KFX_TUPLE) {
        snprintf(detail, dlen, "a (values, indices) tuple used whole (not yet)");
        return -1;
    }
    if (x->kind == KFX_SIZE || x->kind == KFX_DEVICE) {
        snprintf(detail, dlen, "a %s used as a tensor (not yet)",
                 x->kind == KFX_SIZE ? "size" : "device");
        return -1;
    }
    if (x->kind != KFX_LAZY && x->noncontig && kfx_gather_wants(p, v))
        return kfx_gather_copy(p, v, detail, dlen); /* dims that do not fold into 4 */
    if (x->kind != KFX_LAZY && x->noncontig) {
        /* a strided view: v becomes its copy, through the strided elementwise pass */
        if (p->n_vals >= KFX_MAX_VALS)
            return -1;
        int w = p->n_vals++;
        p->val[w] = *x;
        p->val[w].node = NULL; /* the node's later readers find v, the copy */
        char e[16];
        snprintf(e, sizeof(e), "v%d", w);
        if (kfx_set_lazy(p, v, x->node, e) != 0)
            return -1;
        x->noncontig = false;
        x->offset = false;
        x->view_of = 0;
    }
    if (x->kind != KFX_LAZY)
        return 0;
    if (alias_of_tensor(p, v))
        return 0;
    if (x->is_int) {
        snprintf(detail, dlen, "a comparison's boolean tensor used as a tensor (not yet)");
        return -1;
    }
    struct chain *c = calloc(1, sizeof(*c));
    if (c == NULL || walk(p, v, c) != 0) {
        snprintf(detail, dlen,
                 "an elementwise chain of more than %d tensors, or over an integer tensor",
                 KFX_MAX_LEAVES);
        free(c);
        return -1;
    }
    int bcast = 0, full = -1; /* full: the first leaf of x's shape */
    bool strided = false;     /* a leaf is a transposed or permuted view */
    unsigned char scalar[KFX_MAX_LEAVES] = {0};
    for (int i = 0; i < c->n_leaves; i++) {
        const struct kfx_val *l = &p->val[c->leaf[i]];
        if (kfx_same_shape(l, x))
            full = full < 0 ? i : full;
        else if (one_value(l) && l->ndim <= x->ndim && !one_value(x))
            scalar[i] = 1; /* read as inK[0] by the contiguous kernel */
        else
            bcast = 1;
        strided = strided || l->noncontig;
    }
    if (full < 0) /* no leaf of x's shape: the broadcasting kernel reads the scalars too */
        bcast = 1;
    if (bcast && x->ndim > 4 && folded_dims(p, x, c) > 4) {
        bool copied = false; /* strided leaves that do not fold: each copied by a gather */
        for (int i = 0; i < c->n_leaves; i++)
            if (kfx_gather_wants(p, c->leaf[i])) {
                if (kfx_gather_copy(p, c->leaf[i], detail, dlen) != 0) {
                    free(c);
                    return -1;
                }
                copied = true;
            }
        free(c);
        if (copied)
            return kfx_materialise(p, v, detail, dlen);
        snprintf(detail, dlen,
                 "broadcasting over more than 4 dimensions that do not merge (not "
                 "yet)");
        return -1;
    }
    unsigned char kind[KFX_MAX_LEAVES];
    const int conv = strided ? -1 : kfx_fuse_conv(p, v, c->leaf, c->n_leaves, kind);
    struct kf_buf b = {0};
    chain_body(p, v, c, &b); /* over the leaves in kfx_fuse_conv's order, where it applies */
    if (conv >= 0 && b.data) {
        const int rc = kfx_fuse_conv_emit(p, conv, v, c->leaf, c->n_leaves, kind, b.data);
        free(c);
        if (rc != 0)
            snprintf(detail, dlen, "a convolution's epilogue: its launch or its leaves' names");
        return rc;
    }
    char names[1024];
    leaf_names(p, c, names, sizeof(names));
    if (b.data && bcast && x->ndim <= 4 && !strided &&
        kfx_fuse_norm(p, v, c->leaf, c->n_leaves, b.data, names)) {
        free(c); /* the body is the fused step's now */
        return 0;
    }
    struct kfx_step *st = kfx_add_step(p, KFX_EW, detail, dlen);
    if (st == NULL) {
        free(b.data);
        free(c);
        return -1;
    }
    st->body = b.data;
    st->n_leaves = c->n_leaves;
    st->bcast = bcast;
    if (!bcast)
        memcpy(st->pro_scalar, scalar, sizeof(scalar));
    snprintf(x->py, sizeof(x->py), "t%d", v);
    /* the pointers passed: a strided view's contiguous root (the same first element; the
     * runtime passes contiguous tensors only), read through the view's strides */
    char ptrs[1024] = "";
    for (int i = 0; i < c->n_leaves; i++) {
        const struct kfx_val *l = &p->val[c->leaf[i]];
        size_t len = strlen(ptrs);
        const char *root = l->noncontig ? p->val[l->view_of - 1].py : l->py;
        if (l->noncontig && l->offset) /* from the slice's first element (_at) */
            snprintf(ptrs + len, sizeof(ptrs) - len, "_at(%s, %s), ", l->py, root);
        else
            snprintf(ptrs + len, sizeof(ptrs) - len, "%s, ", root);
    }
    if (bcast && x->ndim > 4) { /* folded to 4 dimensions in Python (_fold4) */
        kfx_line(p, "%s = _alloc(_broadcast(%s), %s)", x->py, names, p->like);
        kfx_line(p, "self.k.%s(%s%s, %s.numel(), *_fold4(%s, %s))", st->fn, ptrs, x->py, x->py,
                 x->py, names);
    } else if (bcast) {
        kfx_line(p, "%s = _alloc(_broadcast(%s), %s)", x->py, names, p->like);
        kfx_line(p, "self.k.%s(%s%s, %s.numel(), *_dims4(%s), *_strides4(%s, %s))", st->fn, ptrs,
                 x->py, x->py, x->py, x->py, names);
    } else {
        kfx_line(p, "%s = _alloc(%s.shape, %s)", x->py, p->val[c->leaf[full]].py, p->like);
        kfx_line(p, "self.k.%s(%s%s, %s.numel())", st->fn, names, x->py, x->py);
    }
    x->kind = KFX_TENSOR;
    free(c);
    return 0;
}

int kfx_leaf_kind(const struct kfx_plan *p, int l, int v) {
    const struct kfx_val *y = &p->val[l], *x = &p->val[v];
    if (y->noncontig || y->offset)
        return -1;
    if (kfx_same_shape(y, x))
        return 0;
    if (one_value(y) && y->ndim <= x->ndim && !one_value(x))
        return 1;
    return run_broadcast(y, x) ? 2 : -1;
}

int kfx_prologue(struct kfx_plan *p, int v, struct kfx_step *st, char *leaves, size_t n,
                 char *detail, size_t dlen) {
    struct kfx_val *x = &p->val[v];
    if (x->kind != KFX_LAZY && x->noncontig && kfx_materialise(p, v, detail, dlen) != 0)
        return -1; /* a strided view: copied (v is now lazy, its copy's chain) */
    if (x->kind == KFX_LAZY && x->is_int) {
        snprintf(detail, dlen, "a reduction of a comparison's boolean tensor (not yet)");
        return -1;
    }
    if (x->kind == KFX_LAZY) {
        struct chain *c = calloc(1, sizeof(*c));
        bool fuse = c != NULL && walk(p, v, c) == 0;
        /* leaves of x's shape, then 0-d ones, then ones that broadcast along a run of x's
         * dimensions (at least one of the first: the geometry's) */
        int full[KFX_MAX_LEAVES], scal[KFX_MAX_LEAVES], bc[KFX_MAX_LEAVES], nf = 0, ns = 0, nb = 0;
        for (int i = 0; fuse && i < c->n_leaves; i++) {
            const int kind = kfx_leaf_kind(p, c->leaf[i], v); /* scal: element 0 for every index */
            if (kind == 0)
                full[nf++] = c->leaf[i];
            else if (kind == 1)
                scal[ns++] = c->leaf[i];
            else if (kind == 2)
                bc[nb++] = c->leaf[i];
            else
                fuse = false;
        }
        /* each broadcast leaf costs an index division per element (or per four): a group
         * norm's pass before a logsumexp over channels, five such leaves in a columns
         * reduction, took 2.07 ms on the H200 against torch.compile's 1.28 (its conv's output
         * written by the pass and reduced from memory instead, as before such leaves fused) */
        fuse = fuse && nf > 0 && nb <= KFX_MAX_BCAST_LEAVES;
        if (fuse) {
            memset(st->pro_scalar, 0, sizeof(st->pro_scalar));
            memset(st->pro_bcast, 0, sizeof(st->pro_bcast));
            for (int i = 0; i < c->n_leaves; i++) {
                c->leaf[i] = i < nf ? full[i] : i < nf + ns ? scal[i - nf] : bc[i - nf - ns];
                st->pro_scalar[i] = i >= nf && i < nf + ns;
                st->pro_bcast[i] = i >= nf + ns;
            }
            struct kf_buf b = {0};
            chain_body(p, v, c, &b);
            st->body = b.data;
            st->n_leaves = c->n_leaves;
            memcpy(st->pro_val, c->leaf, (size_t)c->n_leaves * sizeof(int));
            /* the leaves' names, each broadcast one's (q, m) after it */
            size_t len = 0;
            leaves[0] = '\0';
            for (int i = 0; i < c->n_leaves && len < n; i++) {
                const char *py = p->val[c->leaf[i]].py;
                len += (size_t)(st->pro_bcast[i] ? snprintf(leaves + len, n - len,
                                                            "%s, *_bqm(%s.shape, %s.shape), ", py,
                                                            py, p->val[c->leaf[0]].py)
                                                 : snprintf(leaves + len, n - len, "%s, ", py));
            }
            if (len >= n) {
                snprintf(detail, dlen, "a reduction's inputs' names too long");
                free(c);
                return -1;
            }
            free(c);
            return st->body ? 0 : -1;
        }
        free(c);
        if (kfx_materialise(p, v, detail, dlen) != 0)
            return -1;
    }
    if (x->kind == KFX_TUPLE || x->is_int) {
        snprintf(detail, dlen, "a reduction over an integer tensor or a tuple (not yet)");
        return -1;
    }
    struct kf_buf b = {0};
    kf_buf_printf(&b, "const float v%d = in0[i];\nout[i] = v%d;\n", v, v);
    st->body = b.data;
    st->n_leaves = 1;
    st->pro_val[0] = v;
    snprintf(leaves, n, "%s, ", x->py);
    return st->body ? 0 : -1;
}

/* nn module types that are elementwise: the operator's short name. */
static const char *module_op(const char *type) {
    static const char *const map[][2] = {
        {"ReLU", "relu"},
        {"GELU", "gelu"},
        {"SiLU", "silu"},
        {"Sigmoid", "sigmoid"},
        {"Tanh", "tanh"},
        {"LeakyReLU", "leaky_relu"},
        {"ELU", "elu"},
        {"Softplus", "softplus"},
        {"Hardswish", "hardswish"},
        {"Hardtanh", "hardtanh"},
        {"Hardsigmoid", "hardsigmoid"},
        {"Identity", "identity"},
        {"ReLU6", "relu6"},
        {"Mish", "mish"},
        {"SELU", "selu"},
        {"CELU", "celu"},
        {"Softsign", "softsign"},
        {"LogSigmoid", "log_sigmoid"},
        {"Softshrink", "softshrink"},
        {"Hardshrink", "hardshrink"},
        {"Tanhshrink", "tanhshrink"},
        {"Threshold", "threshold"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i][0], type) == 0)
            return map[i][1];
    return NULL;
}

/* An argument as C text: a val's variable or a number. 0, or -1. */
static int arg_text(struct kfx_plan *p, const json_t *a, char *out, size_t n) {
    if (kfx_infinity(a, out, n)) /* {"float": "-inf"}: an infinite Python float */
        return 0;
    if (json_is_number(a) || json_is_boolean(a)) {
        char buf[40];
        snprintf(
            out, n, "%s",
            kfw_ew_lit(json_is_number(a) ? json_number_value(a) : (double)json_is_true(a), buf));
        return strstr(out, "nan") || strstr(out, "inf") ? -1 : 0;
    }
    int k = kfx_arg_val(p, a);
    if (k >= 0 && p->val[k].kind == KFX_SIZE && p->val[k].ndim == 0) {
        /* a Python scalar: a 0-d tensor, made again when the value changes (_const) */
        if (p->val[k].as_tensor == 0) {
            char py[16];
            snprintf(py, sizeof(py), "s%d", k);
            const long long scalar[1] = {0};
            int t = kfx_new_val(p, py, scalar, 0);
            if (t < 0)
                return -1;
            kfx_line(p, "%s = _const(self, \"%s\", float(%s), %s)", py, py, p->val[k].py, p->like);
            p->val[k].as_tensor = t + 1;
        }
        k = p->val[k].as_tensor - 1;
    }
    /* a lazy val of an integer dtype is a comparison's boolean (1.0f or 0.0f) */
    if (k < 0 || p->val[k].kind == KFX_TUPLE || p->val[k].kind == KFX_SIZE ||
        (p->val[k].is_int && p->val[k].kind != KFX_LAZY))
        return -1;
    snprintf(out, n, "v%d", k);
    return 0;
}

/* Comparisons (a boolean as 1.0f or 0.0f, which only elementwise code reads), torch.where and
 * masked_fill: val k lazy. 1 handled, 0 none of them, -1 an operand not understood. */
static int select_ops(struct kfx_plan *p, const char *s, const json_t *args, int k,
                      const json_t *node) {
    static const char *const cmp[][2] = {{"gt", ">"},  {"lt", "<"},  {"ge", ">="},
                                         {"le", "<="}, {"eq", "=="}, {"ne", "!="}};
    const char *sym = NULL;
    for (size_t i = 0; i < sizeof(cmp) / sizeof(cmp[0]); i++)
        if (!strcmp(s, cmp[i][0]) || (s[0] == '_' && s[1] == '_' && !strncmp(s + 2, cmp[i][0], 2)))
            sym = cmp[i][1];
    bool where = !strcmp(s, "where"), fill = !strcmp(s, "masked_fill");
    size_t na = json_array_size(args);
    if (!sym && !where && !fill)
        return 0;
    char a[48], b[48], c[48], e[200];
    if (na != (sym ? 2u : 3u) || arg_text(p, json_array_get(args, 0), a, sizeof(a)) != 0 ||
        arg_text(p, json_array_get(args, 1), b, sizeof(b)) != 0 ||
        (!sym && arg_text(p, json_array_get(args, 2), c, sizeof(c)) != 0))
        return -1;
    if (sym)
        snprintf(e, sizeof(e), "(%s %s %s) ? 1.0f : 0.0f", a, sym, b);
    else if (where) /* where(cond, x, y) */
        snprintf(e, sizeof(e), "%s != 0.0f ? %s : %s", a, b, c);
    else /* x.masked_fill(mask, value) */
        snprintf(e, sizeof(e), "%s != 0.0f ? %s : %s", b, c, a);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* Logic on booleans (1.0f or 0.0f), when node's result is a bool tensor: ~m, torch.logical_not
 * and bitwise_not; m & n, m | n, m ^ n and their logical_ and bitwise_ functions (a float
 * operand of a logical_ function is true where it is not 0). Val k lazy. 1 handled, 0 none of
 * them (an integer's bitwise op among them), -1 an operand not understood. */
static int logic_ops(struct kfx_plan *p, const char *s, const json_t *args, int k,
                     const json_t *node) {
    static const char *const un[] = {"invert", "__invert__", "logical_not", "bitwise_not"};
    static const char *const bin[][2] = {
        {"and_", "&&"}, {"__and__", "&&"}, {"logical_and", "&&"}, {"bitwise_and", "&&"},
        {"or_", "||"},  {"__or__", "||"},  {"logical_or", "||"},  {"bitwise_or", "||"},
        {"xor", "!="},  {"__xor__", "!="}, {"logical_xor", "!="}, {"bitwise_xor", "!="},
    };
    const char *dt = json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
    const char *sym = NULL;
    bool unary = false;
    for (size_t i = 0; i < sizeof(un) / sizeof(un[0]); i++)
        unary = unary || !strcmp(s, un[i]);
    for (size_t i = 0; i < sizeof(bin) / sizeof(bin[0]); i++)
        if (!strcmp(s, bin[i][0]))
            sym = bin[i][1];
    if ((!unary && !sym) || dt == NULL || strcmp(dt, "bool") != 0)
        return 0;
    char a[48], b[48], e[200];
    if (json_array_size(args) != (unary ? 1u : 2u) ||
        arg_text(p, json_array_get(args, 0), a, sizeof(a)) != 0 ||
        (!unary && arg_text(p, json_array_get(args, 1), b, sizeof(b)) != 0))
        return -1;
    if (unary)
        snprintf(e, sizeof(e), "(%s != 0.0f) ? 0.0f : 1.0f", a);
    else
        snprintf(e, sizeof(e), "((%s != 0.0f) %s (%s != 0.0f)) ? 1.0f : 0.0f", a, sym, b);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* torch.addcmul(x, a, b, value=v) and addcdiv (x + v * a * b, x + v * a / b), torch.lerp(x, y,
 * w) (x + w * (y - x), w a number or a tensor): val k lazy. 1, 0 none of them, -1 an operand
 * not understood. */
static int ternary(struct kfx_plan *p, const char *s, const json_t *args, const json_t *kw, int k,
                   const json_t *node) {
    const bool lerp = !strcmp(s, "lerp"), cdiv = !strcmp(s, "addcdiv");
    if (!lerp && !cdiv && strcmp(s, "addcmul") != 0)
        return 0;
    size_t na = json_array_size(args);
    const json_t *w = lerp     ? json_array_get(args, 2)
                      : na > 3 ? json_array_get(args, 3)
                               : json_object_get(kw, "value");
    char a[48], b[48], c[48], v[48] = "1.0f", e[300];
    if (na < 3 || na > 4 || json_object_size(kw) > (lerp ? 0u : 1u) ||
        arg_text(p, json_array_get(args, 0), a, sizeof(a)) != 0 ||
        arg_text(p, json_array_get(args, 1), b, sizeof(b)) != 0 ||
        (!lerp && arg_text(p, json_array_get(args, 2), c, sizeof(c)) != 0) ||
        (w && arg_text(p, w, v, sizeof(v)) != 0))
        return -1;
    if (lerp)
        snprintf(e, sizeof(e), "%s + (%s) * ((%s) - (%s))", a, v, b, a);
    else
        snprintf(e, sizeof(e), "%s + (%s) * (%s) %s (%s)", a, v, b, cdiv ? "/" : "*", c);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* Whether node, of short name s, is an in-place op (x.add_(y), torch.relu_(x)): a function or
 * method whose name ends in one underscore. */
static bool is_inplace(const json_t *node, const char *s) {
    const char *op = json_string_value(json_object_get(node, "op"));
    size_t len = s ? strlen(s) : 0;
    return len > 1 && s[len - 1] == '_' && s[0] != '_' && op && strcmp(op, "call_module") != 0;
}

/* An in-place elementwise op (x.add_(y), torch.relu_(x), x.mul_(2)) named s: the op without its
 * underscore into base, and the val it updates (its first operand), or -1 when s is not one or
 * the update could be seen through another name: x an input or a parameter (the update would
 * outlive the call), a view, or a tensor a view was taken of. The caller plans the op as its
 * functional form and then makes the node of x read the result (inplace_alias). */
static int inplace_target(struct kfx_plan *p, const json_t *node, const char *s, char *base,
                          size_t n) {
    size_t len = strlen(s);
    if (!is_inplace(node, s) || len >= n)
        return -1;
    int x = kfx_arg_val(p, json_array_get(json_object_get(node, "args"), 0));
    if (x < 0 || p->val[x].kind == KFX_INPUT || p->val[x].kind == KFX_PARAM ||
        p->val[x].kind == KFX_TUPLE || p->val[x].kind == KFX_SIZE || p->val[x].view_of ||
        p->val[x].noncontig || p->val[x].is_int)
        return -1;
    for (int v = 0; v < p->n_vals; v++)
        if (p->val[v].view_of == x + 1)
            return -1;
    snprintf(base, n, "%.*s", (int)(len - 1), s);
    return x;
}

/* After an in-place op planned as val k: the node of the val x it updated now reads k (a lazy
 * alias found first by name, since kfx_arg_val searches from the end), and so does every name
 * of the same tensor before it (x itself the result of an in-place op: a.mul_(y).relu_()
 * updates a); what read x before keeps reading x's old value, as it did when it ran. 0, or -1
 * when the plan is full. */
static int inplace_alias(struct kfx_plan *p, int x, int k) {
    char e[16];
    snprintf(e, sizeof(e), "v%d", k);
    for (const json_t *node = p->val[x].node; node != NULL;) {
        int a = kfx_new_lazy(p, k, e);
        if (a < 0)
            return -1;
        p->val[a].node = node;
        /* an in-place op's result is its first operand: that node's name too */
        const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
        int src = is_inplace(node, s)
                      ? kfx_arg_val(p, json_array_get(json_object_get(node, "args"), 0))
                      : -1;
        node = src >= 0 ? p->val[src].node : NULL;
    }
    return 0;
}

/* tanh of the lazy val a ("vK") when that val is a softplus: one exponential (expert_ew.c's
 * kfw_tanh_softplus; Mish written out as x * tanh(softplus(x))). 0, or -1. */
static int tanh_softplus(const struct kfx_plan *p, const char *a, char *e, size_t n) {
    char *end = NULL;
    long k = a[0] == 'v' ? strtol(a + 1, &end, 10) : -1;
    if (k < 0 || k >= p->n_vals || *end != '\0' || p->val[k].kind != KFX_LAZY ||
        p->val[k].expr == NULL)
        return -1;
    return kfw_tanh_softplus(p->val[k].expr, e, n);
}

/* torch.clamp(x, min, max) where a bound is a tensor (or None, or a number): val k lazy,
 * min(max(x, min), max) as PyTorch computes it. 1, or -1 for an operand not understood. */
static int clamp_by_tensor(struct kfx_plan *p, const json_t *x, const json_t *kw, int k,
                           const json_t *node) {
    char a[48], lo[48] = "-3.4e38f", hi[48] = "3.4e38f", e[200];
    const json_t *mn = json_object_get(kw, "min"), *mx = json_object_get(kw, "max");
    if (arg_text(p, x, a, sizeof(a)) != 0 || json_object_size(kw) > 2 ||
        (mn && !json_is_null(mn) && arg_text(p, mn, lo, sizeof(lo)) != 0) ||
        (mx && !json_is_null(mx) && arg_text(p, mx, hi, sizeof(hi)) != 0))
        return -1;
    snprintf(e, sizeof(e), "fminf(fmaxf(%s, %s), %s)", a, lo, hi);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* An elementwise node: val k becomes lazy. 1 handled, 0 not elementwise, -1 unsupported. */
static int elementwise(struct kfx_plan *p, const json_t *node, int k) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    const json_t *args = json_object_get(node, "args");
    json_t *kw = json_deep_copy(json_object_get(node, "kwargs"));
    const char *s = kfw_short_name(target);
    if (strcmp(op, "call_module") == 0) {
        s = module_op(json_string_value(json_object_get(node, "module_type")));
        json_decref(kw);
        kw = json_deep_copy(json_object_get(node, "attrs"));
        json_object_del(kw, "training");
        json_object_del(kw, "inplace");
        if (s == NULL) {
            json_decref(kw);
            return 0;
        }
    }
    json_object_del(kw, "inplace");
    char base[40];
    int updated = inplace_target(p, node, s, base, sizeof(base));
    if (updated >= 0)
        s = base;
    size_t na = json_array_size(args);
    int sel = json_object_size(kw) == 0 ? select_ops(p, s, args, k, node) : 0;
    if (sel == 0 && json_object_size(kw) == 0)
        sel = logic_ops(p, s, args, k, node);
    if (sel == 0)
        sel = ternary(p, s, args, kw, k, node);
    if (sel != 0) {
        json_decref(kw);
        return sel == 1 && updated >= 0 && inplace_alias(p, updated, k) != 0 ? -1 : sel;
    }
    /* torch.clamp(x, lo, hi) and x.clamp(lo, hi): positional bounds as keywords */
    if ((strcmp(s, "clamp") == 0 || strcmp(s, "clip") == 0) && na >= 2) {
        json_object_set(kw, "min", json_array_get(args, 1));
        if (na >= 3)
            json_object_set(kw, "max", json_array_get(args, 2));
        na = 1;
        s = "clamp";
    }
    /* torch.clamp_min(x, v) and torch.clamp_max(x, v): clamp's keywords */
    if ((strcmp(s, "clamp_min") == 0 || strcmp(s, "clamp_max") == 0) && na == 2 &&
        (json_is_number(json_array_get(args, 1)) || json_is_object(json_array_get(args, 1)))) {
        json_object_set(kw, strcmp(s, "clamp_min") == 0 ? "min" : "max", json_array_get(args, 1));
        na = 1;
        s = "clamp";
    }
    /* a bound that is a tensor (torch.clamp(x, min=t)): fmaxf and fminf with its value */
    if (strcmp(s, "clamp") == 0 && na == 1 &&
        (json_is_object(json_object_get(kw, "min")) ||
         json_is_object(json_object_get(kw, "max")))) {
        int rc = clamp_by_tensor(p, json_array_get(args, 0), kw, k, node);
        json_decref(kw);
        return rc == 1 && updated >= 0 && inplace_alias(p, updated, k) != 0 ? -1 : rc;
    }
    /* F.threshold(x, threshold, value), traced as torch.nn.functional._threshold */
    if ((strcmp(s, "_threshold") == 0 || strcmp(s, "threshold") == 0) && na >= 3) {
        json_object_set(kw, "threshold", json_array_get(args, 1));
        json_object_set(kw, "value", json_array_get(args, 2));
        na = 1;
        s = "threshold";
    }
    if ((strcmp(s, "leaky_relu") == 0 || strcmp(s, "hardtanh") == 0 || strcmp(s, "elu") == 0 ||
         strcmp(s, "celu") == 0 || strcmp(s, "softshrink") == 0 || strcmp(s, "hardshrink") == 0) &&
        na >= 2 && json_is_number(json_array_get(args, 1))) {
        json_object_set(kw,
                        strcmp(s, "leaky_relu") == 0                      ? "negative_slope"
                        : strcmp(s, "elu") == 0 || strcmp(s, "celu") == 0 ? "alpha"
                        : strcmp(s, "hardtanh") == 0                      ? "min_val"
                                                                          : "lambd",
                        json_array_get(args, 1));
        if (na >= 3 && strcmp(s, "hardtanh") == 0)
            json_object_set(kw, "max_val", json_array_get(args, 2));
        na = 1;
    }
    char a[48] = "", b[48] = "", e[1024];
    int rc = 0;
    if (na >= 1 && na <= 2 && arg_text(p, json_array_get(args, 0), a, sizeof(a)) == 0 &&
        (na < 2 || arg_text(p, json_array_get(args, 1), b, sizeof(b)) == 0)) {
        if (strcmp(s, "identity") == 0 || strcmp(s, "contiguous") == 0 || strcmp(s, "clone") == 0 ||
            strcmp(s, "float") == 0) {
            snprintf(e, sizeof(e), "%s", a);
            rc = 1;
        } else if (strcmp(s, "relu6") == 0) {
            snprintf(e, sizeof(e), "fminf(fmaxf(%s, 0.0f), 6.0f)", a);
            rc = 1;
        } else if (strcmp(s, "mish") == 0) {
            char sp[160], t[512];
            snprintf(sp, sizeof(sp), "%s > 20.0f ? %s : log1pf(expf(%s))", a, a, a);
            kfw_tanh_softplus(sp, t, sizeof(t));
            snprintf(e, sizeof(e), "%s * (%s)", a, t);
            rc = 1;
        } else if (na == 1 && strcmp(s, "tanh") == 0 && tanh_softplus(p, a, e, sizeof(e)) == 0) {
            rc = 1;
        } else if (kfw_ew_expr(s, kw, a, b, (int)na, e, sizeof(e)) == 0) {
            rc = 1;
        }
    }
    json_decref(kw);
    if (rc == 1 && kfx_set_lazy(p, k, node, e) != 0)
        return -1;
    if (rc == 1 && updated >= 0 && inplace_alias(p, updated, k) != 0)
        return -1;
    return rc;
}

/* One tensor that forward() returns, from argument a: its Python name into py (appended to
 * the plan's ret_roots, with the output a view of it views). 0, or -1 with detail. */
static int output_one(struct kfx_plan *p, const json_t *a, char *py, size_t n, char *detail,
                      size_t dlen) {
    int v = kfx_arg_val(p, a);
    if (v < 0) {
        snprintf(detail, dlen, "an output that is not a tensor or a tuple of tensors (not yet)");
        return -1;
    }
    if (p->val[v].held_float) { /* its dtype is an integer's: floats would not be equal */
        snprintf(detail, dlen, "an output of torch.arange's integers (not yet)");
        return -1;
    }
    if (p->val[v].kind == KFX_INPUT || p->val[v].kind == KFX_PARAM) {
        /* returning an input: a copy, through an identity chain */
        int c = p->n_vals;
        if (c >= KFX_MAX_VALS)
            return -1;
        p->n_vals++;
        memset(&p->val[c], 0, sizeof(p->val[c]));
        char e[16];
        snprintf(e, sizeof(e), "v%d", v);
        if (kfx_set_lazy(p, c, p->val[v].node, e) != 0)
            return -1;
        v = c;
    }
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    size_t len = strlen(p->ret_roots);
    /* a view of a step's output: that output leaves the call too */
    snprintf(p->ret_roots + len, sizeof(p->ret_roots) - len, " %s %s", p->val[v].py,
             p->val[v].view_of ? p->val[p->val[v].view_of - 1].py : "");
    snprintf(py, n, "%s", p->val[v].py);
    return 0;
}

/* The output node: one tensor, or a tuple (or list) of tensors, returned as a tuple. */
static int output(struct kfx_plan *p, const json_t *node, char *detail, size_t dlen) {
    const json_t *a = json_array_get(json_object_get(node, "args"), 0);
    char py[128], all[1024] = "";
    if (!json_is_array(a)) {
        if (output_one(p, a, py, sizeof(py), detail, dlen) != 0)
            return -1;
        kfx_line(p, "return %s", py);
        return 0;
    }
    size_t i;
    const json_t *x;
    json_array_foreach(a, i, x) {
        size_t len = strlen(all);
        if (output_one(p, x, py, sizeof(py), detail, dlen) != 0)
            return -1;
        if (len + strlen(py) + 3 >= sizeof(all)) {
            snprintf(detail, dlen, "a tuple of outputs too long (not yet)");
            return -1;
        }
        snprintf(all + len, sizeof(all) - len, "%s, ", py);
    }
    kfx_line(p, "return (%s)", all);
    return 0;
}

/* Whether every use of input node (or of a view of it, depth views deep) is as indices read as
 * int64 by a kernel, never converted: a cross entropy's classes, an embedding's rows,
 * torch.gather's index. */
static bool read_as_indices(const struct kfx_plan *p, const json_t *node, int depth) {
    const json_t *users[16];
    static const char *const views[] = {"view", "reshape", "unsqueeze", "squeeze", "flatten"};
    const char *name = json_string_value(json_object_get(node, "name"));
    int n = users_of(p, node, users, 16);
    for (int i = 0; i < n && i < 16; i++) {
        const char *s = kfw_short_name(json_string_value(json_object_get(users[i], "target")));
        const char *idx =
            json_string_value(json_object_get(kfx_node_arg(users[i], 2, "index"), "node"));
        bool view = false;
        for (size_t v = 0; s && v < sizeof(views) / sizeof(views[0]); v++)
            view = view || !strcmp(s, views[v]);
        if (kfx_is_xent(users[i]) || kfx_is_embedding(users[i]))
            continue;
        if (s && !strcmp(s, "gather") && idx && name && !strcmp(idx, name))
            continue; /* torch.gather's index */
        const char *sub = json_string_value(
            json_object_get(json_array_get(json_object_get(users[i], "args"), 1), "node"));
        if (s && !strcmp(s, "getitem") && sub && name && !strcmp(sub, name))
            continue; /* x[idx]'s index (kfx_plan_index_rows) */
        const char *field = json_string_value(json_array_get(json_object_get(users[i], "args"), 1));
        if (s && (!strcmp(s, "size") || !strcmp(s, "dim") ||
                  (!strcmp(s, "getattr") && field &&
                   (!strcmp(field, "shape") || !strcmp(field, "device")))))
            continue; /* its shape or device, not its values */
        if (!view || depth >= 4 || !read_as_indices(p, users[i], depth + 1))
            return false;
    }
    return n > 0 && n <= 16;
}

/* Whether node, of an integer or boolean dtype, became a float32 tensor (a sum of a mask: its
 * kernel sums the mask's float copy, and the result would have the wrong dtype). */
static bool integer_made_float(const struct kfx_plan *p, const json_t *node, int k) {
    const char *dt = json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
    return dt && strcmp(dt, "float32") != 0 && p->val[k].kind == KFX_TENSOR && !p->val[k].is_int &&
           !p->val[k].held_float;
}

/* A forward() that assigns to its module a value computed from its inputs (KernelBench's
 * VanillaRNN: self.hidden = tanh(..)) keeps state that the next call reads: a plan of one
 * call would be judged against the reference's later calls and fail. Named before anything
 * is planned (inspect lists the assignments; moving a tensor to the input's device is none). */
static int keeps_state(const struct kfx_plan *p, char *detail, size_t dlen) {
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(json_object_get(p->graph, "graph"), "assigns"), i, a) {
        if (json_is_true(json_object_get(a, "from_inputs"))) {
            snprintf(detail, dlen,
                     "a forward() that keeps module attribute %s between calls (state computed "
                     "from the inputs, read by the next call: not yet)",
                     json_string_value(json_object_get(a, "name")));
            return -1;
        }
    }
    return 0;
}

static int walk_nodes(struct kfx_plan *p, char *detail, size_t dlen) {
    const json_t *nodes = json_object_get(json_object_get(p->graph, "graph"), "nodes");
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node) {
        const char *op = json_string_value(json_object_get(node, "op"));
        const char *target = json_string_value(json_object_get(node, "target"));
        if (!op || !target || p->n_vals >= KFX_MAX_VALS) {
            snprintf(detail, dlen, "a graph of more than %d nodes", KFX_MAX_VALS);
            return -1;
        }
        p->at_node = (int)i; /* the nodes from here on are still to be planned */
        if (strcmp(op, "output") == 0)
            return output(p, node, detail, dlen);
        int k = p->n_vals++;
        memset(&p->val[k], 0, sizeof(p->val[k]));
        p->val[k].node = node;
        if (strcmp(op, "placeholder") == 0) {
            char py[16];
            snprintf(py, sizeof(py), "x%d", p->n_inputs++);
            const json_t *given =
                json_array_get(json_object_get(p->graph, "inputs"), (size_t)(p->n_inputs - 1));
            if (json_is_number(given) && !json_object_get(node, "output")) {
                /* a Python number among the inputs (KernelBench's matrix times scalar): read as
                 * a size is, into a 0-d tensor where elementwise code reads it (arg_text) */
                kfx_set_val(p, k, node, KFX_SIZE, py);
                p->val[k].is_int = 1;
                continue;
            }
            kfx_set_val(p, k, node, KFX_INPUT, py);
            if (p->like[0] == '\0')
                snprintf(p->like, sizeof(p->like), "%s", py);
            /* a mask or integer input: read once into float32 (its PyTorch promotion) */
            const char *dt =
                json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
            if (p->val[k].is_int && !read_as_indices(p, node, 0) &&
                kfx_plan_cast(p, k, dt, detail, dlen) != 0)
                return -1;
            continue;
        }
        if (strcmp(op, "get_attr") == 0) {
            if (kfx_plan_attribute(p, node, k, detail, dlen) != 0)
                return -1;
            continue;
        }
        int rc = kfx_plan_scalar(p, node, k);
        if (rc == 0)
            rc = kfx_plan_to_float32(p, node, k, detail, dlen);
        if (rc == 0)
            rc = kfx_plan_const(p, node, k, detail, dlen);
        if (rc == 0)
            rc = elementwise(p, node, k);
        if (rc == 0)
            rc = kfx_plan_anchor(p, node, k, detail, dlen);
        if (rc == 1 && integer_made_float(p, node, k)) {
            snprintf(detail, dlen, "%s of an integer result (not yet)", target);
            return -1;
        }
        if (rc == 1)
            continue;
        if (rc == 0 || detail[0] == '\0') {
            const char *mt = json_string_value(json_object_get(node, "module_type"));
            snprintf(detail, dlen, "operator %s%s%s (%s) with %zu arguments", target,
                     mt ? " of type " : "", mt ? mt : "", op,
                     json_array_size(json_object_get(node, "args")));
        }
        return -1;
    }
    snprintf(detail, dlen, "a graph without an output");
    return -1;
}

int kfx_plan_build(struct kfx_plan *p, const json_t *g, const char *backend, char *detail,
                   size_t dlen) {
    memset(p, 0, sizeof(*p));
    detail[0] = '\0';
    snprintf(p->backend, sizeof(p->backend), "%s", backend);
    p->graph = json_deep_copy(g);
    p->fwd = calloc(1, sizeof(*p->fwd));
    const json_t *nodes = json_object_get(json_object_get(p->graph, "graph"), "nodes");
    if (p->fwd == NULL || !json_is_array(nodes)) {
        snprintf(detail, dlen, "no operator graph (the module could not be traced)");
        return -1;
    }
    const char *src =
        json_string_value(json_object_get(json_object_get(p->graph, "graph"), "source"));
    if (src != NULL && strcmp(src, "fx") != 0) { /* ATen operators only: no graph to plan from */
        const char *why = json_string_value(json_object_get(p->graph, "fx_error"));
        snprintf(detail, dlen, "the module could not be traced by torch.fx (%.300s)",
                 why ? why : "no reason given");
        return -1;
    }
    if (keeps_state(p, detail, dlen) != 0 || walk_nodes(p, detail, dlen) != 0)
        return -1;
    if (p->like[0] == '\0') {
        snprintf(detail, dlen, "a module without tensor inputs");
        return -1;
    }
    for (int s = 0; s < p->n_steps; s++) {
        char *src;
        while ((src = kfx_step_src(p, s, p->step[s].n_variants)) != NULL) {
            free(src);
            p->step[s].n_variants++;
        }
        if (p->step[s].n_variants == 0) {
            snprintf(detail, dlen, "no kernel for step %d", s);
            return -1;
        }
    }
    return 0;
}

void kfx_plan_free(struct kfx_plan *p) {
    for (int k = 0; k < p->n_vals; k++)
        free(p->val[k].expr);
    for (int s = 0; s < p->n_steps; s++) {
        free(p->step[s].body);
        free(p->step[s].ew_body);
        for (int j = 0; j < p->step[s].n_sub; j++)
            free(p->step[s].sub[j].body);
    }
    if (p->fwd) {
        kf_buf_free(p->fwd);
        free(p->fwd);
    }
    json_decref(p->graph);
    memset(p, 0, sizeof(*p));
}
