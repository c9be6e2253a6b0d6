/* expert_convnd.c: the expert's generator for the convolutions expert_conv.c leaves: 1-D and 3-D
 * ones (nn.Conv1d, nn.Conv3d, F.conv1d, F.conv3d) and transposed ones of 1, 2 or 3 dimensions
 * (nn.ConvTranspose1d/2d/3d, F.conv_transpose1d/2d/3d), see expert_ops.h.
 * Stride, padding ('same' and 'valid' too, for the forward ones), output padding, dilation and
 * groups come from the node and are baked into the kernel; the sizes come from the operands at
 * run time. Every kernel sees a 3-D problem: a 1-D or 2-D one has leading sizes of 1, which is
 * the same memory, so the Python lines pass sizes and no views. Every kernel takes
 * (x, weight, y, n, c, id, ih, iw, oc, kd, kh, kw, od, oh, ow); with an epilogue (cuda: the pass
 * after the convolution, fused by the planner) also that pass's operands and the output
 * (expert_conv_epi.c).
 * cuda: cuDNN's legacy N-d API with CUDNN_FMA_MATH (no TF32); a forward convolution is
 * cudnnConvolutionForward, a transposed one is cudnnConvolutionBackwardData of the forward
 * convolution it transposes (PyTorch's weight layout [C, OC/groups, k..] is that convolution's
 * filter). Plans are cached per shape; the algorithm is cuDNN's heuristics' (variant 0) or its
 * fastest by cudnnFind (variant 1). Variant 0 also races cuDNN's path against an implicit GEMM of
 * our own (expert_conv_igemm.c) on a shape's first call and keeps the faster. What cuDNN cannot
 * express (asymmetric 'same' padding, sizes past int) or declines goes to a direct kernel, one
 * thread per output. cpu: the same gather per output, rows of outputs shared out to the OpenMP
 * threads (one variant). Nothing is kept between calls: the node is only read, py is the caller's
 * (appended to), and each source is built in a fresh buffer that the caller owns and frees. */
#include "expert_ops.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"

struct convnd {
    int rank;        /* the node's spatial dimensions: 1, 2 or 3 */
    bool transposed; /* a transposed convolution */
    bool same;       /* padding='same' (forward, stride 1): worked out from the kernel's size */
    /* per dimension, right-aligned in 3 (the leading ones of a 1-D or 2-D node: 1, 0, 1, 0) */
    long stride[3], pad[3], dil[3], opad[3];
    long groups;
};

/* The rank and kind of node's convolution; 0 when it is not one this file plans. */
static int kind_of(const json_t *node, bool *module, bool *transposed) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = NULL;
    *module = op && !strcmp(op, "call_module");
    if (*module)
        s = json_string_value(json_object_get(node, "module_type"));
    else if (op && !strcmp(op, "call_function") && json_object_get(node, "target"))
        s = kfx_arg_short_name(json_string_value(json_object_get(node, "target")));
    if (s == NULL)
        return 0;
    static const char *const names[2][2][3] = {
        {{"conv1d", "", "conv3d"}, {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}},
        {{"Conv1d", "", "Conv3d"}, {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}}};
    for (int t = 0; t < 2; t++) {
        for (int r = 0; r < 3; r++) {
            if (names[*module][t][r][0] && !strcmp(s, names[*module][t][r])) {
                *transposed = t == 1;
                return r + 1;
            }
        }
    }
    return 0;
}

/* v (an int, or a list of 1 or rank ints; def when absent, null or empty) into out[3 - rank ..]
 * with the leading entries lead. 0, or -1. */
static int triple(const json_t *v, int rank, long def, long lead, long out[3]) {
    for (int i = 0; i < 3; i++)
        out[i] = i < 3 - rank ? lead : def;
    if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
        return 0;
    if (json_is_integer(v)) {
        for (int i = 3 - rank; i < 3; i++)
            out[i] = (long)json_integer_value(v);
        return 0;
    }
    size_t n = json_array_size(v);
    if (n != 1 && n != (size_t)rank)
        return -1;
    for (int i = 3 - rank; i < 3; i++) {
        const json_t *e = json_array_get(v, n == 1 ? 0 : (size_t)(i - (3 - rank)));
        if (!json_is_integer(e))
            return -1;
        out[i] = (long)json_integer_value(e);
    }
    return 0;
}

/* The operator's name as PyTorch spells the function, e.g. "conv_transpose3d". */
static void op_name(const struct convnd *p, char *out, size_t len) {
    snprintf(out, len, "conv%s%dd", p->transposed ? "_transpose" : "", p->rank);
}

/* c's node's parameters into p, and c's operands checked; 0, or -1 with what is not supported
 * in detail. The function's arguments: conv (x, w, bias, stride, padding, dilation, groups);
 * conv_transpose (x, w, bias, stride, padding, output_padding, groups, dilation). */
static int parse(const struct kfx_call *c, struct convnd *p, char *detail, size_t dlen) {
    const json_t *node = c->node;
    bool module;
    const char *name = kfx_arg_name(node);
    memset(p, 0, sizeof(*p));
    p->rank = kind_of(node, &module, &p->transposed);
    if (p->rank == 0) {
        snprintf(detail, dlen, "node %s is not a 1-D, 3-D or transposed convolution", name);
        return -1;
    }
    char what[24];
    op_name(p, what, sizeof(what));
    const char *mode = json_string_value(kfx_arg_param(node, module, 99, "padding_mode"));
    if (module && mode && strcmp(mode, "zeros") != 0) {
        snprintf(detail, dlen, "%s %s with padding_mode %s (not supported)", what, name, mode);
        return -1;
    }
    const size_t dil_at = p->transposed ? 7 : 5;
    const json_t *pad = kfx_arg_param(node, module, 4, "padding");
    const json_t *groups = kfx_arg_param(node, module, 6, "groups");
    const char *pad_s = json_string_value(pad);
    p->same = pad_s && !strcmp(pad_s, "same");
    if (triple(kfx_arg_param(node, module, 3, "stride"), p->rank, 1, 1, p->stride) != 0 ||
        triple(kfx_arg_param(node, module, dil_at, "dilation"), p->rank, 1, 1, p->dil) != 0 ||
        (p->transposed &&
         triple(kfx_arg_param(node, module, 5, "output_padding"), p->rank, 0, 0, p->opad) != 0) ||
        (pad_s ? p->transposed || (strcmp(pad_s, "same") != 0 && strcmp(pad_s, "valid") != 0)
               : triple(pad, p->rank, 0, 0, p->pad) != 0) ||
        (groups && !json_is_null(groups) && !json_is_integer(groups))) {
        snprintf(detail, dlen,
                 "%s %s: stride, padding, output padding, dilation or groups not "
                 "understood",
                 what, name);
        return -1;
    }
    p->groups = json_is_integer(groups) ? (long)json_integer_value(groups) : 1;
    bool ok = p->groups >= 1;
    for (int i = 0; i < 3; i++) {
        ok = ok && p->stride[i] >= 1 && p->dil[i] >= 1 && p->pad[i] >= 0 && p->opad[i] >= 0 &&
             (p->opad[i] < p->stride[i] || p->opad[i] < p->dil[i]) &&
             (!p->same || p->stride[i] == 1);
    }
    if (!ok) {
        snprintf(detail, dlen,
                 "%s %s with stride %ldx%ldx%ld, padding %ldx%ldx%ld, output padding "
                 "%ldx%ldx%ld, dilation %ldx%ldx%ld, groups %ld (not valid)",
                 what, name, p->stride[0], p->stride[1], p->stride[2], p->pad[0], p->pad[1],
                 p->pad[2], p->opad[0], p->opad[1], p->opad[2], p->dil[0], p->dil[1], p->dil[2],
                 p->groups);
        return -1;
    }
    return kfx_arg_operands(c, 2, what, " (x, weight)", detail, dlen);
}

/* A Python tuple of v[0..2]. */
static void py_tuple(struct kf_buf *t, const long v[3]) {
    kf_buf_printf(t, "(%ld, %ld, %ld)", v[0], v[1], v[2]);
}

/* The Python lines with p's numbers in, placeholders still to expand. */
static void py_lines(struct kf_buf *t, const struct convnd *p) {
    const int r = p->rank;
    const long g = p->groups;
    char what[24];
    op_name(p, what, sizeof(what));
    kf_buf_printf(t,
                  "        @_x, @_w = `0, `1\n"
                  "        if @_x.dim() not in (%d, %d) or @_w.dim() != %d:\n"
                  "            raise ValueError(f\"$: %s of {tuple(@_x.shape)} with a weight "
                  "{tuple(@_w.shape)}: a %d-D or %d-D input and a %d-D weight only\")\n"
                  "        @_b = @_x.dim() == %d  # batched\n"
                  "        @_n, @_c = (@_x.shape[0], @_x.shape[1]) if @_b else (1, @_x.shape[0])\n"
                  "        @_i = [1] * %d + list(@_x.shape[-%d:])\n"
                  "        @_k = [1] * %d + list(@_w.shape[2:])\n",
                  r + 1, r + 2, r + 2, what, r + 1, r + 2, r + 2, r + 2, 3 - r, r, 3 - r);
    if (p->transposed)
        kf_buf_printf(t,
                      "        @_oc = @_w.shape[1] * %ld\n"
                      "        if @_w.shape[0] != @_c or @_c %% %ld != 0:\n",
                      g, g);
    else
        kf_buf_printf(t,
                      "        @_oc = @_w.shape[0]\n"
                      "        if @_w.shape[1] * %ld != @_c or @_oc %% %ld != 0:\n",
                      g, g);
    kf_buf_printf(t,
                  "            raise ValueError(f\"$: %s of {tuple(@_x.shape)} with a weight "
                  "{tuple(@_w.shape)} in %ld groups: the channels differ\")\n",
                  what, g);
    kf_buf_printf(t, "        @_s, @_p, @_d, @_op = ");
    py_tuple(t, p->stride);
    kf_buf_printf(t, ", ");
    py_tuple(t, p->pad);
    kf_buf_printf(t, ", ");
    py_tuple(t, p->dil);
    kf_buf_printf(t, ", ");
    py_tuple(t, p->opad);
    kf_buf_printf(t, "\n");
    if (p->same)
        kf_buf_printf(t, "        @_o = list(@_i)  # 'same'\n");
    else if (p->transposed)
        kf_buf_printf(t, "        @_o = [(@_i[j] - 1) * @_s[j] - 2 * @_p[j] + @_d[j] * (@_k[j] - "
                         "1) + @_op[j] + 1 for j in range(3)]\n");
    else
        kf_buf_printf(t, "        @_o = [(@_i[j] + 2 * @_p[j] - @_d[j] * (@_k[j] - 1) - 1) // "
                         "@_s[j] + 1 for j in range(3)]\n");
    kf_buf_printf(t,
                  "        if min(@_o) <= 0 or min(@_i) <= 0:\n"
                  "            raise ValueError(f\"$: %s of {tuple(@_x.shape)} with a weight "
                  "{tuple(@_w.shape)}: the output would be empty\")\n"
                  "        @ = @_x.new_empty(((@_n,) if @_b else ()) + (@_oc, *@_o[%d:]))\n"
                  "        self.k.$(@_x, @_w, @, @_n, @_c, *@_i, @_oc, *@_k, *@_o)\n",
                  what, 3 - r);
}

int kfx_convnd_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen) {
    struct convnd p;
    if (parse(c, &p, detail, dlen) != 0)
        return -1;
    struct kf_buf t = {0};
    py_lines(&t, &p);
    return kfx_arg_emit(py, &t, c);
}

/* ---- the generated sources ---- */

/* The constants of p, the geometry, its checks and the gather of one output (host and device:
 * KF_HD), shared by both backends. */
static void src_common(struct kf_buf *b, const struct convnd *p) {
    kf_buf_printf(b,
                  "constexpr bool kTransposed = %s, kSame = %s;\n"
                  "constexpr int64_t kS[3] = {%ld, %ld, %ld}, kP[3] = {%ld, %ld, %ld}, "
                  "kD[3] = {%ld, %ld, %ld};\n"
                  "constexpr int64_t kOP[3] = {%ld, %ld, %ld}, kG = %ld;\n\n",
                  p->transposed ? "true" : "false", p->same ? "true" : "false", p->stride[0],
                  p->stride[1], p->stride[2], p->pad[0], p->pad[1], p->pad[2], p->dil[0], p->dil[1],
                  p->dil[2], p->opad[0], p->opad[1], p->opad[2], p->groups);
    kf_buf_printf(
        b, "%s",
        "// Sizes per dimension (d, h, w), and the padding before each (after: pa).\n"
        "struct Geo {\n"
        "    int64_t n, c, oc;\n"
        "    int64_t i[3], k[3], o[3], pb[3], pa[3], s[3], d[3]; // s, d: kS, kD (device code's)\n"
        "};\n\n"
        "// g's padding worked out, and whether the sizes are those of this convolution.\n"
        "bool shape_ok(Geo &g) {\n"
        "    if (g.n < 0 || g.c <= 0 || g.oc <= 0 || g.c % kG != 0 || g.oc % kG != 0)\n"
        "        return false;\n"
        "    for (int j = 0; j < 3; ++j) {\n"
        "        if (g.i[j] <= 0 || g.k[j] <= 0 || g.o[j] <= 0)\n"
        "            return false;\n"
        "        g.s[j] = kS[j];\n"
        "        g.d[j] = kD[j];\n"
        "        const int64_t span = kD[j] * (g.k[j] - 1);\n"
        "        g.pb[j] = kSame ? span / 2 : kP[j];\n"
        "        g.pa[j] = kSame ? span - span / 2 : kP[j];\n"
        "        const int64_t want = kTransposed\n"
        "                                 ? (g.i[j] - 1) * kS[j] - 2 * kP[j] + span + kOP[j] + 1\n"
        "                                 : (g.i[j] + g.pb[j] + g.pa[j] - span - 1) / kS[j] + 1;\n"
        "        if (g.o[j] != want)\n"
        "            return false;\n"
        "    }\n"
        "    return true;\n"
        "}\n\n"
        "// The input index along dimension j that kernel tap t of output o reads, or -1.\n"
        "KF_HD inline int64_t tap(const Geo &g, int j, int64_t o, int64_t t) {\n"
        "    if (!kTransposed) {\n"
        "        const int64_t i = o * g.s[j] - g.pb[j] + t * g.d[j];\n"
        "        return i >= 0 && i < g.i[j] ? i : -1;\n"
        "    }\n"
        "    const int64_t u = o + g.pb[j] - t * g.d[j];\n"
        "    if (u < 0 || u % g.s[j] != 0)\n"
        "        return -1;\n"
        "    return u / g.s[j] < g.i[j] ? u / g.s[j] : -1;\n"
        "}\n\n"
        "// Output (ni, o, z, y, xo): the sum over its group's input channels and the taps.\n"
        "// Weights: [oc, c / kG, k..] forward, [c, oc / kG, k..] transposed.\n"
        "KF_HD inline float gather(const float *x, const float *wt, const Geo &g, int64_t ni,\n"
        "                          int64_t o, int64_t z, int64_t y, int64_t xo) {\n"
        "    const int64_t cg = g.c / kG, ocg = g.oc / kG, grp = o / ocg;\n"
        "    const int64_t isz = g.i[0] * g.i[1] * g.i[2], ksz = g.k[0] * g.k[1] * g.k[2];\n"
        "    const float *xb = x + (ni * g.c + grp * cg) * isz;\n"
        "    float acc = 0.0f;\n"
        "    for (int64_t ci = 0; ci < cg; ++ci) {\n"
        "        const float *xc = xb + ci * isz;\n"
        "        const float *wc = kTransposed ? wt + ((grp * cg + ci) * ocg + o % ocg) * ksz\n"
        "                                      : wt + (o * cg + ci) * ksz;\n"
        "        for (int64_t a = 0; a < g.k[0]; ++a) {\n"
        "            const int64_t iz = tap(g, 0, z, a);\n"
        "            if (iz < 0)\n"
        "                continue;\n"
        "            for (int64_t bb = 0; bb < g.k[1]; ++bb) {\n"
        "                const int64_t iy = tap(g, 1, y, bb);\n"
        "                if (iy < 0)\n"
        "                    continue;\n"
        "                const float *xr = xc + (iz * g.i[1] + iy) * g.i[2];\n"
        "                const float *wr = wc + (a * g.k[1] + bb) * g.k[2];\n"
        "                for (int64_t cc = 0; cc < g.k[2]; ++cc) {\n"
        "                    const int64_t ix = tap(g, 2, xo, cc);\n"
        "                    if (ix >= 0)\n"
        "                        acc += xr[ix] * wr[cc];\n"
        "                }\n"
        "            }\n"
        "        }\n"
        "    }\n"
        "    return acc;\n"
        "}\n\n");
}

/* The exported function's parameters, their names, and the output's element count. */
static const char PARAMS[] =
    "const float *x, const float *wt, float *y, int64_t n, int64_t c, int64_t id,\n"
    "        int64_t ih, int64_t iw, int64_t oc, int64_t kd, int64_t kh, int64_t kw, int64_t od,\n"
    "        int64_t oh, int64_t ow";
static const char NAMES[] = "x, wt, y, n, c, id, ih, iw, oc, kd, kh, kw, od, oh, ow";

/* The entry's signature (cuda: through expert_conv_epi.c, which makes it kf_core when the step
 * has an epilogue) and its geometry. */
static void signature(struct kf_buf *b, const struct kfx_call *c) {
    if (strcmp(c->backend, "cuda") == 0)
        kfx_conv_epi_open(b, c, PARAMS);
    else
        kf_buf_printf(b, "extern \"C\" int %s(%s) {\n", c->fn, PARAMS);
    kf_buf_printf(
        b, "    Geo g{n, c, oc, {id, ih, iw}, {kd, kh, kw}, {od, oh, ow}, {}, {}, {}, {}};\n");
}

static const char CUDA_STATE[] =
    "constexpr int kCudnnError = 2000; // + cudnnStatus_t, to tell them from CUDA errors\n"
    "constexpr int kPlans = 8, kKey = 12, kThreads = 256;\n\n";

static const char CUDA_DESCRIBE[] =
    "// p's descriptors for g: kDims-dimensional tensors (the last kDims - 2 spatial sizes).\n"
    "int describe(Plan &p, const Geo &g) {\n"
    "    if (p.xd == nullptr) {\n"
    "        KF_CUDNN(cudnnCreateTensorDescriptor(&p.xd));\n"
    "        KF_CUDNN(cudnnCreateTensorDescriptor(&p.yd));\n"
    "        KF_CUDNN(cudnnCreateFilterDescriptor(&p.wd));\n"
    "        KF_CUDNN(cudnnCreateConvolutionDescriptor(&p.cd));\n"
    "    }\n"
    "    constexpr int sp = kDims - 2, j0 = 3 - sp;\n"
    "    int xs[kDims], ys[kDims], ws[kDims], pad[sp], str[sp], dil[sp];\n"
    "    xs[0] = ys[0] = (int)g.n;\n"
    "    xs[1] = (int)g.c;\n"
    "    ys[1] = (int)g.oc;\n"
    "    // the filter of the forward convolution: [oc, c / g, k..], or transposed [c, oc / g, "
    "k..]\n"
    "    ws[0] = (int)(kTransposed ? g.c : g.oc);\n"
    "    ws[1] = (int)(kTransposed ? g.oc / kG : g.c / kG);\n"
    "    for (int j = 0; j < sp; ++j) {\n"
    "        xs[2 + j] = (int)g.i[j0 + j];\n"
    "        ys[2 + j] = (int)g.o[j0 + j];\n"
    "        ws[2 + j] = (int)g.k[j0 + j];\n"
    "        pad[j] = (int)g.pb[j0 + j];\n"
    "        str[j] = (int)kS[j0 + j];\n"
    "        dil[j] = (int)kD[j0 + j];\n"
    "    }\n"
    "    KF_CUDNN(cudnnSetTensorNdDescriptorEx(p.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kDims, "
    "xs));\n"
    "    KF_CUDNN(cudnnSetTensorNdDescriptorEx(p.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kDims, "
    "ys));\n"
    "    KF_CUDNN(cudnnSetFilterNdDescriptor(p.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, kDims, "
    "ws));\n"
    "    KF_CUDNN(cudnnSetConvolutionNdDescriptor(p.cd, sp, pad, str, dil, "
    "CUDNN_CROSS_CORRELATION,\n"
    "                                             CUDNN_DATA_FLOAT));\n"
    "    KF_CUDNN(cudnnSetConvolutionGroupCount(p.cd, (int)kG));\n"
    "    KF_CUDNN(cudnnSetConvolutionMathType(p.cd, CUDNN_FMA_MATH)); // plain fp32 FMA: no TF32\n"
    "    // the forward convolution's output: y's sizes, or transposed x's\n"
    "    int dims[kDims];\n"
    "    KF_CUDNN(cudnnGetConvolutionNdForwardOutputDim(p.cd, kTransposed ? p.yd : p.xd, p.wd, "
    "kDims,\n"
    "                                                   dims));\n"
    "    for (int j = 0; j < kDims; ++j)\n"
    "        if (dims[j] != (kTransposed ? xs[j] : ys[j]))\n"
    "            return (int)cudaErrorInvalidValue;\n"
    "    return 0;\n"
    "}\n\n";

static const char CUDA_CHOOSE[] =
    "// The first FMA-math algorithm in cuDNN's ranking (its heuristics, or its timings when\n"
    "// kFind), and its workspace size.\n"
    "template <typename Perf, typename Algo>\n"
    "void pick(const Perf *perf, int returned, Plan &p, Algo fallback) {\n"
    "    p.algo = (int)fallback;\n"
    "    for (int i = 0; i < returned; ++i) {\n"
    "        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {\n"
    "            p.algo = (int)perf[i].algo;\n"
    "            return;\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "int choose(State &s, Plan &p) {\n"
    "    int returned = 0;\n"
    "    if (kTransposed) {\n"
    "        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];\n"
    "        if (kFind)\n"
    "            KF_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(\n"
    "                s.h, p.wd, p.xd, p.cd, p.yd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, "
    "&returned, perf));\n"
    "        else\n"
    "            KF_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(\n"
    "                s.h, p.wd, p.xd, p.cd, p.yd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, "
    "&returned, perf));\n"
    "        pick(perf, returned, p, "
    "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);\n"
    "        KF_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(\n"
    "            s.h, p.wd, p.xd, p.cd, p.yd, (cudnnConvolutionBwdDataAlgo_t)p.algo, "
    "&p.ws_bytes));\n"
    "        return 0;\n"
    "    }\n"
    "    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];\n"
    "    if (kFind)\n"
    "        KF_CUDNN(cudnnFindConvolutionForwardAlgorithm(s.h, p.xd, p.wd, p.cd, p.yd,\n"
    "                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "
    "&returned,\n"
    "                                                      perf));\n"
    "    else\n"
    "        KF_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(s.h, p.xd, p.wd, p.cd, p.yd,\n"
    "                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT,\n"
    "                                                        &returned, perf));\n"
    "    pick(perf, returned, p,\n"
    "                                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);\n"
    "    KF_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(\n"
    "        s.h, p.xd, p.wd, p.cd, p.yd, (cudnnConvolutionFwdAlgo_t)p.algo, &p.ws_bytes));\n"
    "    return 0;\n"
    "}\n\n"
    "// The plan of g: a cached one, or a new one in the oldest slot.\n"
    "int plan_for(State &s, const Geo &g, Plan **out) {\n"
    "    const int64_t key[kKey] = {g.n,    g.c,    g.oc,   g.i[0], g.i[1], g.i[2],\n"
    "                               g.k[0], g.k[1], g.k[2], g.o[0], g.o[1], g.o[2]};\n";

/* After CUDA_CHOOSE and the cached plan's lookup. */
static const char CUDA_TAIL[] =
    "    p.ready = false;\n"
    "    int rc = describe(p, g);\n"
    "    if (rc == 0)\n"
    "        rc = choose(s, p);\n"
    "    p.direct = rc != 0; // cuDNN declined: the direct kernel serves this shape\n"
    "    for (int i = 0; i < kKey; ++i)\n"
    "        p.key[i] = key[i];\n"
    "    p.ready = true;\n"
    "    *out = &p;\n"
    "    return 0;\n"
    "}\n\n";

/* After CUDA_TAIL and the workspace (kfx_src_cudnn_workspace). */
static const char CUDA_DIRECT[] =
    "// One thread per output.\n"
    "__global__ void direct(const float *__restrict__ x, const float *__restrict__ wt,\n"
    "                       float *__restrict__ y, Geo g, int64_t total) {\n"
    "    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;\n"
    "    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;\n"
    "         i += stride) {\n"
    "        const int64_t xo = i % g.o[2], yo = (i / g.o[2]) % g.o[1];\n"
    "        const int64_t zo = (i / (g.o[2] * g.o[1])) % g.o[0];\n"
    "        const int64_t r = i / (g.o[2] * g.o[1] * g.o[0]);\n"
    "        y[i] = gather(x, wt, g, r / g.oc, r % g.oc, zo, yo, xo);\n"
    "    }\n"
    "}\n\n"
    "int run_direct(const float *x, const float *wt, float *y, const Geo &g) {\n"
    "    const int64_t total = g.n * g.oc * g.o[0] * g.o[1] * g.o[2];\n"
    "    int64_t blocks = (total + kThreads - 1) / kThreads;\n"
    "    blocks = blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20);\n"
    "    direct<<<(unsigned)blocks, kThreads, 0, 0>>>(x, wt, y, g, total);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n\n";

/* The cuDNN path of a checked shape (the direct kernel where cuDNN cannot take it), inside the
 * namespace; then the namespace's end. */
static const char CUDA_LIB[] =
    "// y by cuDNN (split or fp32), or by the direct kernel where sizes do not fit (fits false)\n"
    "// or cuDNN declines.\n"
    "int cudnn_path(const float *x, const float *wt, float *y, const Geo &g, bool fits) {\n"
    "    const int64_t n = g.n, c = g.c, oc = g.oc;\n"
    "    if (!fits)\n"
    "        return run_direct(x, wt, y, g);\n"
    "    State &s = state();\n"
    "    if (s.h == nullptr)\n"
    "        KF_CUDNN(cudnnCreate(&s.h));\n"
    "    KF_CUDNN(cudnnSetStream(s.h, 0));\n"
    "    Plan *p = nullptr;\n"
    "    int rc = plan_for(s, g, &p);\n"
    "    if (rc == 0 && !p->direct)\n"
    "        rc = workspace(s, p->ws_bytes);\n"
    "    if (rc != 0)\n"
    "        return rc;\n"
    "    if (p->direct)\n"
    "        return run_direct(x, wt, y, g);\n"
    "    auto fp32 = [&]() -> int {\n"
    "        const float one = 1.0f, zero = 0.0f;\n"
    "        if (kTransposed)\n"
    "            KF_CUDNN(cudnnConvolutionBackwardData(s.h, &one, p->wd, wt, p->xd, x, p->cd,\n"
    "                                                  (cudnnConvolutionBwdDataAlgo_t)p->algo, "
    "s.ws,\n"
    "                                                  p->ws_bytes, &zero, p->yd, y));\n"
    "        else\n"
    "            KF_CUDNN(cudnnConvolutionForward(s.h, &one, p->xd, x, p->wd, wt, p->cd,\n"
    "                                             (cudnnConvolutionFwdAlgo_t)p->algo, s.ws,\n"
    "                                             p->ws_bytes, &zero, p->yd, y));\n"
    "        return (int)cudaGetLastError();\n"
    "    };\n"
    "    if (kSplit && kG == 1) { // large ones on the tensor cores (expert_conv_split.c)\n"
    "        constexpr int sp = kDims - 2, j0 = 3 - sp;\n"
    "        SplitConv sg{kTransposed, sp, n, c, oc, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {}, {}, "
    "{}};\n"
    "        for (int j = 0; j < sp; ++j) {\n"
    "            sg.in[j] = g.i[j0 + j];\n"
    "            sg.out[j] = g.o[j0 + j];\n"
    "            sg.k[j] = g.k[j0 + j];\n"
    "            sg.pad[j] = (int)g.pb[j0 + j];\n"
    "            sg.str[j] = (int)kS[j0 + j];\n"
    "            sg.dil[j] = (int)kD[j0 + j];\n"
    "        }\n"
    "        const int src = split_conv(s, x, wt, y, sg, fp32);\n"
    "        if (src >= 0)\n"
    "            return src;\n"
    "    }\n"
    "    return fp32();\n"
    "}\n\n"
    "} // namespace\n\n";

/* The exported function's checks, after signature(). */
static const char CUDA_ENTRY[] =
    "    if (!shape_ok(g))\n"
    "        return (int)cudaErrorInvalidValue;\n"
    "    if (n == 0)\n"
    "        return (int)cudaGetLastError();\n"
    "    bool fits = n * c * id * ih * iw <= INT_MAX && n * oc * od * oh * ow <= INT_MAX &&\n"
    "                oc * (c / kG) * kd * kh * kw <= INT_MAX;\n"
    "    for (int j = 0; j < 3; ++j)\n"
    "        fits = fits && g.pb[j] == g.pa[j];\n";

/* Variant 0's entry for one group: cuDNN's path (split or fp32) as lib, raced against our
 * implicit GEMM. */
static const char CUDA_ENTRY_IGEMM[] =
    "    auto lib = [&]() -> int {\n"
    "        return cudnn_path(x, wt, y, g, fits);\n"
    "    };\n"
    "    if (!fits)\n"
    "        return lib();\n"
    "    long long in3[3], out3[3], k[3], st[3], pb[3], dl[3];\n"
    "    for (int j = 0; j < 3; ++j) {\n"
    "        in3[j] = g.i[j];\n"
    "        out3[j] = g.o[j];\n"
    "        k[j] = g.k[j];\n"
    "        st[j] = kS[j];\n"
    "        pb[j] = g.pb[j];\n"
    "        dl[j] = kD[j];\n"
    "    }\n"
    "    return ig_or(kTransposed, n, c, oc, in3, out3, k, st, pb, dl, x, wt, y, lib, KF_EPI);\n"
    "}\n";

/* Variant v (0 or 1) on cuda. */
static char *cuda_src(const struct kfx_call *c, const struct convnd *p, int v) {
    const bool igemm = v == 0 && p->groups == 1; /* our implicit GEMM raced in */
    struct kf_buf b = {0};
    char what[24];
    op_name(p, what, sizeof(what));
    kf_buf_printf(&b,
                  "// kforge expert: %s, %s through cuDNN's legacy N-d API, variant %d: the "
                  "algorithm %s.\n"
                  "// y = %s(x, wt), float32, no bias; CUDNN_FMA_MATH (full fp32, never TF32); "
                  "stream 0. Descriptors,\n"
                  "// algorithm and workspace size are cached per shape (a few plans); one "
                  "workspace is shared and\n"
                  "// grown. Asymmetric padding, sizes past int and shapes cuDNN declines go "
                  "to a direct kernel.%s\n"
                  "#include <cuda_runtime.h>\n#include <cudnn.h>\n\n#include <algorithm>\n#include "
                  "<climits>\n"
                  "#include <cstdint>\n#include <cstdlib>\n\n#define KF_HD __host__ "
                  "__device__\n\nnamespace {\n\n"
                  "constexpr bool kFind = %s;\nconstexpr int kDims = %d; // tensor dimensions "
                  "cuDNN sees\n"
                  "constexpr bool kSplit = %s; // large ones: TF32 tensor cores, split operands\n",
                  c->fn, what, v,
                  v == 0 ? "from cuDNN's heuristics" : "cuDNN times fastest (cudnnFind)", what,
                  igemm ? "\n// A shape's first call times cuDNN's path against our implicit GEMM "
                          "(fp32 FMA) and keeps the faster."
                        : "",
                  v == 0 ? "false" : "true", p->rank == 3 ? 5 : 4, v == 0 ? "true" : "false");
    src_common(&b, p);
    kf_buf_printf(&b, "%s", CUDA_STATE);
    kfx_src_cudnn_check(&b);
    kfx_src_cudnn_state(
        &b, "; direct when cuDNN declined it", "ready = false, direct = false",
        "int algo = 0; // a cudnnConvolutionFwdAlgo_t or cudnnConvolutionBwdDataAlgo_t");
    kf_buf_printf(&b, "%s%s", CUDA_DESCRIBE, CUDA_CHOOSE);
    kfx_src_plan_lookup(&b, "kKey");
    kf_buf_printf(&b, "%s", CUDA_TAIL);
    kfx_src_cudnn_workspace(&b);
    kfx_conv_split_src(&b);
    if (igemm)
        kfx_conv_igemm_src(&b);
    kf_buf_printf(&b, "%s%s", CUDA_DIRECT, CUDA_LIB);
    signature(&b, c);
    kf_buf_printf(&b, "%s%s", CUDA_ENTRY,
                  igemm ? CUDA_ENTRY_IGEMM : "    return cudnn_path(x, wt, y, g, fits);\n}\n");
    kfx_conv_epi_close(&b, c, PARAMS, NAMES, "n * oc * od * oh * ow");
    return b.data;
}

/* Variant 0 on cpu. */
static char *cpu_src(const struct kfx_call *c, const struct convnd *p) {
    struct kf_buf b = {0};
    char what[24];
    op_name(p, what, sizeof(what));
    kf_buf_printf(&b,
                  "// kforge expert: %s, %s on cpu: each output the sum over its group's input "
                  "channels and\n"
                  "// the kernel's taps, rows of outputs shared out to the OpenMP threads; "
                  "fp32.\n"
                  "#include <cstdint>\n\n#define KF_HD\n\nnamespace {\n\n",
                  c->fn, what);
    src_common(&b, p);
    kf_buf_printf(&b, "} // namespace\n\n");
    signature(&b, c);
    kf_buf_printf(&b, "%s",
                  "    if (!shape_ok(g))\n"
                  "        return 1;\n"
                  "    const int64_t rows = n * oc * od * oh;\n"
                  "#pragma omp parallel for schedule(static)\n"
                  "    for (int64_t r = 0; r < rows; ++r) {\n"
                  "        const int64_t yo = r % oh, zo = (r / oh) % od, o = (r / (oh * od)) % "
                  "oc;\n"
                  "        const int64_t ni = r / (oh * od * oc);\n"
                  "        float *yr = y + r * ow;\n"
                  "        for (int64_t xo = 0; xo < ow; ++xo)\n"
                  "            yr[xo] = gather(x, wt, g, ni, o, zo, yo, xo);\n"
                  "    }\n"
                  "    return 0;\n"
                  "}\n");
    return b.data;
}

char *kfx_convnd_src(const struct kfx_call *c, int v) {
    struct convnd p;
    char detail[256];
    if (parse(c, &p, detail, sizeof(detail)) != 0 || v < 0 ||
        v > (strcmp(c->backend, "cuda") == 0 ? 1 : 0))
        return NULL;
    return strcmp(c->backend, "cuda") == 0 ? cuda_src(c, &p, v) : cpu_src(c, &p);
}

int kfx_convnd_rank(const json_t *node) {
    bool module, transposed;
    return kind_of(node, &module, &transposed);
}
