/* expert_cpu_math.c: vectorisable replacements of libm functions for the expert's cpu kernels.
 * glibc's erff is a scalar call that g++ does not vectorise without -ffast-math, so a fused pass
 * calling it ran one element at a time (layer_norm_gelu on cpu at 0.21x of eager, whose GELU is
 * vectorised). kf_erff below is branch-free arithmetic that the simd loops around it vectorise:
 * Abramowitz and Stegun's 7.1.26 (absolute error at most 1.5e-7 in exact arithmetic; about
 * 5e-7 in float), with exp(-x^2) from kf_expf (a rounded power of two times a degree-7 Taylor
 * polynomial on [-ln2/2, ln2/2], relative error under 1e-7). Measured on this machine: a GELU
 * pass over 4M floats, one thread, 107 ms with erff and 6.3 ms with kf_erff. expf, scalar too,
 * becomes kf_expf (sigmoid, SiLU, softplus and the like), and tanhf kf_tanhf (from kf_expf; its
 * error about 1e-6 of the value where the two exponentials' difference is small). fmaxf and
 * fminf (ReLU, clamps, hardtanh) are library calls too without -ffinite-math-only, and become
 * the selects kf_fmaxf and kf_fminf, with the same answer where one operand is NaN. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"

static const char CPU_NOTRAP[] =
    "// what follows may compute both sides of a select: no floating-point traps are kept, so\n"
    "// g++ vectorises the loops that call these (with traps on, an exp over 4M floats took 13 ms\n"
    "// on one thread, 2.0 without); the values are the same\n"
    "#pragma GCC optimize(\"no-trapping-math\")\n";

static const char CPU_ERF[] =
    "// exp and erf that vectorise (expert_cpu_math.c): glibc's erff is a scalar call\n"
    "// past float's range (x > 88.7228): +inf, as expf; below -87: 2^-126 or less, as 2^-126 "
    "times\n"
    "// e^r (under 1.2e-38 off); 2^k as two halves, each a normal float for k up to 128\n"
    "static inline float kf_expf(float x0) {\n"
    "    const float x = x0 < -87.0f ? -87.0f : x0 > 88.72283935546875f ? 88.72283935546875f : "
    "x0;\n"
    "    const float k = rintf(x * 1.44269504088896341f);  // x = k ln2 + r\n"
    "    const float r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-06f;\n"
    "    float p = 1.0f / 5040.0f;\n"
    "    p = p * r + 1.0f / 720.0f;\n"
    "    p = p * r + 1.0f / 120.0f;\n"
    "    p = p * r + 1.0f / 24.0f;\n"
    "    p = p * r + 1.0f / 6.0f;\n"
    "    p = p * r + 0.5f;\n"
    "    p = p * r + 1.0f;\n"
    "    p = p * r + 1.0f;\n"
    "    const int32_t k1 = (int32_t)k / 2, e1 = (k1 + 127) << 23, e2 = ((int32_t)k - k1 + 127) << "
    "23;\n"
    "    float s1, s2;\n"
    "    __builtin_memcpy(&s1, &e1, sizeof s1);\n"
    "    __builtin_memcpy(&s2, &e2, sizeof s2);\n"
    "    return x0 > 88.72283935546875f ? __builtin_inff() : p * s1 * s2;\n"
    "}\n\n"
    "static inline float kf_erff(float x) {\n"
    "    const float a = fabsf(x);\n"
    "    const float t = 1.0f / (1.0f + 0.3275911f * a);\n"
    "    const float q = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t -\n"
    "                      0.284496736f) * t + 0.254829592f) * t;\n"
    "    return copysignf(1.0f - q * kf_expf(-a * a), x);\n"
    "}\n\n"
    "// (1 - e^-2a) / (1 + e^-2a) of a = |x|; below a = 1/16, where the difference loses bits, "
    "its odd\n"
    "// series to a^7 (the next term under 3e-13)\n"
    "static inline float kf_tanhf(float x) {\n"
    "    const float a = fabsf(x), a2 = a * a;\n"
    "    const float e = kf_expf(-2.0f * a);\n"
    "    const float p = a + a * a2 * (-1.0f / 3.0f + a2 * (2.0f / 15.0f + a2 * (-17.0f / "
    "315.0f)));\n"
    "    return copysignf(a < 0.0625f ? p : (1.0f - e) / (1.0f + e), x);\n"
    "}\n\n"
    "// fmaxf and fminf as selects (glibc's are calls, which g++ does not vectorise: a clamp\n"
    "// over 4M floats took 19 ms); as theirs, the number where one of the two is NaN\n"
    "static inline float kf_fmaxf(float a, float b) {\n"
    "    return a > b || b != b ? a : b;\n"
    "}\n\n"
    "static inline float kf_fminf(float a, float b) {\n"
    "    return a < b || b != b ? a : b;\n"
    "}\n\n";

/* An identifier character: a call erff( is renamed only where it starts a name. */
static int ident(char c) {
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool kfw_cpu_math_used(const char *body) {
    return body && (strstr(body, "erff(") != NULL || strstr(body, "expf(") != NULL ||
                    strstr(body, "tanhf(") != NULL || strstr(body, "fmaxf(") != NULL ||
                    strstr(body, "fminf(") != NULL);
}

void kfw_cpu_math_defs(struct kf_buf *b) {
    kf_buf_printf(b, "%s%s", CPU_NOTRAP, CPU_ERF);
}

void kfw_cpu_math_pragma(struct kf_buf *b) {
    kf_buf_printf(b, "%s", CPU_NOTRAP);
}

char *kfw_cpu_math(struct kf_buf *b, const char *body) {
    if (!kfw_cpu_math_used(body))
        return NULL;
    struct kf_buf out = {0};
    for (const char *p = body; *p;) {
        bool call = p == body || !ident(p[-1]);
        if (call && (strncmp(p, "erff(", 5) == 0 || strncmp(p, "expf(", 5) == 0 ||
                     strncmp(p, "fmaxf(", 6) == 0 || strncmp(p, "fminf(", 6) == 0)) {
            const size_t len = p[1] == 'm' ? 6 : 5;
            kf_buf_printf(&out, "kf_%.*s", (int)len, p);
            p += len;
            continue;
        }
        if (call && strncmp(p, "tanhf(", 6) == 0) {
            kf_buf_printf(&out, "kf_tanhf(");
            p += 6;
            continue;
        }
        kf_buf_append(&out, p, 1);
        p++;
    }
    if (out.data == NULL)
        return NULL;
    kfw_cpu_math_defs(b);
    return out.data;
}
