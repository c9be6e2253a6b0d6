/* expert_ew.c: elementwise chains for the expert: the FX graph of `inspect` mapped to one C
 * expression per node, and the kernels and model_new.py that run them in one pass; also the
 * float4 row pass (kfw_row4_*) that expert_bcast.c and expert_norm_fused.c emit. */
#include "expert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* The operator's short name: "torch.nn.functional.gelu" -> "gelu", "_operator.add" -> "add". */
const char *kfw_short_name(const char *target) {
    const char *dot = strrchr(target, '.');
    return dot ? dot + 1 : target;
}

/* A float literal of C: "2.0f", "0.5f", "1e-05f". */
const char *kfw_ew_lit(double v, char buf[40]) {
    snprintf(buf, 40, "%.9g", v);
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    strcat(buf, "f");
    return buf;
}

/* The number kwargs[name] (or def) as a float literal in buf. */
static const char *num_kw(const json_t *kw, const char *name, double def, char buf[40]) {
    const json_t *v = json_object_get(kw, name);
    return kfw_ew_lit(json_is_number(v) ? json_number_value(v) : def, buf);
}

/* a ** b as C: the small exponents as PyTorch's own kernels compute them (products, a square
 * root, a reciprocal: exact or within an ulp, and far cheaper than powf, which the tanh GELU
 * written out with torch.pow(x, 3.0) spent most of its time in), powf otherwise. */
static void pow_expr(const char *a, const char *b, char *e, size_t n) {
    static const char *const forms[][2] = {{"1.0f", "(%s)"},
                                           {"2.0f", "((%s) * (%s))"},
                                           {"3.0f", "((%s) * (%s) * (%s))"},
                                           {"0.5f", "sqrtf(%s)"},
                                           {"-1.0f", "(1.0f / (%s))"},
                                           {"-2.0f", "(1.0f / ((%s) * (%s)))"},
                                           {"-0.5f", "(1.0f / sqrtf(%s))"}};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
        if (!strcmp(b, forms[i][0])) {
            snprintf(e, n, forms[i][1], a, a, a);
            return;
        }
    snprintf(e, n, "powf(%s, %s)", a, b);
}

/* softplus(a; beta, threshold) = a where beta * a > threshold, else log1p(exp(beta * a)) / beta
 * (torch.nn.functional.softplus); the defaults (1, 20) in the form kfw_tanh_softplus reads. */
static int softplus(const json_t *kw, const char *a, char *e, size_t n) {
    const json_t *bj = json_object_get(kw, "beta"), *tj = json_object_get(kw, "threshold");
    if ((bj && !json_is_number(bj)) || (tj && !json_is_number(tj)))
        return -1;
    const double beta = bj ? json_number_value(bj) : 1.0, thr = tj ? json_number_value(tj) : 20.0;
    char kb[40], kt[40];
    if (beta == 1.0 && thr == 20.0)
        snprintf(e, n, "%s > 20.0f ? %s : log1pf(expf(%s))", a, a, a);
    else if (beta > 0.0)
        snprintf(e, n, "%s * %s > %s ? %s : log1pf(expf(%s * %s)) / %s", kfw_ew_lit(beta, kb), a,
                 kfw_ew_lit(thr, kt), a, kb, a, kb);
    else
        return -1;
    return 0;
}

/* tanh(softplus(x)) without a logarithm or a tanh, where sp is softplus's default expression
 * of some x (the tail of Mish): with t = exp(x), tanh(log(1 + t)) = ((1 + t)^2 - 1) / ((1 + t)^2
 * + 1) = u / (u + 2) for u = t (t + 2), which loses nothing to cancellation (u is a product of
 * positives) and cannot overflow below softplus's threshold (u < 2.4e17 for x <= 20); above it,
 * tanh(x) is 1 in float. One exponential and one division instead of exp, log1p and tanh: Mish
 * on the H200 ran at 72% of the copy bandwidth with the three. 0, or -1 when sp is not that
 * form. */
int kfw_tanh_softplus(const char *sp, char *e, size_t n) {
    const char *gt = strstr(sp, " > 20.0f ? ");
    if (gt == NULL || gt == sp || (size_t)(gt - sp) > 64)
        return -1;
    char x[72], want[256];
    snprintf(x, sizeof(x), "%.*s", (int)(gt - sp), sp);
    snprintf(want, sizeof(want), "%s > 20.0f ? %s : log1pf(expf(%s))", x, x, x);
    if (strcmp(sp, want) != 0)
        return -1;
    /* the exponential written four times: one call after common subexpressions (pure) */
    snprintf(e, n,
             "%s > 20.0f ? 1.0f : (expf(%s) * (expf(%s) + 2.0f)) / (expf(%s) * (expf(%s) + 2.0f) "
             "+ 2.0f)",
             x, x, x, x, x);
    return 0;
}

/* One node's expression into e; 0, or -1 (unsupported). a and b are the first two arguments. */
int kfw_ew_expr(const char *op, const json_t *kw, const char *a, const char *b, int nargs, char *e,
                size_t n) {
    char k1[40], k2[40];
    /* a keyword read below as a number (num_kw) that is a tensor or an infinity: refused, not
     * read as its default (torch.clamp(x, min=t) once lost its bound that way) */
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)kw, key, v) {
        if (json_is_object(v) || json_is_array(v))
            return -1;
    }
    if (nargs == 1) {
        if (!strcmp(op, "sigmoid"))
            snprintf(e, n, "1.0f / (1.0f + expf(-(%s)))", a);
        else if (!strcmp(op, "relu"))
            snprintf(e, n, "fmaxf(%s, 0.0f)", a);
        else if (!strcmp(op, "tanh"))
            snprintf(e, n, "tanhf(%s)", a);
        else if (!strcmp(op, "exp"))
            snprintf(e, n, "expf(%s)", a);
        else if (!strcmp(op, "log"))
            snprintf(e, n, "logf(%s)", a);
        else if (!strcmp(op, "abs"))
            snprintf(e, n, "fabsf(%s)", a);
        else if (!strcmp(op, "neg"))
            snprintf(e, n, "-(%s)", a);
        else if (!strcmp(op, "sqrt"))
            snprintf(e, n, "sqrtf(%s)", a);
        else if (!strcmp(op, "rsqrt"))
            snprintf(e, n, "1.0f / sqrtf(%s)", a);
        else if (!strcmp(op, "sin") || !strcmp(op, "cos"))
            snprintf(e, n, "%sf(%s)", op, a);
        else if (!strcmp(op, "silu"))
            snprintf(e, n, "%s / (1.0f + expf(-(%s)))", a, a);
        else if (!strcmp(op, "gelu")) {
            const char *approx = json_string_value(json_object_get(kw, "approximate"));
            if (approx && !strcmp(approx, "tanh"))
                snprintf(e, n,
                         "0.5f * %s * (1.0f + tanhf(0.7978845608028654f * (%s + 0.044715f * %s * "
                         "%s * %s)))",
                         a, a, a, a, a);
            else
                snprintf(e, n, "0.5f * %s * (1.0f + erff(%s * 0.7071067811865476f))", a, a);
        } else if (!strcmp(op, "leaky_relu"))
            snprintf(e, n, "%s > 0.0f ? %s : %s * %s", a, a, num_kw(kw, "negative_slope", 0.01, k1),
                     a);
        else if (!strcmp(op, "elu"))
            snprintf(e, n, "%s > 0.0f ? %s : %s * expm1f(%s)", a, a, num_kw(kw, "alpha", 1.0, k1),
                     a);
        else if (!strcmp(op, "softplus"))
            return softplus(kw, a, e, n);
        else if (!strcmp(op, "hardsigmoid"))
            snprintf(e, n, "fminf(fmaxf(%s / 6.0f + 0.5f, 0.0f), 1.0f)", a);
        else if (!strcmp(op, "hardswish"))
            snprintf(e, n, "%s * fminf(fmaxf(%s / 6.0f + 0.5f, 0.0f), 1.0f)", a, a);
        else if (!strcmp(op, "hardtanh"))
            snprintf(e, n, "fminf(fmaxf(%s, %s), %s)", a, num_kw(kw, "min_val", -1.0, k1),
                     num_kw(kw, "max_val", 1.0, k2));
        else if (!strcmp(op, "clamp") && (json_object_get(kw, "min") || json_object_get(kw, "max")))
            snprintf(e, n, "fminf(fmaxf(%s, %s), %s)", a, num_kw(kw, "min", -3.4e38, k1),
                     num_kw(kw, "max", 3.4e38, k2));
        else
            return kfw_unary_more(op, kw, a, e, n);
        return 0;
    }
    if (nargs == 2) {
        const char *sym = !strcmp(op, "add")                             ? "+"
                          : !strcmp(op, "sub")                           ? "-"
                          : !strcmp(op, "mul")                           ? "*"
                          : !strcmp(op, "truediv") || !strcmp(op, "div") ? "/"
                                                                         : NULL;
        if (sym && json_object_size(kw) == 0)
            snprintf(e, n, "%s %s %s", a, sym, b);
        else if (!strcmp(op, "maximum") || !strcmp(op, "minimum") || !strcmp(op, "fmax") ||
                 !strcmp(op, "fmin")) /* fmax, fmin: the number where one is NaN, as fmaxf */
            snprintf(e, n, "f%sf(%s, %s)",
                     !strcmp(op, "maximum") || !strcmp(op, "fmax") ? "max" : "min", a, b);
        else if (!strcmp(op, "pow"))
            pow_expr(a, b, e, n);
        else if (!strcmp(op, "fmod"))
            snprintf(e, n, "fmodf(%s, %s)", a, b);
        else if (!strcmp(op, "atan2") || !strcmp(op, "arctan2"))
            snprintf(e, n, "atan2f(%s, %s)", a, b);
        else if (!strcmp(op, "hypot") || !strcmp(op, "copysign"))
            snprintf(e, n, "%sf(%s, %s)", op, a, b);
        else if (!strcmp(op, "logaddexp")) /* max + log1p(exp(-|a - b|)): no overflow */
            snprintf(e, n, "fmaxf(%s, %s) + log1pf(expf(-fabsf((%s) - (%s))))", a, b, a, b);
        else if (!strcmp(op, "remainder") || !strcmp(op, "mod")) /* x % y: the sign of y */
            snprintf(e, n,
                     "(fmodf(%s, %s) != 0.0f && ((%s) < 0.0f) != (fmodf(%s, %s) < 0.0f) ? "
                     "fmodf(%s, %s) + (%s) : fmodf(%s, %s))",
                     a, b, b, a, b, a, b, b, a, b);
        else
            return -1;
        return 0;
    }
    return -1;
}

/* "const float *__restrict__ in0, ..." */
void kfw_ew_params(struct kf_buf *b, int n, const char *restrict_kw) {
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "const float *%s in%d, ", restrict_kw, k);
    kf_buf_printf(b, "float *%s out, int64_t n", restrict_kw);
}

static void indent(struct kf_buf *b, const char *body, const char *pad) {
    const char *p = body;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        kf_buf_printf(b, "%s%.*s\n", pad, (int)len, p);
        p += len + (nl ? 1 : 0);
    }
}

void kfw_ew_elem(struct kf_buf *b, const char *body, int n, const char *qual) {
    char *cpu = strstr(qual, "__device__") ? NULL : kfw_cpu_math(b, body);
    if (cpu)
        body = cpu;
    kf_buf_printf(b, "%s float kf_elem(", qual);
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "%sfloat x%d", k ? ", " : "", k);
    kf_buf_printf(b, ") {\n");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "    const float in%d_i = x%d;\n", k, k);
    /* the body reads inK[i] and writes out[i]: rename to locals */
    struct kf_buf fixed = {0};
    for (const char *p = body; *p;) {
        if (p[0] == 'i' && p[1] == 'n' && p[2] >= '0' && p[2] <= '9') {
            char *end;
            long k = strtol(p + 2, &end, 10);
            if (strncmp(end, "[i]", 3) == 0) {
                kf_buf_printf(&fixed, "in%ld_i", k);
                p = end + 3;
                continue;
            }
        }
        if (strncmp(p, "out[i] = ", 9) == 0) {
            kf_buf_printf(&fixed, "return ");
            p += 9;
            continue;
        }
        kf_buf_append(&fixed, p, 1);
        p++;
    }
    indent(b, fixed.data ? fixed.data : "", "    ");
    kf_buf_free(&fixed);
    free(cpu);
    kf_buf_printf(b, "}\n");
}

/* One input's value where it broadcasts along the row (nothing for an input given as a value). */
/* Input k is read by the row pass from its pointer pK (not a value, not held by the caller). */
static bool row4_reads(const struct kfw_row4 *r, int k) {
    return (r->value == NULL || r->value[k] == NULL) && (r->held == NULL || !r->held[k]);
}

void kfw_row4_base(struct kf_buf *b, const struct kfw_row4 *r, int k) {
    if (row4_reads(r, k) && !r->along)
        kf_buf_printf(b, "%*sconst float b%d = s%d3 ? 0.0f : p%d[0];\n", r->pad, "", k, k, k);
}

void kfw_row4_body(struct kf_buf *b, const struct kfw_row4 *r, const char *out4) {
    const int pad = r->pad + 4;
    for (int k = 0; k < r->n; k++)
        if (row4_reads(r, k) && r->along)
            kf_buf_printf(b, "%*sconst float4 a%d = reinterpret_cast<const float4 *>(p%d)[c];\n",
                          pad, "", k, k);
        else if (row4_reads(r, k))
            kf_buf_printf(b,
                          "%*sconst float4 a%d = s%d3 ? reinterpret_cast<const float4 *>(p%d)[c] "
                          ": make_float4(b%d, b%d, b%d, b%d);\n",
                          pad, "", k, k, k, k, k, k, k);
    kf_buf_printf(b, "%*sfloat4 y;\n", pad, "");
    for (const char *l = "xyzw"; *l; l++) {
        kf_buf_printf(b, "%*sy.%c = %s(", pad, "", *l, r->elem);
        for (int k = 0; k < r->n; k++) {
            const char *sep = k ? ", " : "";
            if (r->value != NULL && r->value[k] != NULL)
                kf_buf_printf(b, "%s%s", sep, r->value[k]);
            else
                kf_buf_printf(b, "%sa%d.%c", sep, k, *l);
        }
        kf_buf_printf(b, ");\n");
    }
    kf_buf_printf(b, "%*s%s[c] = y;\n", pad, "", out4);
}

void kfw_row4_check(struct kf_buf *b, const struct kfw_row4 *r, const char *var, const char *rows) {
    kf_buf_printf(b, "    bool %s = %s && ((uintptr_t)out & 15) == 0;\n", var, rows);
    for (int k = 0; k < r->n; k++)
        if (r->value == NULL || r->value[k] == NULL)
            kf_buf_printf(
                b,
                "    %s = %s && (s%d3 == 0 || (s%d3 == 1 && ((uintptr_t)%s%d & 15) == 0 && "
                "(s%d0 | s%d1 | s%d2) %% 4 == 0));\n",
                var, var, k, k, r->in, k, k, k, k);
}

/* body with inK[i] read as inK[0] for each scalar input k (owned; NULL when none is). */
static char *scalar_reads(const char *body, int n, const unsigned char *scalar) {
    bool any = false;
    for (int k = 0; scalar && k < n; k++)
        any = any || scalar[k];
    if (!any)
        return NULL;
    struct kf_buf b = {0};
    for (const char *p = body; *p;) {
        char *end;
        if (p[0] == 'i' && p[1] == 'n' && p[2] >= '0' && p[2] <= '9') {
            long k = strtol(p + 2, &end, 10);
            if (k < n && scalar[k] && strncmp(end, "[i]", 3) == 0) {
                kf_buf_printf(&b, "in%ld[0]", k);
                p = end + 3;
                continue;
            }
        }
        kf_buf_append(&b, p, 1);
        p++;
    }
    return b.data;
}

static char *cpu_kernel(const char *fn, const char *body, int n, const unsigned char *scalar,
                        int v) {
    if (v > 1)
        return NULL;
    char *own = scalar_reads(body, n, scalar);
    if (own)
        body = own;
    struct kf_buf b = {0};
    kf_buf_printf(&b, "// kforge expert, variant %d: one fused elementwise pass, OpenMP%s.\n", v,
                  v == 0 ? " parallel for simd" : " over blocks of 16384, simd inside");
    kf_buf_printf(&b, "#include <cmath>\n#include <cstdint>\n\n");
    char *cpu = kfw_cpu_math(&b, body);
    if (cpu)
        body = cpu;
    kf_buf_printf(&b, "extern \"C\" int %s(", fn);
    kfw_ew_params(&b, n, "__restrict__");
    kf_buf_printf(&b, ") {\n    if (n < 0)\n        return 1;\n");
    if (v == 0) {
        kf_buf_printf(&b, "#pragma omp parallel for simd schedule(static)\n"
                          "    for (int64_t i = 0; i < n; ++i) {\n");
        indent(&b, body, "        ");
        kf_buf_printf(&b, "    }\n");
    } else {
        kf_buf_printf(&b, "#pragma omp parallel for schedule(static)\n"
                          "    for (int64_t s = 0; s < n; s += 16384) {\n"
                          "        const int64_t e = s + 16384 < n ? s + 16384 : n;\n"
                          "#pragma omp simd\n"
                          "        for (int64_t i = s; i < e; ++i) {\n");
        indent(&b, body, "            ");
        kf_buf_printf(&b, "        }\n    }\n");
    }
    kf_buf_printf(&b, "    return 0;\n}\n");
    free(cpu);
    free(own);
    return b.data;
}

/* The float4 kernel of a body's element function: four elements per thread and load. */
static bool is_scalar(const unsigned char *scalar, int k) {
    return scalar != NULL && scalar[k];
}

/* "    const float sK = inK[0];" for each scalar input (read once per thread). */
static void scalar_loads(struct kf_buf *b, int n, const unsigned char *scalar) {
    for (int k = 0; k < n; k++)
        if (is_scalar(scalar, k))
            kf_buf_printf(b, "    const float s%d = in%d[0];\n", k, k);
}

static void vec4_kernel(struct kf_buf *b, int n, const unsigned char *scalar) {
    kf_buf_printf(b, "__global__ void kf_vec4(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b,
                      is_scalar(scalar, k) ? "const float *__restrict__ in%d, "
                                           : "const float4 *__restrict__ in%d, ",
                      k);
    kf_buf_printf(b, "float4 *__restrict__ out, int64_t n4) {\n");
    scalar_loads(b, n, scalar);
    kf_buf_printf(b, "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
                     "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; "
                     "i += stride) {\n");
    for (int k = 0; k < n; k++)
        if (!is_scalar(scalar, k))
            kf_buf_printf(b, "        const float4 a%d = in%d[i];\n", k, k);
    kf_buf_printf(b, "        float4 o;\n");
    const char *lanes = "xyzw";
    for (int l = 0; l < 4; l++) {
        kf_buf_printf(b, "        o.%c = kf_elem(", lanes[l]);
        for (int k = 0; k < n; k++)
            if (is_scalar(scalar, k))
                kf_buf_printf(b, "%ss%d", k ? ", " : "", k);
            else
                kf_buf_printf(b, "%sa%d.%c", k ? ", " : "", k, lanes[l]);
        kf_buf_printf(b, ");\n");
    }
    kf_buf_printf(b, "        out[i] = o;\n    }\n}\n\n");
}

static char *cuda_kernel(const char *fn, const char *body, int n, const unsigned char *scalar,
                         int v) {
    static const int threads[] = {256, 512, 128, 256};
    static const int vec[] = {4, 4, 4, 1};
    if (v > 3)
        return NULL;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert, variant %d: one fused elementwise pass, %d threads per "
                  "block, %s.\n#include <cuda_runtime.h>\n#include <cstdint>\n\nnamespace {\n\n",
                  v, threads[v], vec[v] == 4 ? "float4 loads and stores" : "scalar loads");
    kfw_ew_elem(&b, body, n, "__device__ __forceinline__");
    kf_buf_printf(&b, "\n__global__ void kf_scalar(");
    kfw_ew_params(&b, n, "__restrict__");
    kf_buf_printf(&b, ") {\n");
    scalar_loads(&b, n, scalar);
    kf_buf_printf(&b, "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
                      "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                      "i += stride)\n        out[i] = kf_elem(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, is_scalar(scalar, k) ? "%ss%d" : "%sin%d[i]", k ? ", " : "", k);
    kf_buf_printf(&b, ");\n}\n\n");
    if (vec[v] == 4)
        vec4_kernel(&b, n, scalar);
    kf_buf_printf(&b, "} // namespace\n\nextern \"C\" int %s(", fn);
    kfw_ew_params(&b, n, "");
    kf_buf_printf(&b, ") {\n    if (n <= 0)\n        return n < 0;\n    const int threads = %d;\n",
                  threads[v]);
    if (vec[v] == 4) {
        kf_buf_printf(&b, "    bool aligned = n %% 4 == 0 && ((uintptr_t)out %% 16) == 0");
        for (int k = 0; k < n; k++)
            if (!is_scalar(scalar, k))
                kf_buf_printf(&b, " && ((uintptr_t)in%d %% 16) == 0", k);
        kf_buf_printf(&b,
                      ";\n    if (aligned) {\n        int64_t blocks = (n / 4 + threads - 1) / "
                      "threads;\n        if (blocks > 65535 * 8)\n            blocks = 65535 * 8;\n"
                      "        kf_vec4<<<(unsigned)blocks, threads, 0, 0>>>(");
        for (int k = 0; k < n; k++)
            kf_buf_printf(&b, is_scalar(scalar, k) ? "in%d, " : "(const float4 *)in%d, ", k);
        kf_buf_printf(&b,
                      "(float4 *)out, n / 4);\n        return (int)cudaGetLastError();\n    }\n");
    }
    kf_buf_printf(
        &b, "    int64_t blocks = (n + threads - 1) / threads;\n    if (blocks > 65535 * 8)\n"
            "        blocks = 65535 * 8;\n    kf_scalar<<<(unsigned)blocks, threads, 0, 0>>>(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, "in%d, ", k);
    kf_buf_printf(&b, "out, n);\n    return (int)cudaGetLastError();\n}\n");
    return b.data;
}

char *kfw_ew_kernel(const char *backend, const char *fn, const char *body, int n_inputs,
                    const unsigned char *scalar, int v) {
    return strcmp(backend, "cuda") == 0 ? cuda_kernel(fn, body, n_inputs, scalar, v)
                                        : cpu_kernel(fn, body, n_inputs, scalar, v);
}
