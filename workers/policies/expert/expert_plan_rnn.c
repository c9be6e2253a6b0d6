/* expert_plan_rnn.c: nn.LSTM, nn.GRU and nn.RNN (tanh or relu) as one KFX_RNN step, whose
 * kernel file runs every layer, direction and time step itself (expert_rnn.c). The module's
 * call is a tuple val whose items (the output, h_n, and for an LSTM the (h_n, c_n) tuple) are
 * in memory once the step has run; getitem reads them (kfx_plan_rnn_item). The cells
 * (nn.LSTMCell, GRUCell, RNNCell) are the same kernel over one step of one layer: their input
 * [N, I] is [1, N, I], their state h (and c) is h_n (c_n), which they return. Options: layers,
 * bias or not, batch_first, bidirectional, an initial state or none, an unbatched input;
 * refused by name: proj_size, dropout between layers in training mode (random), other dtypes.
 * The parameters are the module's, bound by their names (weight_ih_l0, .._reverse). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

bool kfx_is_rnn(const json_t *node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *mt = json_string_value(json_object_get(node, "module_type"));
    return op && mt && !strcmp(op, "call_module") &&
           (!strcmp(mt, "LSTM") || !strcmp(mt, "GRU") || !strcmp(mt, "RNN") ||
            !strcmp(mt, "LSTMCell") || !strcmp(mt, "GRUCell") || !strcmp(mt, "RNNCell"));
}

/* The val that node argument a (a {"node": NAME} object) holds in memory, contiguous, through
 * identities (x.to(device), dropout that drops nothing: lazy "vJ"): its index, or -1 with
 * detail. */
static int operand(struct kfx_plan *p, const json_t *a, const char *what, char *detail,
                   size_t dlen) {
    int v = kfx_arg_val(p, a);
    for (int j; (j = kfx_identity_of(p, v)) >= 0 && !p->val[j].noncontig && !p->val[j].offset &&
                kfx_same_shape(&p->val[j], &p->val[v]);)
        v = j;
    if (v < 0 || p->val[v].is_int || p->val[v].kind == KFX_TUPLE || p->val[v].kind == KFX_SIZE ||
        p->val[v].kind == KFX_DEVICE) {
        snprintf(detail, dlen, "a recurrent layer's %s that is not a float tensor", what);
        return -1;
    }
    if (kfx_materialise(p, v, detail, dlen) != 0)
        return -1;
    if (p->val[v].noncontig || p->val[v].offset) {
        snprintf(detail, dlen, "a recurrent layer's %s that is a strided view (not yet)", what);
        return -1;
    }
    return v;
}

struct rnn_dims {
    struct kfx_rnn_spec s;
    bool unbatched, lstm;
};

/* The module's options, checked; 0 or -1 with detail. */
static int dims_of(const json_t *node, const struct kfx_val *x, struct rnn_dims *r, char *detail,
                   size_t dlen) {
    const json_t *at = json_object_get(node, "attrs");
    const char *path = json_string_value(json_object_get(node, "target"));
    const char *mode = json_string_value(json_object_get(at, "mode"));
    const json_t *drop = json_object_get(at, "dropout");
    if (kfx_rnn_spec_of(node, &r->s) != 0) {
        snprintf(detail, dlen, "recurrent layer %s of mode %s (not yet)", path, mode ? mode : "?");
        return -1;
    }
    r->lstm = r->s.mode == 0;
    r->unbatched = x->ndim == (r->s.cell ? 1 : 2);
    if (json_integer_value(json_object_get(at, "proj_size")) != 0) {
        snprintf(detail, dlen, "LSTM %s with proj_size (not yet)", path);
        return -1;
    }
    if (json_is_number(drop) && json_number_value(drop) > 0.0 && r->s.L > 1 &&
        json_is_true(json_object_get(at, "training"))) {
        snprintf(detail, dlen,
                 "recurrent layer %s with dropout %g in training mode (random: no kernel can "
                 "match it)",
                 path, json_number_value(drop));
        return -1;
    }
    if (x->ndim < (r->s.cell ? 1 : 2) || x->ndim > (r->s.cell ? 2 : 3) ||
        x->shape[x->ndim - 1] != r->s.I) {
        snprintf(detail, dlen, "recurrent layer %s of an input that is not [.., %lld]", path,
                 r->s.I);
        return -1;
    }
    return 0;
}

/* The initial state's vals (h0, and c0 for an LSTM): -1 each when hx is None or absent. 0, or
 * -1 with detail. */
static int state_of(struct kfx_plan *p, const json_t *node, const struct rnn_dims *r, int *h0,
                    int *c0, char *detail, size_t dlen) {
    const json_t *hx = kfx_node_arg(node, 1, "hx");
    *h0 = *c0 = -1;
    if (hx == NULL || json_is_null(hx))
        return 0;
    int t = json_is_object(hx) ? kfx_arg_val(p, hx) : -1;
    if (r->lstm && t >= 0 && p->val[t].items && p->val[t].n_items == 2) {
        /* another LSTM's (h_n, c_n), passed whole: its items, in memory */
        *h0 = p->val[t].items - 1;
        *c0 = p->val[t].items;
        return 0;
    }
    if (r->lstm != json_is_array(hx) || (r->lstm && json_array_size(hx) != 2)) {
        snprintf(detail, dlen, "a recurrent layer's initial state of another form (not yet)");
        return -1;
    }
    *h0 = operand(p, r->lstm ? json_array_get(hx, 0) : hx, "initial state", detail, dlen);
    if (*h0 >= 0 && r->lstm)
        *c0 = operand(p, json_array_get(hx, 1), "initial cell state", detail, dlen);
    if (*h0 < 0 || (r->lstm && *c0 < 0))
        return -1;
    return 0;
}

/* Binds the layer's parameters in the kernel's order (per layer and direction: weight_ih,
 * weight_hh, then bias_ih, bias_hh when the module has them) and appends their locals to args. */
static void bind_weights(struct kfx_plan *p, const char *path, const struct rnn_dims *r, int k,
                         char *args, size_t n) {
    static const char *const names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (long long l = 0; l < r->s.L; l++)
        for (long long d = 0; d < r->s.D; d++)
            for (int w = 0; w < (r->s.bias ? 4 : 2); w++) {
                char local[48], dotted[256];
                snprintf(local, sizeof(local), "t%d_w%lld", k, (l * r->s.D + d) * 4 + w);
                if (r->s.cell) /* weight_ih, .. */
                    snprintf(dotted, sizeof(dotted), "%s.%s", path, names[w]);
                else
                    snprintf(dotted, sizeof(dotted), "%s.%s_l%lld%s", path, names[w], l,
                             d ? "_reverse" : "");
                kfx_bind_param(p, local, dotted, false);
                size_t len = strlen(args);
                snprintf(args + len, n - len, "%s, ", local);
            }
}

/* A new val of the given kind and shape named py, or -1. */
static int item(struct kfx_plan *p, enum kfx_vkind kind, const char *py, const long long *shape,
                int nd) {
    int v = kfx_new_val(p, py, shape, nd);
    if (v >= 0)
        p->val[v].kind = kind;
    return v;
}

/* The forward lines: the outputs allocated (out, h, and c for an LSTM: new at every call, a
 * caller may keep them), the scratch (the input projections of one layer's directions, the
 * recurrent product of one step, the outputs of two inner layers), the kernel's call. */
static void forward_lines(struct kfx_plan *p, const struct kfx_step *st, int k, const char *x,
                          const char *h0, const char *c0, const char *weights,
                          const struct rnn_dims *r) {
    const char *path = json_string_value(json_object_get(st->node, "target"));
    const long long DH = r->s.D * r->s.H, LD = r->s.L * r->s.D;
    kfx_line(p, "t%d_x = %s", k, x);
    if (r->unbatched)
        kfx_line(p, "t%d_T, t%d_N = t%d_x.shape[0], 1", k, k, k);
    else if (r->s.bf)
        kfx_line(p, "t%d_N, t%d_T = t%d_x.shape[0], t%d_x.shape[1]", k, k, k, k);
    else
        kfx_line(p, "t%d_T, t%d_N = t%d_x.shape[0], t%d_x.shape[1]", k, k, k, k);
    kfx_line(p, "if t%d_x.dim() != %d or t%d_x.shape[-1] != %lld or t%d_T == 0:", k,
             r->unbatched ? 2 : 3, k, r->s.I, k);
    kfx_line(p,
             "    raise ValueError(f\"%s: an input of {tuple(t%d_x.shape)}, not %s[.., %lld] of "
             "one step or more\")",
             path, k, r->unbatched ? "unbatched " : "", r->s.I);
    char lead[32] = ""; /* h_n's batch dim */
    if (!r->unbatched)
        snprintf(lead, sizeof(lead), "t%d_N, ", k);
    if (r->unbatched)
        kfx_line(p, "t%do = _alloc((t%d_T, %lld), t%d_x)", k, k, DH, k);
    else if (r->s.bf)
        kfx_line(p, "t%do = _alloc((t%d_N, t%d_T, %lld), t%d_x)", k, k, k, DH, k);
    else
        kfx_line(p, "t%do = _alloc((t%d_T, t%d_N, %lld), t%d_x)", k, k, k, DH, k);
    kfx_line(p, "t%dh = _alloc((%lld, %s%lld), t%d_x)", k, LD, lead, r->s.H, k);
    if (r->lstm)
        kfx_line(p, "t%dc = _alloc((%lld, %s%lld), t%d_x)", k, LD, lead, r->s.H, k);
    for (int s = 0; s < 2; s++) {
        const char *h = s == 0 ? h0 : c0;
        if (h[0] == '\0')
            continue;
        kfx_line(p, "if tuple(%s.shape) != (%lld, %s%lld):", h, LD, lead, r->s.H);
        kfx_line(p, "    raise ValueError(f\"%s: an initial state of {tuple(%s.shape)}\")", path,
                 h);
    }
    char dirs[32] = ""; /* the input projections of both directions (the cuda kernels') */
    if (r->s.D > 1)
        snprintf(dirs, sizeof(dirs), " * %lld", r->s.D);
    kfx_line(p, "t%d_g = _scratch(self, \"t%d_g\", (t%d_T * t%d_N%s, %lld), t%d_x)", k, k, k, k,
             dirs, r->s.G * r->s.H, k);
    kfx_line(p, "t%d_hg = _scratch(self, \"t%d_hg\", (t%d_N, %lld), t%d_x)", k, k, k,
             r->s.G * r->s.H, k);
    if (r->s.L > 1)
        kfx_line(p, "t%d_y = _scratch(self, \"t%d_y\", (%d, t%d_T * t%d_N, %lld), t%d_x)", k, k,
                 r->s.L > 2 ? 2 : 1, k, k, DH, k);
    /* without an initial state (or for a GRU's and an RNN's cell state), out's pointer stands
     * in: the kernel does not read it */
    char none[24];
    snprintf(none, sizeof(none), "t%do", k);
    kfx_line(p,
             "self.k.%s(t%d_x, %s, %s, %st%do, t%dh, t%d%c, t%d_g, t%d_hg, t%d%s, t%d_T, t%d_N, "
             "%d)",
             st->fn, k, h0[0] ? h0 : none, c0[0] ? c0 : none, weights, k, k, k, r->lstm ? 'c' : 'h',
             k, k, k, r->s.L > 1 ? "_y" : "o", k, k, h0[0] ? 1 : 0);
}

/* A cell's forward lines: its input one step of a sequence, its new state the kernel's h_n
 * (and c_n), which stands in for the output too (one step of one layer writes the same values
 * to both). */
static void cell_lines(struct kfx_plan *p, const struct kfx_step *st, int k, const char *x,
                       const char *h0, const char *c0, const char *weights,
                       const struct rnn_dims *r) {
    const char *path = json_string_value(json_object_get(st->node, "target"));
    char shape[48];
    if (r->unbatched)
        snprintf(shape, sizeof(shape), "(%lld,)", r->s.H);
    else
        snprintf(shape, sizeof(shape), "(t%d_N, %lld)", k, r->s.H);
    kfx_line(p, "t%d_x = %s", k, x);
    if (r->unbatched)
        kfx_line(p, "t%d_N = 1", k);
    else
        kfx_line(p, "t%d_N = t%d_x.shape[0]", k, k);
    kfx_line(p, "if t%d_x.dim() != %d or t%d_x.shape[-1] != %lld:", k, r->unbatched ? 1 : 2, k,
             r->s.I);
    kfx_line(p, "    raise ValueError(f\"%s: an input of {tuple(t%d_x.shape)}, not [.., %lld]\")",
             path, k, r->s.I);
    kfx_line(p, "t%dh = _alloc(%s, t%d_x)", k, shape, k);
    if (r->lstm)
        kfx_line(p, "t%dc = _alloc(%s, t%d_x)", k, shape, k);
    for (int s = 0; s < 2; s++) {
        const char *h = s == 0 ? h0 : c0;
        if (h[0] == '\0')
            continue;
        kfx_line(p, "if tuple(%s.shape) != %s:", h, shape);
        kfx_line(p, "    raise ValueError(f\"%s: a state of {tuple(%s.shape)}\")", path, h);
    }
    kfx_line(p, "t%d_g = _scratch(self, \"t%d_g\", (t%d_N, %lld), t%d_x)", k, k, k, r->s.G * r->s.H,
             k);
    kfx_line(p, "t%d_hg = _scratch(self, \"t%d_hg\", (t%d_N, %lld), t%d_x)", k, k, k,
             r->s.G * r->s.H, k);
    char none[24];
    snprintf(none, sizeof(none), "t%dh", k);
    kfx_line(p, "self.k.%s(t%d_x, %s, %s, %st%dh, t%dh, t%d%c, t%d_g, t%d_hg, t%dh, 1, t%d_N, %d)",
             st->fn, k, h0[0] ? h0 : none, c0[0] ? c0 : none, weights, k, k, k, r->lstm ? 'c' : 'h',
             k, k, k, k, h0[0] ? 1 : 0);
}

/* A cell planned: its lines, then val k its new state h (GRUCell, RNNCell) or the tuple
 * (h, c) (LSTMCell). 1, or -1 with detail. */
static int cell_result(struct kfx_plan *p, const struct kfx_step *st, const json_t *node, int k,
                       const char *x, const char *h0, const char *c0, const char *weights,
                       const struct rnn_dims *r, char *detail, size_t dlen) {
    cell_lines(p, st, k, x, h0, c0, weights, r);
    char name[24];
    snprintf(name, sizeof(name), "t%dh", k);
    if (!r->lstm) {
        kfx_set_val(p, k, node, KFX_TENSOR, name);
        return 1;
    }
    const json_t *out = json_object_get(node, "output"); /* [h's meta, c's] */
    const json_t *shape = json_object_get(json_array_get(out, 0), "shape");
    long long hs[2] = {0, 0};
    int nd = (int)json_array_size(shape);
    for (int d = 0; d < nd && d < 2; d++)
        hs[d] = json_integer_value(json_array_get(shape, (size_t)d));
    int hv = item(p, KFX_TENSOR, name, hs, nd);
    snprintf(name, sizeof(name), "t%dc", k);
    int cv = item(p, KFX_TENSOR, name, hs, nd);
    if (hv < 0 || cv < 0 || nd < 1 || nd > 2) {
        snprintf(detail, dlen, "a recurrent cell: more values than a plan holds");
        return -1;
    }
    kfx_set_val(p, k, node, KFX_TUPLE, "");
    p->val[k].items = 1 + hv;
    p->val[k].n_items = 2;
    return 1;
}

int kfx_plan_rnn(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *path = json_string_value(json_object_get(node, "target"));
    int xv = operand(p, kfx_node_arg(node, 0, "input"), "input", detail, dlen);
    if (xv < 0)
        return -1;
    struct rnn_dims r;
    int h0 = -1, c0 = -1;
    if (dims_of(node, &p->val[xv], &r, detail, dlen) != 0 ||
        state_of(p, node, &r, &h0, &c0, detail, dlen) != 0)
        return -1;
    char x[128];
    snprintf(x, sizeof(x), "%s", p->val[xv].py);
    char weights[4096] = "";
    bind_weights(p, path, &r, k, weights, sizeof(weights));
    struct kfx_step *st = kfx_add_step(p, KFX_RNN, detail, dlen);
    if (st == NULL)
        return -1;
    st->node = node;
    char hp[128] = "", cp[128] = "";
    if (h0 >= 0)
        snprintf(hp, sizeof(hp), "%s", p->val[h0].py);
    if (c0 >= 0)
        snprintf(cp, sizeof(cp), "%s", p->val[c0].py);
    if (r.s.cell)
        return cell_result(p, st, node, k, x, hp, cp, weights, &r, detail, dlen);
    forward_lines(p, st, k, x, hp, cp, weights, &r);
    /* the items: out, then h_n (GRU, RNN) or the (h_n, c_n) tuple followed by h_n and c_n */
    const struct kfx_val *xs = &p->val[xv];
    const long long T = xs->shape[r.s.bf && !r.unbatched ? 1 : 0];
    const long long N = r.unbatched ? 1 : xs->shape[r.s.bf ? 0 : 1];
    long long os[3] = {T, r.s.D * r.s.H, 0}, hs[3] = {r.s.L * r.s.D, r.s.H, 0};
    if (!r.unbatched) {
        os[0] = r.s.bf ? N : T;
        os[1] = r.s.bf ? T : N;
        os[2] = r.s.D * r.s.H;
        hs[1] = N;
        hs[2] = r.s.H;
    }
    const int ond = r.unbatched ? 2 : 3, hnd = ond;
    char name[24];
    snprintf(name, sizeof(name), "t%do", k);
    int first = item(p, KFX_TENSOR, name, os, ond);
    int state = r.lstm ? item(p, KFX_TUPLE, "", hs, 0) : -1;
    snprintf(name, sizeof(name), "t%dh", k);
    int hv = item(p, KFX_TENSOR, name, hs, hnd);
    snprintf(name, sizeof(name), "t%dc", k);
    int cv = r.lstm ? item(p, KFX_TENSOR, name, hs, hnd) : hv;
    if (first < 0 || hv < 0 || cv < 0 || (r.lstm && state < 0)) {
        snprintf(detail, dlen, "a recurrent layer: more values than a plan holds");
        return -1;
    }
    if (r.lstm) {
        p->val[state].items = 1 + hv;
        p->val[state].n_items = 2;
    }
    kfx_set_val(p, k, node, KFX_TUPLE, "");
    p->val[k].items = 1 + first;
    p->val[k].n_items = 2;
    return 1;
}

int kfx_plan_rnn_item(struct kfx_plan *p, const json_t *node, int k, int t, long long i,
                      char *detail, size_t dlen) {
    if (i < 0) /* state[-1] */
        i += p->val[t].n_items;
    if (i < 0 || i >= p->val[t].n_items) {
        snprintf(detail, dlen, "item %lld of a recurrent layer's tuple of %d", i,
                 p->val[t].n_items);
        return -1;
    }
    const struct kfx_val *src = &p->val[p->val[t].items - 1 + i];
    kfx_set_val(p, k, node, src->kind, src->py);
    p->val[k].items = src->items;
    p->val[k].n_items = src->n_items;
    return 1;
}
