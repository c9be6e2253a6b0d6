/* expert_plan_const.c: numbers that the traced graph holds as tensors. A 0-d tensor made in
 * forward() (torch.tensor(0.5), which torch.fx folds into a get_attr of a _tensor_constantN that
 * the module does not own; inspect keeps its value) and torch.tensor(number, device=x.device)
 * (a call, since the device is a traced value) become a float literal in elementwise code, as
 * PyTorch's type promotion reads a 0-d float32 tensor beside a float32 one. getattr(x, "device")
 * is a KFX_DEVICE val that only such a call reads. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "expert.h"
#include "expert_plan.h"

/* Whether the module owns a tensor of this dotted name (in graph["parameters"] or ["buffers"]). */
static bool owned(const struct kfx_plan *p, const char *target, bool *buffer) {
    static const char *const lists[] = {"parameters", "buffers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        const json_t *t;
        json_array_foreach(json_object_get(p->graph, lists[l]), i, t) {
            const char *n = json_string_value(json_object_get(t, "name"));
            if (n && strcmp(n, target) == 0) {
                *buffer = l == 1;
                return true;
            }
        }
    }
    return false;
}

bool kfx_infinity(const json_t *v, char *out, size_t n) {
    const char *inf = json_string_value(json_object_get(v, "float"));
    if (!json_is_object(v) || json_object_size(v) != 1 || inf == NULL ||
        (strcmp(inf, "inf") != 0 && strcmp(inf, "-inf") != 0))
        return false;
    snprintf(out, n, "%s", inf[0] == '-' ? "(-INFINITY)" : "INFINITY");
    return true;
}

/* a number, or an infinite one as inspect writes it ({"float": "-inf"}), as a C float literal */
static int literal(const json_t *v, char *out, size_t n) {
    if (kfx_infinity(v, out, n))
        return 0;
    if (!json_is_number(v) && !json_is_boolean(v))
        return -1;
    double d = json_is_number(v) ? json_number_value(v) : (double)json_is_true(v);
    char buf[40];
    snprintf(out, n, "%s", kfw_ew_lit(d, buf));
    return isfinite(d) ? 0 : -1;
}

/* a float32 0-d val k whose value is the literal of v */
static int constant(struct kfx_plan *p, const json_t *node, int k, const json_t *v, char *detail,
                    size_t dlen) {
    const json_t *out = json_object_get(node, "output");
    const char *dt = json_string_value(json_object_get(out, "dtype"));
    char lit[48];
    if (dt == NULL || strcmp(dt, "float32") != 0 ||
        json_array_size(json_object_get(out, "shape")) != 0 || literal(v, lit, sizeof(lit)) != 0) {
        snprintf(detail, dlen, "a tensor constant that is not one float32 number (not yet)");
        return -1;
    }
    return kfx_set_lazy(p, k, node, lit) == 0 ? 1 : -1;
}

/* The index of the tensor named target among those __init__ made without owning them and a
 * candidate can make again (inspect's init_draws), or -1. */
static int drawn(const struct kfx_plan *p, const char *target) {
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(p->graph, "init_draws"), i, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && target && strcmp(n, target) == 0)
            return (int)i;
    }
    return -1;
}

int kfx_plan_attribute(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *target = json_string_value(json_object_get(node, "target"));
    bool buffer = false;
    char py[24];
    snprintf(py, sizeof(py), "p%d", k);
    if (!owned(p, target, &buffer)) {
        int d = drawn(p, target);
        if (d >= 0) { /* made again by ModelNew's __init__ (expert_model.c) */
            char name[24];
            snprintf(name, sizeof(name), "_kf_draw%d", d);
            kfx_bind_param(p, py, name, true);
            kfx_set_val(p, k, node, KFX_PARAM, py);
            return 0;
        }
        const json_t *v = json_object_get(node, "value");
        if (v == NULL) {
            snprintf(detail, dlen,
                     "a tensor %s that the module does not own and whose value the trace did not "
                     "keep (not yet)",
                     target);
            return -1;
        }
        return constant(p, node, k, v, detail, dlen) == 1 ? 0 : -1;
    }
    kfx_bind_param(p, py, target, buffer);
    kfx_set_val(p, k, node, KFX_PARAM, py);
    return 0;
}

int kfx_plan_const(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
    if (strcmp(op, "call_function") != 0 || s == NULL)
        return 0;
    if (strcmp(s, "getattr") == 0) { /* x.device: placed by the input anyway */
        const char *field = json_string_value(json_array_get(args, 1));
        if (field == NULL || strcmp(field, "device") != 0 ||
            kfx_arg_val(p, json_array_get(args, 0)) < 0)
            return 0;
        kfx_set_val(p, k, node, KFX_DEVICE, "");
        p->val[k].is_int = 1; /* never read as a number */
        p->val[k].ndim = 0;
        return 1;
    }
    if (strcmp(s, "tensor") != 0 || json_array_size(args) != 1)
        return 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)kw, key, v) {
        int d = kfx_arg_val(p, v);
        bool device = strcmp(key, "device") == 0 &&
                      (json_is_string(v) || (d >= 0 && p->val[d].kind == KFX_DEVICE));
        bool f32 = strcmp(key, "dtype") == 0 && json_is_string(v) &&
                   !strcmp(json_string_value(v), "float32");
        if (!device && !f32 && strcmp(key, "requires_grad") != 0)
            return 0;
    }
    return constant(p, node, k, json_array_get(args, 0), detail, dlen);
}
