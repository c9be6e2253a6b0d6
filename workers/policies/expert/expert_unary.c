/* expert_unary.c: the C expressions of the less common one-operand elementwise operators
 * (SELU, CELU, Softsign, LogSigmoid, the shrinks, rounding, erf and the like), for expert_ew.c's
 * kfw_ew_expr. Each is written with the functions that both the cuda and the cpu kernels have
 * (CUDA's device math and C's libm), in the form PyTorch documents for it. */
#include <stdio.h>
#include <string.h>

#include "expert.h"

/* kwargs[name] as a float literal, or def's. */
static const char *kw_lit(const json_t *kw, const char *name, double def, char buf[40]) {
    const json_t *v = json_object_get(kw, name);
    return kfw_ew_lit(json_is_number(v) ? json_number_value(v) : def, buf);
}

/* op (a short name) of one operand a with keywords kw into e: 0, or -1 when op is not one of
 * these. */
int kfw_unary_more(const char *op, const json_t *kw, const char *a, char *e, size_t n) {
    static const char *const libm[][2] = {
        {"erf", "erff"},   {"erfc", "erfcf"},   {"log1p", "log1pf"}, {"expm1", "expm1f"},
        {"log2", "log2f"}, {"log10", "log10f"}, {"exp2", "exp2f"},   {"floor", "floorf"},
        {"ceil", "ceilf"}, {"trunc", "truncf"}, {"round", "rintf"},  {"tan", "tanf"},
        {"sinh", "sinhf"}, {"cosh", "coshf"},   {"asin", "asinf"},   {"acos", "acosf"},
        {"atan", "atanf"}, {"asinh", "asinhf"}, {"acosh", "acoshf"}, {"atanh", "atanhf"},
    };
    for (size_t i = 0; i < sizeof(libm) / sizeof(libm[0]); i++)
        if (strcmp(op, libm[i][0]) == 0) {
            /* torch.round(x, decimals=d) rounds to d places: not this */
            if (strcmp(op, "round") == 0 && json_object_get(kw, "decimals"))
                return -1;
            snprintf(e, n, "%s(%s)", libm[i][1], a);
            return 0;
        }
    char k1[40] = "", k2[40] = "";
    if (strcmp(op, "selu") == 0) /* scale * (x > 0 ? x : alpha * (exp(x) - 1)) */
        snprintf(e, n,
                 "1.05070098735548049f * (%s > 0.0f ? %s : 1.67326324235437728f * expm1f(%s))", a,
                 a, a);
    else if (strcmp(op, "celu") == 0) {
        const char *al = kw_lit(kw, "alpha", 1.0, k1);
        snprintf(e, n, "%s > 0.0f ? %s : %s * expm1f(%s / %s)", a, a, al, a, al);
    } else if (strcmp(op, "softsign") == 0)
        snprintf(e, n, "%s / (1.0f + fabsf(%s))", a, a);
    else if (strcmp(op, "log_sigmoid") == 0 || strcmp(op, "logsigmoid") == 0)
        /* min(x, 0) - log1p(exp(-|x|)): no overflow on either side */
        snprintf(e, n, "fminf(%s, 0.0f) - log1pf(expf(-fabsf(%s)))", a, a);
    else if (strcmp(op, "square") == 0)
        snprintf(e, n, "%s * %s", a, a);
    else if (strcmp(op, "reciprocal") == 0)
        snprintf(e, n, "1.0f / %s", a);
    else if (strcmp(op, "sign") == 0) /* NaN stays NaN, as in torch.sign */
        snprintf(e, n, "%s > 0.0f ? 1.0f : %s < 0.0f ? -1.0f : %s", a, a, a);
    else if (strcmp(op, "frac") == 0) /* x - trunc(x): the sign of x */
        snprintf(e, n, "%s - truncf(%s)", a, a);
    else if (strcmp(op, "expit") == 0 || strcmp(op, "special_expit") == 0) /* the sigmoid */
        snprintf(e, n, "1.0f / (1.0f + expf(-(%s)))", a);
    else if (strcmp(op, "logit") == 0 || strcmp(op, "special_logit") == 0) {
        /* log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given */
        const json_t *ep = json_object_get(kw, "eps");
        if (ep && !json_is_null(ep) && !json_is_number(ep))
            return -1;
        char z[160];
        if (json_is_number(ep))
            snprintf(z, sizeof(z), "fminf(fmaxf(%s, %s), 1.0f - %s)", a, kw_lit(kw, "eps", 0, k1),
                     k1);
        else
            snprintf(z, sizeof(z), "(%s)", a);
        snprintf(e, n, "logf(%s / (1.0f - %s))", z, z);
    } else if (strcmp(op, "tanhshrink") == 0)
        snprintf(e, n, "%s - tanhf(%s)", a, a);
    else if (strcmp(op, "softshrink") == 0) {
        const char *l = kw_lit(kw, "lambd", 0.5, k1);
        snprintf(e, n, "%s > %s ? %s - %s : %s < -(%s) ? %s + %s : 0.0f", a, l, a, l, a, l, a, l);
    } else if (strcmp(op, "hardshrink") == 0) {
        const char *l = kw_lit(kw, "lambd", 0.5, k1);
        snprintf(e, n, "%s > %s || %s < -(%s) ? %s : 0.0f", a, l, a, l, a);
    } else if (strcmp(op, "threshold") == 0) {
        /* F.threshold(x, threshold, value): x where x > threshold, else value */
        if (!json_is_number(json_object_get(kw, "threshold")) ||
            !json_is_number(json_object_get(kw, "value")))
            return -1;
        snprintf(e, n, "%s > %s ? %s : %s", a, kw_lit(kw, "threshold", 0.0, k1), a,
                 kw_lit(kw, "value", 0.0, k2));
    } else if (strcmp(op, "nan_to_num") == 0) {
        /* NaN to nan (0), +inf to posinf and -inf to neginf (float32's largest finite values
         * when None); a NaN is the one value unequal to itself */
        char k3[40];
        const char *big = "3.40282347e+38f";
        snprintf(e, n, "%s != %s ? %s : %s > %s ? %s : %s < -%s ? %s : %s", a, a,
                 kw_lit(kw, "nan", 0.0, k1), a, big,
                 kw_lit(kw, "posinf", 3.4028234663852886e38, k2), a, big,
                 kw_lit(kw, "neginf", -3.4028234663852886e38, k3), a);
    } else
        return -1;
    /* a keyword that is not a finite number ("inff", "nanf") is no C literal */
    return strstr(e, "inff") || strstr(e, "nanf") ? -1 : 0;
}
