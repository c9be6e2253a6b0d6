/* expert_pool3d.c: the expert's generator for 3-D max and average pooling (nn.MaxPool3d,
 * nn.AvgPool3d, F.max_pool3d, F.avg_pool3d), see expert_ops.h; kfx_pool_py and kfx_pool_src
 * hand these nodes here. The window (kernel_size, stride, padding, dilation for max) and the avg
 * options (count_include_pad, divisor_override) are constants of the kernel; ceil_mode only
 * changes the output's size, which the Python lines work out from the input's as PyTorch does.
 * Padding counts as -inf for max (NaN propagates as in PyTorch) and as zeros or nothing for
 * avg. Kernels take (x, y, planes, d, h, w, od, oh, ow), planes being every dim before the last
 * three. cuda: one output per thread, a grid-stride loop; cpu: OpenMP over output rows.
 * return_indices is not supported.
 * Nothing is kept between calls: the node is only read, py is the caller's (appended to), and
 * each source is built in a fresh buffer that the caller owns and frees. */
#include "expert_ops.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"

struct pool3 {
    bool max, ceil, count_pad;
    long k[3], s[3], p[3], d[3];
    long divisor; /* divisor_override, 0 when none */
};

/* 1 max, 2 avg, 3 max with indices (refused), 0 not a 3-D pooling; *module for nn.*Pool3d. */
static int kind_of(const json_t *node, bool *module) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    *module = op && !strcmp(op, "call_module");
    const char *s = NULL;
    if (*module)
        s = json_string_value(json_object_get(node, "module_type"));
    else if (op && target && !strcmp(op, "call_function"))
        s = kfx_arg_short_name(target);
    if (!s)
        return 0;
    if (!strcmp(s, "MaxPool3d") || !strcmp(s, "max_pool3d"))
        return 1;
    if (!strcmp(s, "max_pool3d_with_indices"))
        return 3;
    return !strcmp(s, "AvgPool3d") || !strcmp(s, "avg_pool3d") ? 2 : 0;
}

int kfx_pool3d_is(const json_t *node) {
    bool module;
    return kind_of(node, &module) != 0;
}

/* An int or a list of 1 or 3 ints into out; def[] when v is absent, null or empty. 0, or -1. */
static int trio(const json_t *v, const long def[3], long out[3]) {
    if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0)) {
        memcpy(out, def, 3 * sizeof(long));
        return 0;
    }
    if (json_is_integer(v)) {
        out[0] = out[1] = out[2] = (long)json_integer_value(v);
        return 0;
    }
    size_t n = json_array_size(v);
    if (n != 1 && n != 3)
        return -1;
    for (size_t i = 0; i < 3; i++) {
        const json_t *e = json_array_get(v, n == 1 ? 0 : i);
        if (!json_is_integer(e))
            return -1;
        out[i] = (long)json_integer_value(e);
    }
    return 0;
}

/* The node's parameters into p: 0, or -1 with what is not supported in detail. Functions:
 * max_pool3d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices) and
 * avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override). */
static int parse(const json_t *node, struct pool3 *p, char *detail, size_t dlen) {
    bool module;
    const char *name = kfx_arg_name(node);
    int kind = kind_of(node, &module);
    memset(p, 0, sizeof(*p));
    if (kind == 0) {
        snprintf(detail, dlen, "node %s is not a 3-D max or avg pooling", name);
        return -1;
    }
    if (kind == 3 ||
        (kind == 1 && json_is_true(kfx_arg_param(node, module, 6, "return_indices")))) {
        snprintf(detail, dlen, "max_pool3d %s with return_indices (not supported)", name);
        return -1;
    }
    p->max = kind == 1;
    static const long zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    if (trio(kfx_arg_param(node, module, 1, "kernel_size"), zero, p->k) != 0 ||
        trio(kfx_arg_param(node, module, 2, "stride"), p->k, p->s) != 0 ||
        trio(kfx_arg_param(node, module, 3, "padding"), zero, p->p) != 0 ||
        trio(p->max ? kfx_arg_param(node, module, 4, "dilation") : NULL, one, p->d) != 0) {
        snprintf(detail, dlen,
                 "pooling %s: kernel_size, stride, padding or dilation not understood", name);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        long reach = (p->k[i] - 1) * p->d[i] + 1;
        if (p->k[i] < 1 || p->s[i] < 1 || p->d[i] < 1 || p->p[i] < 0 ||
            p->p[i] > (p->max ? reach : p->k[i]) / 2) {
            snprintf(detail, dlen,
                     "pooling %s with kernel %ldx%ldx%ld, stride %ldx%ldx%ld, padding %ldx%ldx%ld "
                     "(not valid: padding at most half the kernel)",
                     name, p->k[0], p->k[1], p->k[2], p->s[0], p->s[1], p->s[2], p->p[0], p->p[1],
                     p->p[2]);
            return -1;
        }
    }
    p->ceil = json_is_true(kfx_arg_param(node, module, p->max ? 5 : 4, "ceil_mode"));
    if (p->max)
        return 0;
    char what[160];
    snprintf(what, sizeof(what), "avg_pool3d %s", name);
    return kfx_arg_avg_opts(node, module, what, &p->count_pad, &p->divisor, detail, dlen);
}

int kfx_pool3d_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen) {
    struct pool3 p;
    if (parse(c->node, &p, detail, dlen) != 0 ||
        kfx_arg_operands(c, 1, "pooling", "", detail, dlen) != 0)
        return -1;
    struct kf_buf t = {0};
    kf_buf_printf(&t, "        @_x = `0\n"
                      "        if @_x.dim() not in (4, 5):\n"
                      "            raise ValueError(f\"$: 3-D pooling of {tuple(@_x.shape)}: a 4-D "
                      "or 5-D input only\")\n"
                      "        @_i = @_x.shape[-3:]\n"
                      "        @_o = []\n");
    for (int i = 0; i < 3; i++) {
        /* PyTorch's pooling_output_shape */
        long cst = 2 * p.p[i] - p.d[i] * (p.k[i] - 1) - 1 + (p.ceil ? p.s[i] - 1 : 0);
        kf_buf_printf(&t, "        @_n = (@_i[%d] + %ld) // %ld + 1\n", i, cst, p.s[i]);
        if (p.ceil)
            kf_buf_printf(&t,
                          "        if (@_n - 1) * %ld >= @_i[%d] + %ld:  # ceil_mode: the last "
                          "window starts in the padding\n"
                          "            @_n -= 1\n",
                          p.s[i], i, p.p[i]);
        kf_buf_printf(&t, "        @_o.append(@_n)\n");
    }
    kf_buf_printf(&t, "        if min(@_o) <= 0:\n"
                      "            raise ValueError(f\"$: 3-D pooling of {tuple(@_x.shape)}: the "
                      "output would be empty\")\n"
                      "        @ = @_x.new_empty((*@_x.shape[:-3], *@_o))\n"
                      "        self.k.$(@_x, @, @_x.shape[:-3].numel(), *@_i, *@_o)\n");
    return kfx_arg_emit(py, &t, c);
}

/* The constants and `QUAL float window(x, i, o)`: one output (o: its 3 indices) of one plane
 * x of sizes i. */
static void window_fn(struct kf_buf *b, const struct pool3 *p, const char *qual) {
    kf_buf_printf(b,
                  "constexpr int64_t K0 = %ld, K1 = %ld, K2 = %ld, S0 = %ld, S1 = %ld, S2 = %ld;\n"
                  "constexpr int64_t P0 = %ld, P1 = %ld, P2 = %ld, D0 = %ld, D1 = %ld, D2 = %ld;\n"
                  "constexpr bool kMax = %s, kCountPad = %s;\n"
                  "constexpr int64_t kDivisor = %ld;\n\n",
                  p->k[0], p->k[1], p->k[2], p->s[0], p->s[1], p->s[2], p->p[0], p->p[1], p->p[2],
                  p->d[0], p->d[1], p->d[2], p->max ? "true" : "false",
                  p->count_pad ? "true" : "false", p->divisor);
    kf_buf_printf(
        b,
        "// Output (a, bb, cc) of the plane x of sizes (id, ih, iw): the max over the window "
        "(NaN\n"
        "// wins, as in PyTorch), or its sum over PyTorch's divisor.\n"
        "%s float window(const float *x, int64_t id, int64_t ih, int64_t iw, int64_t a, int64_t "
        "bb,\n"
        "                int64_t cc) {\n"
        "    const int64_t z0 = a * S0 - P0, y0 = bb * S1 - P1, x0 = cc * S2 - P2;\n"
        "    float acc = kMax ? -INFINITY : 0.0f;\n"
        "    for (int64_t i = 0; i < K0; ++i) {\n"
        "        const int64_t z = z0 + i * D0;\n"
        "        if (z < 0 || z >= id)\n"
        "            continue;\n"
        "        for (int64_t j = 0; j < K1; ++j) {\n"
        "            const int64_t y = y0 + j * D1;\n"
        "            if (y < 0 || y >= ih)\n"
        "                continue;\n"
        "            const float *row = x + (z * ih + y) * iw;\n"
        "            for (int64_t k = 0; k < K2; ++k) {\n"
        "                const int64_t xx = x0 + k * D2;\n"
        "                if (xx < 0 || xx >= iw)\n"
        "                    continue;\n"
        "                const float v = row[xx];\n"
        "                if (kMax)\n"
        "                    acc = (v > acc || v != v) && acc == acc ? v : acc;\n"
        "                else\n"
        "                    acc += v;\n"
        "            }\n"
        "        }\n"
        "    }\n"
        "    if (kMax)\n"
        "        return acc;\n"
        "    int64_t div = kDivisor;\n"
        "    if (div == 0) { // the window clipped to the padded volume, or to the volume\n"
        "        const int64_t z1 = z0 + K0 < id + P0 ? z0 + K0 : id + P0;\n"
        "        const int64_t y1 = y0 + K1 < ih + P1 ? y0 + K1 : ih + P1;\n"
        "        const int64_t x1 = x0 + K2 < iw + P2 ? x0 + K2 : iw + P2;\n"
        "        if (kCountPad) {\n"
        "            div = (z1 - z0) * (y1 - y0) * (x1 - x0);\n"
        "        } else {\n"
        "            const int64_t za = z0 > 0 ? z0 : 0, ya = y0 > 0 ? y0 : 0, xa = x0 > 0 ? x0 : "
        "0;\n"
        "            const int64_t zb = z1 < id ? z1 : id, yb = y1 < ih ? y1 : ih, xb = x1 < iw ? "
        "x1 : iw;\n"
        "            div = (zb - za) * (yb - ya) * (xb - xa);\n"
        "        }\n"
        "    }\n"
        "    return acc / (float)div;\n"
        "}\n\n",
        qual);
}

static void signature(struct kf_buf *b, const struct kfx_call *c) {
    kf_buf_printf(b,
                  "extern \"C\" int %s(const float *x, float *y, int64_t planes, int64_t id, "
                  "int64_t ih,\n"
                  "        int64_t iw, int64_t od, int64_t oh, int64_t ow) {\n"
                  "    if (planes < 0 || id <= 0 || ih <= 0 || iw <= 0 || od <= 0 || oh <= 0 || "
                  "ow <= 0)\n"
                  "        return %s;\n",
                  c->fn, strcmp(c->backend, "cuda") == 0 ? "(int)cudaErrorInvalidValue" : "1");
}

char *kfx_pool3d_src(const struct kfx_call *c, int v) {
    struct pool3 p;
    char detail[256];
    if (v != 0 || parse(c->node, &p, detail, sizeof(detail)) != 0)
        return NULL;
    const bool cuda = strcmp(c->backend, "cuda") == 0;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert: %s, %s 3-D pooling on %s: one output per %s.\n"
                  "#include <cmath>\n#include <cstdint>\n%s\nnamespace {\n\n",
                  c->fn, p.max ? "max" : "average", cuda ? "cuda" : "cpu",
                  cuda ? "thread, a grid-stride loop" : "iteration, OpenMP over output rows",
                  cuda ? "#include <cuda_runtime.h>\n" : "");
    window_fn(&b, &p, cuda ? "__device__ inline" : "inline");
    if (cuda)
        kf_buf_printf(&b, "%s",
                      "__global__ void pool(const float *__restrict__ x, float *__restrict__ y,\n"
                      "                     int64_t total, int64_t id, int64_t ih, int64_t iw, "
                      "int64_t od,\n"
                      "                     int64_t oh, int64_t ow) {\n"
                      "    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;\n"
                      "    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + "
                      "threadIdx.x; i < total;\n"
                      "         i += step) {\n"
                      "        const int64_t cc = i % ow, bb = (i / ow) % oh, a = (i / (ow * oh)) "
                      "% od;\n"
                      "        const int64_t plane = i / (ow * oh * od);\n"
                      "        y[i] = window(x + plane * id * ih * iw, id, ih, iw, a, bb, cc);\n"
                      "    }\n"
                      "}\n\n");
    kf_buf_printf(&b, "} // namespace\n\n");
    signature(&b, c);
    if (cuda)
        kf_buf_printf(&b, "%s",
                      "    const int64_t total = planes * od * oh * ow;\n"
                      "    if (total == 0)\n"
                      "        return (int)cudaGetLastError();\n"
                      "    int64_t blocks = (total + 255) / 256;\n"
                      "    blocks = blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20);\n"
                      "    pool<<<(unsigned)blocks, 256, 0, 0>>>(x, y, total, id, ih, iw, od, oh, "
                      "ow);\n"
                      "    return (int)cudaGetLastError();\n"
                      "}\n");
    else
        kf_buf_printf(
            &b, "%s",
            "    const int64_t rows = planes * od * oh;\n"
            "#pragma omp parallel for schedule(static)\n"
            "    for (int64_t r = 0; r < rows; ++r) {\n"
            "        const int64_t bb = r % oh, a = (r / oh) % od, plane = r / (oh * od);\n"
            "        const float *xp = x + plane * id * ih * iw;\n"
            "        for (int64_t cc = 0; cc < ow; ++cc)\n"
            "            y[r * ow + cc] = window(xp, id, ih, iw, a, bb, cc);\n"
            "    }\n"
            "    return 0;\n"
            "}\n");
    return b.data;
}
