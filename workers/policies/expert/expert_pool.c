/* expert_pool.c: the expert's generator for 2-D max and average pooling (nn.MaxPool2d,
 * nn.AvgPool2d, F.max_pool2d, F.avg_pool2d, torch.max_pool2d, torch.avg_pool2d), see
 * expert_ops.h. The window (kernel_size, stride, padding, dilation for max) and the avg options
 * (count_include_pad, divisor_override) are constants of the kernel; ceil_mode only changes the
 * output's size, which the Python lines work out at run time from the input's. Padding counts
 * as -inf for max (NaN propagates as in PyTorch) and as zeros or nothing for avg. Kernels take
 * (x, y, planes, h, w, oh, ow), planes being every dim before the last two.
 * cuda: one, two or four adjacent outputs per thread. cpu: OpenMP over planes, or over planes x
 * output rows. return_indices is not supported.
 * Nothing is kept between calls: the node is only read, py is the caller's (appended to), and
 * each source is built in a fresh buffer that the caller owns and frees. */
#include "expert_ops.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"

struct pool_params {
    bool max;
    long k[2], s[2], p[2], d[2];
    bool ceil, count_pad;
    long divisor; /* divisor_override, 0 when none */
    bool one_d;   /* a 1-D pooling: the 2-D one of rows of height 1 (k, s, d 1 and p 0 down) */
};

/* Whether node is a 2-D pooling: 1 max, 2 avg, 3 max with indices (refused), 0 neither; 4 +
 * (1 or 2) for a 1-D one; *module for nn.*Pool2d and nn.*Pool1d. */
static int pool_kind(const json_t *node, bool *module) {
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
    if (!strcmp(s, "MaxPool2d") || !strcmp(s, "max_pool2d"))
        return 1;
    if (!strcmp(s, "max_pool2d_with_indices") || !strcmp(s, "max_pool1d_with_indices"))
        return 3;
    if (!strcmp(s, "AvgPool2d") || !strcmp(s, "avg_pool2d"))
        return 2;
    if (!strcmp(s, "MaxPool1d") || !strcmp(s, "max_pool1d"))
        return 4 + 1;
    return !strcmp(s, "AvgPool1d") || !strcmp(s, "avg_pool1d") ? 4 + 2 : 0;
}

/* The window's numbers into p; 0, or -1 with what is wrong in detail. */
static int parse_window(const json_t *node, bool module, struct pool_params *p, const char *name,
                        char *detail, size_t dlen) {
    static const long zero[2] = {0, 0}, one[2] = {1, 1};
    const json_t *dil = p->max ? kfx_arg_param(node, module, 4, "dilation") : NULL;
    if (kfx_arg_pair(kfx_arg_param(node, module, 1, "kernel_size"), zero, p->k) != 0 ||
        kfx_arg_pair(kfx_arg_param(node, module, 2, "stride"), p->k, p->s) != 0 ||
        kfx_arg_pair(kfx_arg_param(node, module, 3, "padding"), zero, p->p) != 0 ||
        kfx_arg_pair(dil, one, p->d) != 0) {
        snprintf(detail, dlen,
                 "pooling %s: kernel_size, stride, padding or dilation not understood", name);
        return -1;
    }
    if (p->one_d) { /* rows of height 1: the window spans one row */
        p->k[0] = p->s[0] = p->d[0] = 1;
        p->p[0] = 0;
    }
    for (int i = 0; i < 2; i++) {
        long reach = (p->k[i] - 1) * p->d[i] + 1; /* the window's extent */
        if (p->k[i] < 1 || p->s[i] < 1 || p->d[i] < 1 || p->p[i] < 0 ||
            p->p[i] > (p->max ? reach : p->k[i]) / 2) {
            snprintf(detail, dlen,
                     "pooling %s with kernel %ldx%ld, stride %ldx%ld, padding %ldx%ld, dilation "
                     "%ldx%ld (not valid: padding at most half the kernel)",
                     name, p->k[0], p->k[1], p->s[0], p->s[1], p->p[0], p->p[1], p->d[0], p->d[1]);
            return -1;
        }
    }
    return 0;
}

/* The node's parameters into p; 0, or -1 with what is not supported in detail. */
static int parse(const json_t *node, struct pool_params *p, char *detail, size_t dlen) {
    bool module;
    const char *name = kfx_arg_name(node);
    int kind = pool_kind(node, &module);
    if (kind == 0) {
        snprintf(detail, dlen, "node %s is not a 2-D max or avg pooling", name);
        return -1;
    }
    memset(p, 0, sizeof(*p));
    p->one_d = kind > 4;
    kind -= p->one_d ? 4 : 0;
    if (kind == 3 ||
        (kind == 1 && json_is_true(kfx_arg_param(node, module, 6, "return_indices")))) {
        snprintf(detail, dlen, "max_pool %s with return_indices (not supported)", name);
        return -1;
    }
    p->max = kind == 1;
    if (parse_window(node, module, p, name, detail, dlen) != 0)
        return -1;
    p->ceil = json_is_true(kfx_arg_param(node, module, p->max ? 5 : 4, "ceil_mode"));
    if (p->max)
        return 0;
    char what[160];
    snprintf(what, sizeof(what), "avg_pool2d %s", name);
    return kfx_arg_avg_opts(node, module, what, &p->count_pad, &p->divisor, detail, dlen);
}

/* The output size along dim i (0: height, 1: width) as PyTorch's pooling_output_shape: the
 * Python lines setting @_<var> from @_<in>. */
static void out_size(struct kf_buf *t, const struct pool_params *p, int i, const char *var,
                     const char *in) {
    long cst = 2 * p->p[i] - p->d[i] * (p->k[i] - 1) - 1 + (p->ceil ? p->s[i] - 1 : 0);
    kf_buf_printf(t, "        @_%s = (@_%s %c %ld) // %ld + 1%s\n", var, in, cst < 0 ? '-' : '+',
                  cst < 0 ? -cst : cst, p->s[i], p->ceil ? "  # ceil_mode" : "");
    if (p->ceil)
        kf_buf_printf(t,
                      "        if (@_%s - 1) * %ld >= @_%s + %ld:  # the last window starts in the "
                      "padding\n"
                      "            @_%s -= 1\n",
                      var, p->s[i], in, p->p[i], var);
}

int kfx_pool_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen) {
    if (kfx_pool3d_is(c->node))
        return kfx_pool3d_py(c, py, detail, dlen);
    struct pool_params p;
    if (parse(c->node, &p, detail, dlen) != 0)
        return -1;
    if (kfx_arg_operands(c, 1, "pooling", "", detail, dlen) != 0)
        return -1;
    struct kf_buf t = {0};
    if (p.one_d) { /* [.., L] as planes of one row */
        kf_buf_printf(&t, "        @_x = `0\n"
                          "        if @_x.dim() not in (2, 3):\n"
                          "            raise ValueError(f\"$: 1-D pooling of {tuple(@_x.shape)}: a "
                          "2-D or 3-D input only\")\n"
                          "        @_h, @_w = 1, @_x.shape[-1]\n");
        out_size(&t, &p, 1, "ow", "w");
        kf_buf_printf(&t, "        if @_ow <= 0:\n"
                          "            raise ValueError(f\"$: 1-D pooling of {tuple(@_x.shape)}: "
                          "the output would be empty\")\n"
                          "        @ = @_x.new_empty((*@_x.shape[:-1], @_ow))\n"
                          "        self.k.$(@_x, @, @_x.shape[:-1].numel(), 1, @_w, 1, @_ow)\n");
        return kfx_arg_emit(py, &t, c);
    }
    kf_buf_printf(&t, "        @_x = `0\n"
                      "        if @_x.dim() not in (3, 4):\n"
                      "            raise ValueError(f\"$: 2-D pooling of {tuple(@_x.shape)}: a 3-D "
                      "or 4-D input only\")\n"
                      "        @_h, @_w = @_x.shape[-2], @_x.shape[-1]\n");
    out_size(&t, &p, 0, "oh", "h");
    out_size(&t, &p, 1, "ow", "w");
    kf_buf_printf(&t, "        if @_oh <= 0 or @_ow <= 0:\n"
                      "            raise ValueError(f\"$: 2-D pooling of {tuple(@_x.shape)}: the "
                      "output would be empty\")\n"
                      "        @ = @_x.new_empty((*@_x.shape[:-2], @_oh, @_ow))\n"
                      "        self.k.$(@_x, @, @_x.shape[:-2].numel(), @_h, @_w, @_oh, @_ow)\n");
    return kfx_arg_emit(py, &t, c);
}

/* ---- the generated sources ---- */

/* avg: `QUAL int64_t divisor(h, w, oy, ox)`, PyTorch's divisor of output (oy, ox), which
 * window() and the pair kernel's finish() divide by. */
static void divisor_fn(struct kf_buf *b, const char *qual) {
    kf_buf_printf(b,
                  "// As PyTorch: divisor_override, else the window clipped to the padded image\n"
                  "// (count_include_pad), else the part of it inside the image.\n"
                  "%s int64_t divisor(int64_t h, int64_t w, int64_t oy, int64_t ox) {\n"
                  "    if (kDivisor != 0)\n"
                  "        return kDivisor;\n"
                  "    const int64_t y0 = oy * SH - PH, x0 = ox * SW - PW;\n"
                  "    const int64_t y1 = y0 + KH < h + PH ? y0 + KH : h + PH;\n"
                  "    const int64_t x1 = x0 + KW < w + PW ? x0 + KW : w + PW;\n"
                  "    if (kCountPad)\n"
                  "        return (y1 - y0) * (x1 - x0);\n"
                  "    const int64_t ya = y0 > 0 ? y0 : 0, xa = x0 > 0 ? x0 : 0;\n"
                  "    const int64_t yb = y1 < h ? y1 : h, xb = x1 < w ? x1 : w;\n"
                  "    return (yb - ya) * (xb - xa);\n"
                  "}\n",
                  qual);
}

/* The window's constants and `QUAL float window(in, h, w, oy, ox)`: one output of one plane. */
static void window_fn(struct kf_buf *b, const struct pool_params *p, const char *qual) {
    kf_buf_printf(b,
                  "constexpr int64_t KH = %ld, KW = %ld, SH = %ld, SW = %ld, PH = %ld, PW = %ld, "
                  "DH = %ld, DW = %ld;\n",
                  p->k[0], p->k[1], p->s[0], p->s[1], p->p[0], p->p[1], p->d[0], p->d[1]);
    if (!p->max) {
        kf_buf_printf(b,
                      "constexpr bool kCountPad = %s; // count_include_pad\n"
                      "constexpr int64_t kDivisor = %ld; // divisor_override, 0: none\n\n",
                      p->count_pad ? "true" : "false", p->divisor);
        divisor_fn(b, qual);
    }
    kf_buf_printf(b,
                  "\n// Output (oy, ox) of the plane at in (h x w).\n"
                  "%s float window(const float *__restrict in, int64_t h, int64_t w, int64_t oy, "
                  "int64_t ox) {\n"
                  "    const int64_t y0 = oy * SH - PH, x0 = ox * SW - PW;\n"
                  "    const bool inside = y0 >= 0 && y0 + (KH - 1) * DH < h && x0 >= 0 && "
                  "x0 + (KW - 1) * DW < w;\n",
                  qual);
    if (p->max) {
        kf_buf_printf(
            b, "%s",
            "    float m = -INFINITY; // padding never wins\n"
            "    for (int64_t i = 0; i < KH; ++i) {\n"
            "        const int64_t yy = y0 + i * DH;\n"
            "        if (!inside && (yy < 0 || yy >= h))\n"
            "            continue;\n"
            "        for (int64_t j = 0; j < KW; ++j) {\n"
            "            const int64_t xx = x0 + j * DW;\n"
            "            if (!inside && (xx < 0 || xx >= w))\n"
            "                continue;\n"
            "            const float v = in[yy * w + xx];\n"
            "            m = (v > m || v != v) ? v : m; // NaN propagates, as in PyTorch\n"
            "        }\n"
            "    }\n"
            "    return m;\n"
            "}\n\n");
        return;
    }
    kf_buf_printf(b, "%s",
                  "    if (inside) {\n"
                  "        float s = 0.0f;\n"
                  "        for (int64_t i = 0; i < KH; ++i) {\n"
                  "            for (int64_t j = 0; j < KW; ++j)\n"
                  "                s += in[(y0 + i) * w + x0 + j];\n"
                  "        }\n"
                  "        return s / static_cast<float>(kDivisor != 0 ? kDivisor : KH * KW);\n"
                  "    }\n"
                  "    const int64_t y1 = y0 + KH < h + PH ? y0 + KH : h + PH;\n"
                  "    const int64_t x1 = x0 + KW < w + PW ? x0 + KW : w + PW;\n"
                  "    const int64_t ya = y0 > 0 ? y0 : 0, xa = x0 > 0 ? x0 : 0;\n"
                  "    const int64_t yb = y1 < h ? y1 : h, xb = x1 < w ? x1 : w;\n"
                  "    float s = 0.0f;\n"
                  "    for (int64_t yy = ya; yy < yb; ++yy) {\n"
                  "        for (int64_t xx = xa; xx < xb; ++xx)\n"
                  "            s += in[yy * w + xx];\n"
                  "    }\n"
                  "    return s / static_cast<float>(divisor(h, w, oy, ox));\n"
                  "}\n\n");
}

static void head(struct kf_buf *b, const struct kfx_call *c, const struct pool_params *p,
                 const char *how) {
    kf_buf_printf(b,
                  "// kforge expert: %s, 2-D %s pooling (window %ldx%ld, stride %ldx%ld, padding "
                  "%ldx%ld, dilation %ldx%ld), %s.\n"
                  "// y[plane][oy][ox] from x[plane] (h x w) for every plane (the dims before the "
                  "last two).\n"
                  "#include <cmath>\n#include <cstdint>\n",
                  c->fn, p->max ? "max" : "average", p->k[0], p->k[1], p->s[0], p->s[1], p->p[0],
                  p->p[1], p->d[0], p->d[1], how);
}

/* Whether the window allows the pair kernel: stride 2 along the row, no dilation there, a width
 * of at most 3 and a padding of at most 1 (a pair of outputs reads columns 4q-1..4q+4). */
static bool pair_window(const struct pool_params *p) {
    return p->s[1] == 2 && p->d[1] == 1 && p->k[1] <= 3 && p->p[1] <= 1;
}

/* The pair kernel: outputs 2q and 2q+1 of kRows output rows from the float4 of input columns
 * 4q..4q+3 of each input row their windows cover, the columns on either side from the
 * neighbouring lanes (a shuffle; the warp's edge lanes load theirs): each input row read once
 * per thread, in float4, its pair of row partials taken into every output row whose window
 * holds it. The launcher takes it where the output row is half the input's and the input is
 * 16-byte aligned. */
static const char PAIR[] =
    "constexpr float kPad = %s; // padding's value: never wins a max, adds nothing to a sum\n"
    "__device__ __forceinline__ void take(float &a, float v) {\n"
    "    %s\n"
    "}\n"
    "__device__ __forceinline__ float finish(float a, int64_t h, int64_t w, int64_t oy, int64_t "
    "ox) {\n"
    "%s"
    "}\n\n"
    "template <typename I>\n"
    "__global__ void pool_pair(const float *__restrict__ x, float *__restrict__ y, I h, I w, I "
    "oh,\n"
    "                          I total) {\n"
    "    const I w4 = w / 4, stride = static_cast<I>(gridDim.x) * blockDim.x;\n"
    "    const I ohr = (oh + kRows - 1) / kRows; // row blocks per plane\n"
    "    const int lane = threadIdx.x & 31;\n"
    "    // warp-uniform trips: every lane takes part in the shuffles\n"
    "    for (I b = static_cast<I>(blockIdx.x) * blockDim.x; b < total; b += stride) {\n"
    "        const I i = b + threadIdx.x;\n"
    "        const bool on = i < total;\n"
    "        const I q = i %% w4, t = i / w4, oy = t %% ohr * kRows, plane = t / ohr;\n"
    "        const float *in = x + (on ? plane * h * w : 0);\n"
    "        float a0[kRows], a1[kRows];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < kRows; ++r)\n"
    "            a0[r] = a1[r] = kPad;\n"
    "#pragma unroll\n"
    "        for (int a = 0; a < (kRows - 1) * SH + (KH - 1) * DH + 1; ++a) {\n"
    "            const int64_t yy = (int64_t)oy * SH - PH + a;\n"
    "            const bool row = on && yy >= 0 && yy < (int64_t)h;\n"
    "            const float *src = in + (row ? yy : 0) * (int64_t)w;\n"
    "            const float4 v = row ? __ldg(reinterpret_cast<const float4 *>(src) + q)\n"
    "                                 : make_float4(kPad, kPad, kPad, kPad);\n"
    "            float e[6] = {kPad, v.x, v.y, v.z, v.w, kPad}; // columns 4q-1 .. 4q+4\n"
    "            if (PW == 1) {\n"
    "                e[0] = __shfl_up_sync(0xffffffffu, v.w, 1);\n"
    "                if (lane == 0 || q == 0)\n"
    "                    e[0] = row && q > 0 ? src[4 * q - 1] : kPad;\n"
    "            }\n"
    "            if (PW == 0 && KW == 3) {\n"
    "                e[5] = __shfl_down_sync(0xffffffffu, v.x, 1);\n"
    "                if (lane == 31 || q + 1 == w4)\n"
    "                    e[5] = row && q + 1 < w4 ? src[4 * q + 4] : kPad;\n"
    "            }\n"
    "            if (!row)\n"
    "                continue;\n"
    "            float h0 = kPad, h1 = kPad; // the row's part of each window of the pair\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < KW; ++j) {\n"
    "                take(h0, e[1 - PW + j]);\n"
    "                take(h1, e[3 - PW + j]);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < kRows; ++r) {\n"
    "                const int rel = a - r * (int)SH; // row a in output row r's window?\n"
    "                if (rel >= 0 && rel %% DH == 0 && rel / DH < KH) {\n"
    "                    take(a0[r], h0);\n"
    "                    take(a1[r], h1);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < kRows; ++r)\n"
    "            if (on && oy + r < oh)\n"
    "                reinterpret_cast<float2 *>(y + ((int64_t)plane * oh + oy + r) * (w / 2))[q] "
    "=\n"
    "                    make_float2(finish(a0[r], h, w, oy + r, 2 * (int64_t)q),\n"
    "                                finish(a1[r], h, w, oy + r, 2 * (int64_t)q + 1));\n"
    "    }\n"
    "}\n\n";

/* avg: the sum over PyTorch's divisor (window_fn's divisor()); max: the maximum itself */
static const char PAIR_AVG[] = "    return a / static_cast<float>(divisor(h, w, oy, ox));\n";

/* The launcher's branch to the pair kernel: rows of a multiple of 4, output rows of half. */
static const char PAIR_LAUNCH[] =
    "    if (w % 4 == 0 && ow * 2 == w && ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 7) == 0) {\n"
    "        const int64_t pairs = planes * ((oh + kRows - 1) / kRows) * (w / 4);\n"
    "        int64_t nb = (pairs + kPairThreads - 1) / kPairThreads;\n"
    "        nb = nb < (int64_t{1} << 20) ? nb : (int64_t{1} << 20);\n"
    "        if (fits)\n"
    "            pool_pair<uint32_t><<<(unsigned)nb, kPairThreads, 0, 0>>>(\n"
    "                x, y, (uint32_t)h, (uint32_t)w, (uint32_t)oh, (uint32_t)pairs);\n"
    "        else\n"
    "            pool_pair<int64_t><<<(unsigned)nb, kPairThreads, 0, 0>>>(x, y, h, w, oh, pairs);\n"
    "        return (int)cudaGetLastError();\n"
    "    }\n";

static char *cuda_src(const struct kfx_call *c, const struct pool_params *p, int v) {
    /* outputs per thread along a row: more loads in flight per thread, and a window's
     * columns shared with its neighbour's read once from cache; variants 0 and 1 take the pair
     * kernel where the window and the shapes allow it */
    static const int threads[] = {256, 256, 128}, per[] = {2, 4, 1}, pair_threads[] = {256, 256};
    if (v < 0 || v > 2)
        return NULL;
    const bool pair = v < 2 && pair_window(p);
    struct kf_buf b = {0};
    char how[160];
    snprintf(how, sizeof(how),
             "variant %d: %s%d adjacent output%s per thread, %d threads per block", v,
             pair ? "float4 pairs where the shapes allow, else " : "", per[v],
             per[v] == 1 ? "" : "s", threads[v]);
    head(&b, c, p, how);
    kf_buf_printf(&b,
                  "#include <cuda_runtime.h>\n\nnamespace {\n\nconstexpr int kThreads = %d;\n"
                  "constexpr int kPer = %d; // adjacent outputs of a row per thread\n",
                  threads[v], per[v]);
    window_fn(&b, p, "__device__ __forceinline__");
    if (pair) {
        /* output rows per thread: on the H200, avg 3x3/2 pooling 0.96 ms with 4 rows, 1.02
         * with 2, 1.09 with 1; max 1.00 ms with 2, 1.02 with 4 (256 threads) */
        const int rows = v == 0 ? (p->max ? 2 : 4) : (p->max ? 4 : 2);
        kf_buf_printf(&b, "constexpr int kPairThreads = %d, kRows = %d;\n", pair_threads[v], rows);
        kf_buf_printf(
            &b, PAIR, p->max ? "-INFINITY" : "0.0f",
            p->max ? "a = (v > a || v != v) ? v : a; // NaN propagates, as in PyTorch" : "a += v;",
            p->max ? "    (void)h, (void)w, (void)oy, (void)ox;\n    return a;\n" : PAIR_AVG);
    }
    kf_buf_printf(
        &b,
        "// I: the index type, 32-bit unsigned where every index fits (its divisions cost a\n"
        "// fraction of 64-bit ones, and there are three per output)\n"
        "template <typename I>\n"
        "__global__ void pool(const float *__restrict__ x, float *__restrict__ y, I h, I w, I oh, "
        "I ow,\n"
        "                     I total) {\n"
        "    const I stride = static_cast<I>(gridDim.x) * blockDim.x;\n"
        "    const I owp = (ow + kPer - 1) / kPer; // thread columns per output row\n"
        "    for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += "
        "stride) {\n"
        "        const I ox = i %% owp * kPer, t = i / owp, oy = t %% oh, plane = t / oh;\n"
        "        const float *in = x + plane * h * w;\n"
        "        float *out = y + t * ow;\n"
        "#pragma unroll\n"
        "        for (int j = 0; j < kPer; ++j)\n"
        "            if (kPer == 1 || ox + j < ow)\n"
        "                out[ox + j] = window(in, h, w, oy, ox + j);\n"
        "    }\n"
        "}\n\n"
        "} // namespace\n\n"
        "extern \"C\" int %s(const float *x, float *y, int64_t planes, int64_t h, int64_t w, "
        "int64_t oh,\n"
        "        int64_t ow) {\n"
        "    if (planes < 0 || h < 0 || w < 0 || oh < 0 || ow < 0)\n"
        "        return (int)cudaErrorInvalidValue;\n"
        "    if (planes == 0 || oh == 0 || ow == 0)\n"
        "        return (int)cudaGetLastError();\n"
        "    const bool fits = planes * h * w < (int64_t{1} << 31) && planes * oh * ow < "
        "(int64_t{1} << 31);\n"
        "%s"
        "    const int64_t total = planes * oh * ((ow + kPer - 1) / kPer); // threads' work\n"
        "    int64_t blocks = (total + kThreads - 1) / kThreads;\n"
        "    blocks = blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20);\n"
        "    // the 32-bit kernel's indices (the largest is total + stride) must not wrap\n"
        "    if (fits)\n"
        "        pool<uint32_t><<<(unsigned)blocks, kThreads, 0, 0>>>(\n"
        "            x, y, (uint32_t)h, (uint32_t)w, (uint32_t)oh, (uint32_t)ow, "
        "(uint32_t)total);\n"
        "    else\n"
        "        pool<int64_t><<<(unsigned)blocks, kThreads, 0, 0>>>(x, y, h, w, oh, ow, total);\n"
        "    return (int)cudaGetLastError();\n"
        "}\n",
        c->fn, pair ? PAIR_LAUNCH : "");
    return b.data;
}

static char *cpu_src(const struct kfx_call *c, const struct pool_params *p, int v) {
    if (v < 0 || v > 1)
        return NULL;
    struct kf_buf b = {0};
    head(&b, c, p,
         v == 0 ? "variant 0: OpenMP over planes" : "variant 1: OpenMP over planes x output rows");
    kf_buf_printf(&b, "\nnamespace {\n\n");
    window_fn(&b, p, "inline");
    kf_buf_printf(&b,
                  "} // namespace\n\n"
                  "extern \"C\" int %s(const float *__restrict x, float *__restrict y, int64_t "
                  "planes, int64_t h,\n"
                  "        int64_t w, int64_t oh, int64_t ow) {\n"
                  "    if (planes < 0 || h < 0 || w < 0 || oh < 0 || ow < 0)\n"
                  "        return 1;\n"
                  "    if (planes == 0 || oh == 0 || ow == 0)\n"
                  "        return 0;\n",
                  c->fn);
    if (v == 0)
        kf_buf_printf(&b, "%s",
                      "#pragma omp parallel for schedule(static)\n"
                      "    for (int64_t plane = 0; plane < planes; ++plane) {\n"
                      "        const float *in = x + plane * h * w;\n"
                      "        float *out = y + plane * oh * ow;\n"
                      "        for (int64_t oy = 0; oy < oh; ++oy) {\n"
                      "            for (int64_t ox = 0; ox < ow; ++ox)\n"
                      "                out[oy * ow + ox] = window(in, h, w, oy, ox);\n"
                      "        }\n"
                      "    }\n"
                      "    return 0;\n"
                      "}\n");
    else
        kf_buf_printf(&b, "%s",
                      "#pragma omp parallel for schedule(static)\n"
                      "    for (int64_t row = 0; row < planes * oh; ++row) {\n"
                      "        const float *in = x + (row / oh) * h * w;\n"
                      "        const int64_t oy = row % oh;\n"
                      "        for (int64_t ox = 0; ox < ow; ++ox)\n"
                      "            y[row * ow + ox] = window(in, h, w, oy, ox);\n"
                      "    }\n"
                      "    return 0;\n"
                      "}\n");
    return b.data;
}

char *kfx_pool_src(const struct kfx_call *c, int v) {
    if (kfx_pool3d_is(c->node))
        return kfx_pool3d_src(c, v);
    struct pool_params p;
    char detail[256];
    if (parse(c->node, &p, detail, sizeof(detail)) != 0)
        return NULL;
    return strcmp(c->backend, "cuda") == 0 ? cuda_src(c, &p, v) : cpu_src(c, &p, v);
}
