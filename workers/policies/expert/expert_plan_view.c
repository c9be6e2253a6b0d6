/* expert_plan_view.c: the planner's nodes that compute nothing: views of a contiguous tensor
 * (view, reshape, flatten, squeeze, unsqueeze), strided views (transpose, permute, t, T, mT: an
 * elementwise pass reads them through their strides, any other kernel gets a copy), the sizes their
 * shapes are made of (x.size(d), x.shape[d]) and dropout that drops nothing (p = 0, or not
 * training). A view is a Python local over its materialised source (ModelNew may take views): its
 * val keeps the source's kind, so an output that is a view of an input is copied as an input is,
 * and remembers its root, which is then not made a scratch buffer when forward() returns the view
 * (ret_roots, see expert_model.c); a size is a Python int expression (KFX_SIZE), which no kernel
 * reads. Dropout that drops (p > 0 in training) is random and is refused by name. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

static const json_t *operand(const json_t *node, size_t i, const char *name) {
    const json_t *args = json_object_get(node, "args");
    if (i < json_array_size(args))
        return json_array_get(args, i);
    return json_object_get(json_object_get(node, "kwargs"), name);
}

static bool is_one(const char *s, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(s, *names))
            return true;
    return false;
}

/* Dropout of any kind: 1 an identity, -1 refused (it drops at random), 0 not dropout. */
static int dropout(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
                   char *detail, size_t dlen) {
    static const char *const mods[] = {"Dropout",   "Dropout1d",    "Dropout2d",
                                       "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
                                       NULL};
    static const char *const fns[] = {"dropout",   "dropout1d",     "dropout2d",
                                      "dropout3d", "alpha_dropout", "feature_alpha_dropout",
                                      NULL};
    if (!is_one(s, module ? mods : fns))
        return 0;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *pj = module ? json_object_get(attrs, "p") : operand(node, 1, "p");
    const json_t *tj = module ? json_object_get(attrs, "training") : operand(node, 2, "training");
    double prob = json_is_number(pj) ? json_number_value(pj) : 0.5;
    bool training = tj == NULL || json_is_null(tj) || json_is_true(tj);
    int in = kfx_arg_val(p, operand(node, 0, "input"));
    if (in < 0 || p->val[in].kind == KFX_SIZE || p->val[in].kind == KFX_TUPLE) {
        snprintf(detail, dlen, "%s of something that is not a tensor", s);
        return -1;
    }
    if (training && prob > 0.0) {
        snprintf(detail, dlen, "%s with p=%g in training mode (random: no kernel can match it)", s,
                 prob);
        return -1;
    }
    char e[16];
    snprintf(e, sizeof(e), "v%d", in);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* x.to(device), x.to(x.device), x.cuda(), x.cpu() of a float tensor: the same value (ModelNew's
 * tensors are on the input's device already: KernelBench's recurrent tasks move their initial
 * states so). 1 an identity, 0 not such a call (a dtype among its arguments included). */
static int moved(struct kfx_plan *p, const json_t *node, int k, const char *s) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
    size_t na = json_array_size(args), nk = json_object_size(kw);
    if (!op || strcmp(op, "call_method") != 0)
        return 0;
    const json_t *dev = na == 2 ? json_array_get(args, 1) : json_object_get(kw, "device");
    int d = kfx_arg_val(p, dev);
    bool device = (d >= 0 && p->val[d].kind == KFX_DEVICE) ||
                  (json_is_string(dev) && (!strncmp(json_string_value(dev), "cuda", 4) ||
                                           !strcmp(json_string_value(dev), "cpu")));
    bool to = !strcmp(s, "to") && na + nk == 2 && device;
    bool bare = (!strcmp(s, "cuda") || !strcmp(s, "cpu")) && na == 1 && nk == 0;
    int v = kfx_arg_val(p, json_array_get(args, 0));
    const char *dt = json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
    if ((!to && !bare) || v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE ||
        p->val[v].kind == KFX_DEVICE || p->val[v].is_int || !dt || strcmp(dt, "float32") != 0)
        return 0;
    char e[16];
    snprintf(e, sizeof(e), "v%d", v);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* The Python expression of val *vp for a view or a size: materialised first when lazy; *vp
 * becomes the val the expression is of. */
static const char *source(struct kfx_plan *p, int *vp, char *detail, size_t dlen) {
    int v = *vp;
    /* an identity (dropout, contiguous, clone) of a materialised val: that val */
    for (int j; (j = kfx_identity_of(p, v)) >= 0 && !p->val[j].noncontig;)
        v = j; /* not past x.transpose(..).contiguous(): the copy is wanted */
    /* an input or a buffer of indices: its views */
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE ||
        (p->val[v].is_int && p->val[v].kind != KFX_INPUT && p->val[v].kind != KFX_PARAM))
        return NULL;
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return NULL;
    *vp = v;
    return p->val[v].py;
}

/* x.size(d), x.size(), getattr(x, "shape") and getitem of the last two: KFX_SIZE vals. */
static int size(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                size_t dlen) {
    const json_t *a0 = operand(node, 0, "input"), *a1 = operand(node, 1, "dim");
    int v = kfx_arg_val(p, a0);
    char py[128];
    int seq = 0; /* a whole shape (a sequence), else one size */
    if (!strcmp(s, "getitem")) {
        if (v < 0 || p->val[v].kind != KFX_SIZE || p->val[v].ndim != 1 || !json_is_integer(a1))
            return 0;
        snprintf(py, sizeof(py), "%s[%lld]", p->val[v].py, (long long)json_integer_value(a1));
    } else if (!strcmp(s, "getattr")) {
        const char *field = json_string_value(a1);
        if (field == NULL || strcmp(field, "shape") != 0)
            return 0;
        const char *src = source(p, &v, detail, dlen);
        if (src == NULL)
            return -1;
        snprintf(py, sizeof(py), "%s.shape", src);
        seq = 1;
    } else if (!strcmp(s, "size")) {
        const char *src = source(p, &v, detail, dlen);
        if (src == NULL || (a1 && !json_is_null(a1) && !json_is_integer(a1)))
            return -1;
        if (json_is_integer(a1))
            snprintf(py, sizeof(py), "%s.shape[%lld]", src, (long long)json_integer_value(a1));
        else
            snprintf(py, sizeof(py), "%s.shape", src);
        seq = !json_is_integer(a1);
    } else {
        return 0;
    }
    kfx_set_val(p, k, node, KFX_SIZE, py);
    p->val[k].is_int = 1;
    p->val[k].ndim = seq; /* a whole shape: 1, one size: 0 */
    return 1;
}

/* One dimension of a view's shape as Python text: an int, or a size val. 0, or -1. */
static int dim_text(const struct kfx_plan *p, const json_t *a, char *out, size_t n) {
    if (json_is_integer(a)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(a));
        return 0;
    }
    int v = kfx_arg_val(p, a);
    if (v < 0 || p->val[v].kind != KFX_SIZE || p->val[v].ndim != 0)
        return -1;
    snprintf(out, n, "%s", p->val[v].py);
    return 0;
}

/* The shape arguments of view/reshape (args[1..], or one list in args[1] or kwargs "shape")
 * as Python text "a, b, c". 0, or -1. */
static int shape_text(const struct kfx_plan *p, const json_t *node, char *out, size_t n) {
    const json_t *args = json_object_get(node, "args");
    const json_t *list = json_array_size(args) == 2 && json_is_array(json_array_get(args, 1))
                             ? json_array_get(args, 1)
                             : json_object_get(json_object_get(node, "kwargs"), "shape");
    size_t from = list ? 0 : 1, count = list ? json_array_size(list) : json_array_size(args);
    const json_t *src = list ? list : args;
    out[0] = '\0';
    if (list && count == 0) { /* x.reshape(()): a 0-d tensor */
        snprintf(out, n, "()");
        return 0;
    }
    if (count <= from)
        return -1;
    for (size_t i = from; i < count; i++) {
        char d[128];
        size_t len = strlen(out);
        if (dim_text(p, json_array_get(src, i), d, sizeof(d)) != 0 ||
            (size_t)snprintf(out + len, n - len, "%s%s", i > from ? ", " : "", d) >= n - len)
            return -1;
    }
    return 0;
}

/* view, reshape, flatten, squeeze, unsqueeze of a tensor: 1, -1, or 0 when node is none. */
static int view(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                size_t dlen) {
    static const char *const views[] = {"view", "reshape", "flatten", "squeeze", "unsqueeze", NULL};
    if (!is_one(s, views))
        return 0;
    int v = kfx_arg_val(p, operand(node, 0, "input"));
    const char *src = source(p, &v, detail, dlen);
    if (src == NULL) {
        if (!detail[0])
            snprintf(detail, dlen, "%s of something that is not a float tensor (not yet)", s);
        return -1;
    }
    const int nd = p->val[v].ndim;
    char args[200] = "", py[256];
    if (!strcmp(s, "view") || !strcmp(s, "reshape")) {
        if (shape_text(p, node, args, sizeof(args)) != 0) {
            snprintf(detail, dlen, "%s to a shape of other than ints and sizes (not yet)", s);
            return -1;
        }
        snprintf(py, sizeof(py), "%s.view(%s)", src, args);
    } else if (!strcmp(s, "flatten")) {
        /* nn.Flatten: its attributes (start_dim 1 by default), torch.flatten's arguments */
        const json_t *attrs = json_object_get(node, "attrs");
        const json_t *a =
            attrs ? json_object_get(attrs, "start_dim") : operand(node, 1, "start_dim");
        const json_t *b = attrs ? json_object_get(attrs, "end_dim") : operand(node, 2, "end_dim");
        long long st = json_is_integer(a) ? json_integer_value(a) : attrs ? 1 : 0;
        long long en = json_is_integer(b) ? json_integer_value(b) : -1;
        st = st < 0 ? st + nd : st;
        en = en < 0 ? en + nd : en;
        if (nd == 0 && st == 0 && en == -1) /* a 0-d tensor flattened: one element, 1-D */
            snprintf(py, sizeof(py), "%s.view(1)", src);
        else if (nd == 0 || st < 0 || en >= nd || st > en) {
            snprintf(detail, dlen, "flatten of a %d-D tensor from %lld to %lld", nd, st, en);
            return -1;
        } else
            snprintf(py, sizeof(py), "%s.flatten(%lld, %lld)", src, st, en);
    } else {
        const json_t *d = operand(node, 1, "dim");
        if (!json_is_integer(d)) {
            snprintf(detail, dlen, "%s without one integer dim (not yet)", s);
            return -1;
        }
        snprintf(py, sizeof(py), "%s.%s(%lld)", src, s, (long long)json_integer_value(d));
    }
    /* a local of its own (a view's expression holds commas, which lists of names split on);
     * an input's or a parameter's view stays of that kind (an output of it is copied) */
    char name[16];
    snprintf(name, sizeof(name), "w%d", k);
    kfx_line(p, "%s = %s", name, py);
    kfx_set_val(p, k, node, p->val[v].kind, name);
    p->val[k].is_int = p->val[v].is_int; /* as its source holds it (an int64 arange: floats) */
    p->val[k].held_float = p->val[v].held_float;
    p->val[k].view_of = p->val[v].view_of ? p->val[v].view_of : v + 1;
    return 1;
}

/* Val k a strided view of val v, read through its strides; offset: it may start past its
 * root's first element. */
static void mark_strided(struct kfx_plan *p, int k, int v, bool offset) {
    p->val[k].view_of = p->val[v].view_of ? p->val[v].view_of : v + 1;
    p->val[k].noncontig = true;
    p->val[k].offset = offset;
}

/* Val k (node's) the strided view py of val v, a local wK of its own (mark_strided). */
static void strided_view(struct kfx_plan *p, const json_t *node, int k, int v, const char *py,
                         bool offset) {
    char name[16];
    snprintf(name, sizeof(name), "w%d", k);
    kfx_line(p, "%s = %s", name, py);
    kfx_set_val(p, k, node, p->val[v].kind, name);
    p->val[k].is_int = p->val[v].is_int; /* as its source holds it (an int64 arange: floats) */
    p->val[k].held_float = p->val[v].held_float;
    mark_strided(p, k, v, offset);
}

int kfx_view_as(struct kfx_plan *p, const json_t *node, int k, int v, const char *py) {
    strided_view(p, node, k, v, py, true);
    return 1;
}

/* Whether the transposing node (s, or the attribute field) over val v swaps v's last two dims
 * and nothing else: x.transpose(-2, -1) (either order, any spelling of the dims), x.mT, x.t()
 * and x.T of a matrix, x.permute(0, .., n - 1, n - 2). */
static bool swaps_last2(const struct kfx_plan *p, const json_t *node, int v, const char *s,
                        const char *field) {
    int nd = p->val[v].ndim;
    if (nd < 2)
        return false;
    if (field != NULL)
        return !strcmp(field, "mT") || (!strcmp(field, "T") && nd == 2);
    if (!strcmp(s, "t"))
        return nd == 2;
    const json_t *args = json_object_get(node, "args");
    const json_t *list = json_is_array(json_array_get(args, 1)) ? json_array_get(args, 1) : args;
    size_t from = list == args ? 1 : 0, count = json_array_size(list);
    if (!strcmp(s, "transpose")) {
        if (count != from + 2)
            return false;
        long long a = json_integer_value(json_array_get(list, from));
        long long b = json_integer_value(json_array_get(list, from + 1));
        a = a < 0 ? a + nd : a, b = b < 0 ? b + nd : b;
        return (a == nd - 2 && b == nd - 1) || (a == nd - 1 && b == nd - 2);
    }
    if (count != from + (size_t)nd)
        return false;
    for (int i = 0; i < nd; i++) {
        long long d = json_integer_value(json_array_get(list, from + (size_t)i));
        d = d < 0 ? d + nd : d;
        if (d != (i < nd - 2 ? i : i == nd - 2 ? nd - 1 : nd - 2))
            return false;
    }
    return true;
}

/* x.transpose(a, b), torch.transpose, x.permute(..), torch.permute, x.t(), x.T, x.mT, and the
 * broadcasting views x.expand(..), x.expand_as(y), torch.broadcast_to: a strided view
 * (noncontig), which elementwise passes read through its strides and other kernels copy. */
static int transpose(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                     size_t dlen) {
    const json_t *args = json_object_get(node, "args");
    const char *field = !strcmp(s, "getattr") ? json_string_value(json_array_get(args, 1)) : NULL;
    bool attr = field && (!strcmp(field, "T") || !strcmp(field, "mT"));
    bool expand = !strcmp(s, "expand") || !strcmp(s, "expand_as") || !strcmp(s, "broadcast_to");
    /* x.unfold(dim, size, step): windows along dim as a new last dim (F.unfold is im2col) */
    const char *op = json_string_value(json_object_get(node, "op"));
    bool unfold = !strcmp(s, "unfold") && op && !strcmp(op, "call_method");
    if (!attr && !expand && !unfold && strcmp(s, "transpose") != 0 && strcmp(s, "permute") != 0 &&
        strcmp(s, "t") != 0)
        return 0;
    int v = kfx_arg_val(p, operand(node, 0, "input"));
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE || p->val[v].is_int ||
        kfx_materialise(p, v, detail, dlen) != 0) {
        if (!detail[0])
            snprintf(detail, dlen, "%s of something that is not a float tensor (not yet)", s);
        return -1;
    }
    char py[256];
    const char *src = p->val[v].py;
    if (attr) {
        snprintf(py, sizeof(py), "%s.%s", src, field);
    } else if (!strcmp(s, "expand_as")) { /* x.expand_as(other): other's shape */
        int o = kfx_arg_val(p, operand(node, 1, "other"));
        const char *osrc = source(p, &o, detail, dlen);
        if (osrc == NULL) {
            if (!detail[0])
                snprintf(detail, dlen, "expand_as of something that is not a float tensor");
            return -1;
        }
        snprintf(py, sizeof(py), "%s.expand(%s.shape)", p->val[v].py, osrc);
    } else if (expand) { /* x.expand(*sizes), torch.broadcast_to(x, shape) */
        char shape[200];
        const json_t *sz = json_array_get(args, 1);
        int sv = kfx_arg_val(p, sz);
        if (json_array_size(args) == 2 && sv >= 0 && p->val[sv].kind == KFX_SIZE &&
            p->val[sv].ndim == 1)
            snprintf(shape, sizeof(shape), "%s", p->val[sv].py); /* x.expand(y.shape) */
        else if (shape_text(p, node, shape, sizeof(shape)) != 0) {
            snprintf(detail, dlen, "%s to a shape of other than ints and sizes (not yet)", s);
            return -1;
        }
        snprintf(py, sizeof(py), "%s.expand(%s)", src, shape);
    } else if (unfold) {
        static const char *const names[] = {"dimension", "size", "step"};
        long long a[3];
        for (size_t i = 0; i < 3; i++)
            if (!kfx_int(p, operand(node, i + 1, names[i]), &a[i])) {
                snprintf(detail, dlen, "unfold with a %s other than an int (not yet)", names[i]);
                return -1;
            }
        snprintf(py, sizeof(py), "%s.unfold(%lld, %lld, %lld)", src, a[0], a[1], a[2]);
    } else if (!strcmp(s, "t")) {
        snprintf(py, sizeof(py), "%s.t()", src);
    } else {
        /* the dims: args[1..], or one list in args[1] or kwargs "dims"/"dim0", "dim1" */
        const json_t *list = json_is_array(json_array_get(args, 1)) ? json_array_get(args, 1)
                             : json_array_size(args) > 1            ? args
                                                                    : NULL;
        size_t from = list == args ? 1 : 0, count = list ? json_array_size(list) : 0;
        char dims[96] = "";
        for (size_t i = from; i < count; i++) {
            const json_t *d = json_array_get(list, i);
            size_t len = strlen(dims);
            if (!json_is_integer(d) || len + 24 >= sizeof(dims)) {
                snprintf(detail, dlen, "%s with dims other than ints (not yet)", s);
                return -1;
            }
            snprintf(dims + len, sizeof(dims) - len, "%s%lld", i > from ? ", " : "",
                     (long long)json_integer_value(d));
        }
        if (count <= from) {
            snprintf(detail, dlen, "%s without its dims (not yet)", s);
            return -1;
        }
        snprintf(py, sizeof(py), "%s.%s(%s)", src, s, dims);
    }
    /* a transposed slice starts where the slice does */
    strided_view(p, node, k, v, py, p->val[v].offset);
    if (!expand && !p->val[v].noncontig && swaps_last2(p, node, v, s, field)) /* from v's start */
        p->val[k].last2_of = v + 1;
    return 1;
}

/* A scalar operand as Python text: a number, or a size val of one int. 0, or -1. */
static int scalar_text(const struct kfx_plan *p, const json_t *a, char *out, size_t n, int *sizes) {
    if (json_is_integer(a) || json_is_real(a)) {
        snprintf(out, n, "%.17g", json_number_value(a));
        return 0;
    }
    int v = kfx_arg_val(p, a);
    if (v < 0 || p->val[v].kind != KFX_SIZE || p->val[v].ndim != 0)
        return -1;
    snprintf(out, n, "%s", p->val[v].py);
    ++*sizes;
    return 0;
}

int kfx_plan_scalar(struct kfx_plan *p, const json_t *node, int k) {
    static const char *const ops[][2] = {{"add", "+"},     {"sub", "-"},       {"mul", "*"},
                                         {"truediv", "/"}, {"floordiv", "//"}, {"pow", "**"},
                                         {"mod", "%"}};
    const char *target = json_string_value(json_object_get(node, "target"));
    const char *op = json_string_value(json_object_get(node, "op"));
    const json_t *args = json_object_get(node, "args");
    if (!target || !op || strcmp(op, "call_function") != 0 || json_array_size(args) == 0 ||
        json_array_size(args) > 2)
        return 0;
    const bool math = !strncmp(target, "math.", 5), oper = !strncmp(target, "_operator.", 10);
    const char *sym = NULL;
    for (size_t i = 0; oper && i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(target + 10, ops[i][0]))
            sym = ops[i][1];
    if (!math && !sym)
        return 0;
    char a[128] = "", b[128] = "", py[280];
    int sizes = 0;
    if (scalar_text(p, json_array_get(args, 0), a, sizeof(a), &sizes) != 0 ||
        (json_array_size(args) == 2 &&
         scalar_text(p, json_array_get(args, 1), b, sizeof(b), &sizes) != 0) ||
        sizes == 0)
        return 0;
    if (math)
        snprintf(py, sizeof(py), "%s(%s%s%s)", target, a, b[0] ? ", " : "", b);
    else if (json_array_size(args) == 2)
        snprintf(py, sizeof(py), "(%s %s %s)", a, sym, b);
    else
        return 0;
    if (strlen(py) >= sizeof(p->val[k].py))
        return 0;
    kfx_set_val(p, k, node, KFX_SIZE, py);
    p->val[k].is_int = 1;
    p->val[k].ndim = 0;
    return 1;
}

/* One index of a getitem as Python text: an int, None, an Ellipsis, or a slice as FX writes it
 * ("slice(1, None, None)"). 0, or -1. */
static int index_text(const json_t *a, char *out, size_t n) {
    const char *str = json_string_value(a);
    if (json_is_integer(a)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(a));
        return 0;
    }
    if (json_is_null(a)) {
        snprintf(out, n, "None");
        return 0;
    }
    if (str && (!strcmp(str, "Ellipsis") || !strcmp(str, "..."))) {
        snprintf(out, n, "...");
        return 0;
    }
    long long v[3] = {0, 0, 1};
    bool has[3] = {false, false, false};
    if (str == NULL || strncmp(str, "slice(", 6) != 0)
        return -1;
    const char *q = str + 6;
    for (int i = 0; i < 3; i++) {
        while (*q == ' ')
            q++;
        if (!strncmp(q, "None", 4)) {
            q += 4;
        } else {
            char *end;
            v[i] = strtoll(q, &end, 10);
            if (end == q)
                return -1;
            has[i] = true;
            q = end;
        }
        if (*q != (i < 2 ? ',' : ')'))
            return -1;
        q++;
    }
    if (has[2] && v[2] < 1)
        return -1; /* PyTorch refuses a step below 1 itself */
    size_t len = 0;
    out[0] = '\0';
    if (has[0])
        len += (size_t)snprintf(out, n, "%lld", v[0]);
    len += (size_t)snprintf(out + len, n - len, ":");
    if (has[1])
        len += (size_t)snprintf(out + len, n - len, "%lld", v[1]);
    if (has[2] && v[2] != 1) /* x[::2]: a view of strides times the step, as any slice */
        snprintf(out + len, n - len, ":%lld", v[2]);
    return 0;
}

/* Whether index item text one (index_text's) keeps a contiguous pick contiguous, given what the
 * items before it were (*state: 0 ints so far, 1 after a slice of step 1, 2 after a full slice;
 * -1 once it is not). Ints, then a slice of step 1, then full slices: x[1], x[2, 3:7], x[0, :]. */
static void pick_state(const char *one, int *state) {
    const bool full = !strcmp(one, ":"), integer = strspn(one, "-0123456789") == strlen(one);
    const char *colon = strchr(one, ':');
    const bool step1 = colon && strchr(colon + 1, ':') == NULL;
    if (*state < 0)
        return;
    if (integer && *one)
        *state = *state == 0 ? 0 : -1;
    else if (full)
        *state = 2;
    else if (step1)
        *state = *state == 0 ? 1 : -1;
    else
        *state = -1;
}

/* x[...] of a tensor with ints, slices (of any positive step), None and Ellipsis, x.select(d, i)
 * and x.narrow(d, start, length): a strided view that may start past its root's first element. */
static int slice(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen) {
    if (strcmp(s, "getitem") != 0 && strcmp(s, "select") != 0 && strcmp(s, "narrow") != 0 &&
        strcmp(s, "diagonal") != 0)
        return 0;
    const json_t *args = json_object_get(node, "args");
    int v = kfx_arg_val(p, json_array_get(args, 0));
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE || p->val[v].is_int)
        return 0; /* a tuple's or a shape's getitem is another planner's */
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    char idx[200] = "", py[320];
    int pick = strcmp(s, "getitem") == 0 ? 0 : -1; /* pick_state's */
    if (!strcmp(s, "diagonal")) {                  /* torch.diagonal(x, offset=0, dim1=0, dim2=1) */
        const json_t *o = operand(node, 1, "offset"), *a = operand(node, 2, "dim1"),
                     *b = operand(node, 3, "dim2");
        if ((o && !json_is_integer(o)) || (a && !json_is_integer(a)) ||
            (b && !json_is_integer(b)) ||
            json_array_size(json_object_get(json_object_get(node, "output"), "stride")) == 0) {
            snprintf(detail, dlen, "diagonal with other than int arguments (not yet)");
            return -1;
        }
        snprintf(py, sizeof(py), "_diagonal(%s, %lld, %lld, %lld)", p->val[v].py,
                 o ? (long long)json_integer_value(o) : 0LL,
                 a ? (long long)json_integer_value(a) : 0LL,
                 b ? (long long)json_integer_value(b) : 1LL);
    } else if (strcmp(s, "getitem") != 0) {
        size_t na = json_array_size(args);
        for (size_t i = 1; i < na; i++) {
            const json_t *a = json_array_get(args, i);
            size_t len = strlen(idx);
            if (!json_is_integer(a)) {
                snprintf(detail, dlen, "%s with an argument that is not an int (not yet)", s);
                return -1;
            }
            snprintf(idx + len, sizeof(idx) - len, "%s%lld", i > 1 ? ", " : "",
                     (long long)json_integer_value(a));
        }
        snprintf(py, sizeof(py), "%s.%s(%s)", p->val[v].py, s, idx);
    } else {
        const json_t *ix = json_array_get(args, 1);
        if (json_is_object(ix)) { /* x[idx] by an integer tensor: rows gathered */
            int rc = kfx_plan_index_rows(p, node, k, detail, dlen);
            if (rc != 0)
                return rc;
        }
        size_t n = json_is_array(ix) ? json_array_size(ix) : 1;
        for (size_t i = 0; i < n; i++) {
            char one[64];
            size_t len = strlen(idx);
            if (index_text(json_is_array(ix) ? json_array_get(ix, i) : ix, one, sizeof(one)) != 0 ||
                len + strlen(one) + 3 >= sizeof(idx)) {
                snprintf(detail, dlen, "indexing by a tensor or a list (not yet)");
                return -1;
            }
            snprintf(idx + len, sizeof(idx) - len, "%s%s", i ? ", " : "", one);
            pick_state(one, &pick);
        }
        snprintf(py, sizeof(py), "%s[%s%s]", p->val[v].py, idx, n == 1 ? "," : "");
    }
    strided_view(p, node, k, v, py, true);
    /* a contiguous pick of a tensor held contiguous (q, k and v from one packed tensor): kernels
     * read it from its first element, with no copy */
    if (pick >= 0 && p->val[v].kind == KFX_TENSOR && !p->val[v].noncontig)
        p->val[k].noncontig = false;
    return 1;
}

/* The val of a (Python int) size that a is, or -1: a split by x.size(2) // 3 reads it as such
 * in model_new.py. */
static int size_of(const struct kfx_plan *p, const json_t *a) {
    int v = kfx_arg_val(p, a);
    return v >= 0 && p->val[v].kind == KFX_SIZE && p->val[v].ndim == 0 && p->val[v].is_int ? v : -1;
}

/* A chunk's or a split's operands: the input's val (returned), the count or sizes (*n) and the
 * dim (*dim, NULL when not given). */
static int cut_operands(const struct kfx_plan *p, const json_t *node, const char *s,
                        const json_t **n, const json_t **dim) {
    *n = operand(node, 1, !strcmp(s, "chunk") ? "chunks" : "split_size_or_sections");
    if (*n == NULL)
        *n = operand(node, 1, "split_size");
    *dim = operand(node, 2, "dim");
    return kfx_arg_val(p, operand(node, 0, "input"));
}

/* x.chunk(c, d), torch.chunk, x.split(s, d) and torch.split (s an int or a list of ints): a
 * tuple that getitem picks pieces of (kfx_plan_piece). 1, -1, or 0 when node is none. */
static int pieces(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen) {
    if (strcmp(s, "chunk") != 0 && strcmp(s, "split") != 0)
        return 0;
    const json_t *n, *dim;
    int v = cut_operands(p, node, s, &n, &dim);
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE || p->val[v].is_int ||
        !(json_is_integer(n) || size_of(p, n) >= 0 || (json_is_array(n) && !strcmp(s, "split"))) ||
        (dim && !json_is_integer(dim)) || (json_is_integer(n) && json_integer_value(n) < 1)) {
        snprintf(detail, dlen, "%s of other than a float tensor by ints along one dim (not yet)",
                 s);
        return -1;
    }
    kfx_set_val(p, k, node, KFX_TUPLE, "");
    return 1;
}

int kfx_plan_piece(struct kfx_plan *p, const json_t *node, int k, int t, long long i, char *detail,
                   size_t dlen) {
    const json_t *src = p->val[t].node;
    const char *s = kfw_short_name(json_string_value(json_object_get(src, "target")));
    if (s == NULL || (strcmp(s, "chunk") != 0 && strcmp(s, "split") != 0))
        return 0;
    const json_t *n, *dj;
    int v = cut_operands(p, src, s, &n, &dj);
    const int nd = p->val[v].ndim;
    long long d = dj ? json_integer_value(dj) : 0;
    d = d < 0 ? d + nd : d;
    if (d < 0 || d >= nd || i < 0) {
        snprintf(detail, dlen, "%s along dim %lld of a %d-d tensor, piece %lld", s, d, nd, i);
        return -1;
    }
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    char py[200];
    const char *x = p->val[v].py;
    if (json_is_array(n)) { /* split by a list of sizes: fixed starts */
        long long start = 0;
        if ((size_t)i >= json_array_size(n))
            return -1;
        for (long long j = 0; j < i; j++)
            start += json_integer_value(json_array_get(n, (size_t)j));
        snprintf(py, sizeof(py), "%s.narrow(%lld, %lld, %lld)", x, d, start,
                 (long long)json_integer_value(json_array_get(n, (size_t)i)));
    } else {
        char num[128]; /* the count or size: a literal, or a size's Python expression */
        if (size_of(p, n) >= 0)
            snprintf(num, sizeof(num), "(%s)", p->val[size_of(p, n)].py);
        else
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(n));
        if (!strcmp(s, "chunk")) /* c pieces of ceil(D / c) */
            snprintf(py, sizeof(py), "_piece(%s, %lld, -(-%s.shape[%lld] // %s), %lld)", x, d, x, d,
                     num, i);
        else
            snprintf(py, sizeof(py), "_piece(%s, %lld, %s, %lld)", x, d, num, i);
    }
    strided_view(p, node, k, v, py, true);
    return 1;
}

/* F.glu(x, dim=-1): the first half of x along dim times the sigmoid of the second, two pieces
 * read in place by the elementwise chain. 1, -1, or 0 when node is none. */
static int glu(struct kfx_plan *p, const json_t *node, int k, const char *s, bool module,
               char *detail, size_t dlen) {
    if (strcmp(s, module ? "GLU" : "glu") != 0)
        return 0;
    int v = kfx_arg_val(p, operand(node, 0, "input"));
    const json_t *dj =
        module ? json_object_get(json_object_get(node, "attrs"), "dim") : operand(node, 1, "dim");
    const int nd = v >= 0 ? p->val[v].ndim : 0;
    long long d = dj ? json_integer_value(dj) : -1;
    d = d < 0 ? d + nd : d;
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE || p->val[v].is_int ||
        (dj && !json_is_integer(dj)) || d < 0 || d >= nd || p->val[v].shape[d] % 2 != 0) {
        snprintf(detail, dlen, "glu of other than a float tensor of an even size along dim");
        return -1;
    }
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    int half[2];
    for (int j = 0; j < 2; j++) {
        int h = half[j] = kfx_new_out(p);
        if (h < 0)
            return -1;
        struct kfx_val *x = &p->val[h];
        x->kind = p->val[v].kind;
        snprintf(x->py, sizeof(x->py), "w%d", h);
        x->ndim = nd;
        memcpy(x->shape, p->val[v].shape, sizeof(x->shape));
        x->shape[d] /= 2;
        mark_strided(p, h, v, true);
        kfx_line(p, "w%d = _piece(%s, %lld, %s.shape[%lld] // 2, %d)", h, p->val[v].py, d,
                 p->val[v].py, d, j);
    }
    char e[96];
    snprintf(e, sizeof(e), "v%d * (1.0f / (1.0f + expf(-(v%d))))", half[0], half[1]);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

/* torch.zeros_like, ones_like and full_like(x, value) of a float tensor: a lazy constant of x's
 * shape. The expression reads x (a chain needs a leaf for its shape) so that it stays c for x
 * infinite or NaN too. 1, -1, or 0 when node is none. */
static int like(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                size_t dlen) {
    const bool full = !strcmp(s, "full_like");
    if (strcmp(s, "zeros_like") != 0 && strcmp(s, "ones_like") != 0 && !full)
        return 0;
    int v = kfx_arg_val(p, operand(node, 0, "input"));
    const json_t *fill = full ? operand(node, 1, "fill_value") : NULL;
    const char *dt = json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
    if (v < 0 || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE || p->val[v].is_int ||
        !dt || strcmp(dt, "float32") != 0 || (full && !json_is_number(fill))) {
        snprintf(detail, dlen, "%s of other than a float tensor and a number (not yet)", s);
        return -1;
    }
    char c[40], e[120];
    kfw_ew_lit(full ? json_number_value(fill) : !strcmp(s, "ones_like") ? 1.0 : 0.0, c);
    if (strstr(c, "inf") || strstr(c, "nan")) {
        snprintf(detail, dlen, "%s of a value that is not finite (not yet)", s);
        return -1;
    }
    snprintf(e, sizeof(e), "0.0f * (float)(v%d == v%d) + %s", v, v, c);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}

int kfx_plan_view(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *op = json_string_value(json_object_get(node, "op"));
    bool module = op && !strcmp(op, "call_module");
    const char *s = module ? json_string_value(json_object_get(node, "module_type"))
                           : kfw_short_name(json_string_value(json_object_get(node, "target")));
    if (s == NULL)
        return 0;
    int rc = dropout(p, node, k, s, module, detail, dlen);
    if (rc == 0)
        rc = glu(p, node, k, s, module, detail, dlen);
    if (rc == 0 && !module)
        rc = pieces(p, node, k, s, detail, dlen);
    if (rc == 0 && !module)
        rc = like(p, node, k, s, detail, dlen);
    if (rc == 0 && !module)
        rc = moved(p, node, k, s);
    if (rc == 0 && !module)
        rc = size(p, node, k, s, detail, dlen);
    if (rc == 0 && (!module || !strcmp(s, "Flatten")))
        rc = view(p, node, k, module ? "flatten" : s, detail, dlen);
    if (rc == 0 && !module)
        rc = transpose(p, node, k, s, detail, dlen);
    if (rc == 0 && !module)
        rc = slice(p, node, k, s, detail, dlen);
    return rc;
}
