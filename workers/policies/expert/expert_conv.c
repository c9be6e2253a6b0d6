/* expert_conv.c: the expert's generator for 2-D convolutions (nn.Conv2d, F.conv2d,
 * torch.conv2d), see expert_ops.h. Stride, padding (an int, a pair, 'valid' or 'same'),
 * dilation and groups come from the node; the sizes from the operands at run time, so the same
 * kernel serves other batch sizes and images. The bias is the planner's.
 * Every kernel takes (x, weight, y, n, c, h, w, oc, kh, kw, oh, ow, sh, sw, pt, pb, pl, pr, dh,
 * dw, groups): padding per side, as 'same' pads an even kernel more at the bottom and right.
 * cuda: cuDNN's legacy API with CUDNN_FMA_MATH (no TF32), plans cached per shape, the algorithm
 * from cuDNN's heuristics (variant 0) or timed by cudnnFind (variant 1); asymmetric padding goes
 * to a direct kernel; in variant 0 a depthwise one (c == groups) to a tiled kernel of our own, and
 * one group to the split (expert_conv_split.c) or cuDNN raced against our implicit GEMM
 * (expert_conv_igemm.c) on a shape's first call, the faster kept. With an epilogue (cuda: the
 * pass after the convolution, fused by the planner), the kernel also takes that pass's operands
 * and the output after these arguments (expert_conv_epi.c). cpu:
 * implicit im2col into panels of output pixels times the weights with a register-blocked
 * micro-kernel, OpenMP over (image, group, pixel block, channel block), two panel sizes. Nothing is
 * kept between calls: the node is only read, py is the caller's (appended to), and each source is
 * built in a fresh buffer that the caller owns and frees. */
#include "expert_ops.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"

struct conv_params {
    long stride[2], pad[2], dil[2], groups;
    bool same; /* padding='same': worked out at run time from the kernel's size */
};

/* Whether node is a 2-D convolution; *module when it is an nn.Conv2d. */
static bool is_conv(const json_t *node, bool *module) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    *module = op && !strcmp(op, "call_module");
    if (*module) {
        const char *type = json_string_value(json_object_get(node, "module_type"));
        return type && !strcmp(type, "Conv2d");
    }
    return op && target && !strcmp(op, "call_function") &&
           !strcmp(kfx_arg_short_name(target), "conv2d");
}

/* c's node's parameters into p, and c's operands checked; 0, or -1 with what is not supported
 * in detail. */
static int parse(const struct kfx_call *c, struct conv_params *p, char *detail, size_t dlen) {
    const json_t *node = c->node;
    static const long zero[2] = {0, 0}, one[2] = {1, 1};
    bool module;
    const char *name = kfx_arg_name(node);
    if (!is_conv(node, &module)) {
        snprintf(detail, dlen, "node %s is not a 2-D convolution", name);
        return -1;
    }
    const char *mode = json_string_value(kfx_arg_param(node, module, 99, "padding_mode"));
    if (module && mode && strcmp(mode, "zeros") != 0) {
        snprintf(detail, dlen, "conv2d %s with padding_mode %s (not supported)", name, mode);
        return -1;
    }
    const json_t *pad = kfx_arg_param(node, module, 4, "padding");
    const char *pad_s = json_string_value(pad);
    const json_t *groups = kfx_arg_param(node, module, 6, "groups");
    p->same = pad_s && !strcmp(pad_s, "same");
    if (kfx_arg_pair(kfx_arg_param(node, module, 3, "stride"), one, p->stride) != 0 ||
        kfx_arg_pair(kfx_arg_param(node, module, 5, "dilation"), one, p->dil) != 0 ||
        (pad_s ? strcmp(pad_s, "same") != 0 && strcmp(pad_s, "valid") != 0
               : kfx_arg_pair(pad, zero, p->pad) != 0) ||
        (groups && !json_is_null(groups) && !json_is_integer(groups))) {
        snprintf(detail, dlen, "conv2d %s: stride, padding, dilation or groups not understood",
                 name);
        return -1;
    }
    if (pad_s)
        p->pad[0] = p->pad[1] = 0;
    p->groups = json_is_integer(groups) ? (long)json_integer_value(groups) : 1;
    if (p->stride[0] < 1 || p->stride[1] < 1 || p->dil[0] < 1 || p->dil[1] < 1 || p->pad[0] < 0 ||
        p->pad[1] < 0 || p->groups < 1 || (p->same && (p->stride[0] != 1 || p->stride[1] != 1))) {
        snprintf(detail, dlen,
                 "conv2d %s with stride %ldx%ld, padding %ldx%ld, dilation %ldx%ld, groups %ld "
                 "(not valid)",
                 name, p->stride[0], p->stride[1], p->pad[0], p->pad[1], p->dil[0], p->dil[1],
                 p->groups);
        return -1;
    }
    return kfx_arg_operands(c, 2, "conv2d", " (x, weight)", detail, dlen);
}

/* The Python lines with p's numbers in, placeholders still to expand. */
static void py_lines(struct kf_buf *t, const struct conv_params *p) {
    const long g = p->groups;
    kf_buf_printf(t,
                  "        @_x, @_w = `0, `1\n"
                  "        if @_x.dim() not in (3, 4) or @_w.dim() != 4:\n"
                  "            raise ValueError(f\"$: conv2d of {tuple(@_x.shape)} with a weight "
                  "{tuple(@_w.shape)}: a 3-D or 4-D input and a 4-D weight only\")\n"
                  "        @_x4 = @_x if @_x.dim() == 4 else @_x.unsqueeze(0)\n"
                  "        @_n, @_c, @_h, @_wd = @_x4.shape\n"
                  "        @_oc, @_cg, @_kh, @_kw = @_w.shape\n"
                  "        if @_cg * %ld != @_c or @_oc %% %ld != 0:\n"
                  "            raise ValueError(f\"$: conv2d of {tuple(@_x.shape)} with a weight "
                  "{tuple(@_w.shape)} in %ld groups: the channels differ\")\n",
                  g, g, g);
    if (p->same)
        kf_buf_printf(
            t,
            "        @_pt, @_pl = %ld * (@_kh - 1) // 2, %ld * (@_kw - 1) // 2  # 'same'\n"
            "        @_pb, @_pr = %ld * (@_kh - 1) - @_pt, %ld * (@_kw - 1) - @_pl\n",
            p->dil[0], p->dil[1], p->dil[0], p->dil[1]);
    else
        kf_buf_printf(t, "        @_pt, @_pb, @_pl, @_pr = %ld, %ld, %ld, %ld\n", p->pad[0],
                      p->pad[0], p->pad[1], p->pad[1]);
    kf_buf_printf(
        t,
        "        @_oh = (@_h + @_pt + @_pb - %ld * (@_kh - 1) - 1) // %ld + 1\n"
        "        @_ow = (@_wd + @_pl + @_pr - %ld * (@_kw - 1) - 1) // %ld + 1\n"
        "        if @_oh <= 0 or @_ow <= 0:\n"
        "            raise ValueError(f\"$: conv2d of {tuple(@_x.shape)} with a weight "
        "{tuple(@_w.shape)}: the output would be empty\")\n"
        "        @ = @_x.new_empty((@_n, @_oc, @_oh, @_ow))\n"
        "        self.k.$(@_x4, @_w, @, @_n, @_c, @_h, @_wd, @_oc, @_kh, @_kw, @_oh, @_ow, %ld, "
        "%ld, @_pt, @_pb, @_pl, @_pr, %ld, %ld, %ld)\n"
        "        if @_x.dim() == 3:\n"
        "            @ = @[0]\n",
        p->dil[0], p->stride[0], p->dil[1], p->stride[1], p->stride[0], p->stride[1], p->dil[0],
        p->dil[1], g);
}

int kfx_conv_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen) {
    if (kfx_convnd_rank(c->node) > 0)
        return kfx_convnd_py(c, py, detail, dlen);
    struct conv_params p;
    if (parse(c, &p, detail, dlen) != 0)
        return -1;
    struct kf_buf t = {0};
    py_lines(&t, &p);
    return kfx_arg_emit(py, &t, c);
}

/* ---- the generated sources ---- */

/* The exported function's parameters (restrict_kw on the pointers), into t. */
static void params(struct kf_buf *t, const char *restrict_kw) {
    kf_buf_printf(t,
                  "const float *%s x, const float *%s wt, float *%s y, int64_t n, int64_t c,\n"
                  "        int64_t h, int64_t w, int64_t oc, int64_t kh, int64_t kw, int64_t oh, "
                  "int64_t ow,\n"
                  "        int64_t sh, int64_t sw, int64_t pt, int64_t pb, int64_t pl, int64_t pr, "
                  "int64_t dh,\n"
                  "        int64_t dw, int64_t g",
                  restrict_kw, restrict_kw, restrict_kw);
}

static const char NAMES[] = "x, wt, y, n, c, h, w, oc, kh, kw, oh, ow, sh, sw, pt, pb, pl, pr, dh, "
                            "dw, g";

/* The entry's signature: cuda's through expert_conv_epi.c (kf_core when the step has an
 * epilogue). */
static void signature(struct kf_buf *b, const struct kfx_call *c, const char *restrict_kw) {
    struct kf_buf t = {0};
    params(&t, restrict_kw);
    if (strcmp(c->backend, "cuda") == 0)
        kfx_conv_epi_open(b, c, t.data ? t.data : "");
    else
        kf_buf_printf(b, "extern \"C\" int %s(%s) {\n", c->fn, t.data ? t.data : "");
    kf_buf_free(&t);
}

/* The argument checks of every entry point; err is the code of a bad call. */
static void checks(struct kf_buf *b, const char *err) {
    kf_buf_printf(b,
                  "    if (n < 0 || c <= 0 || h <= 0 || w <= 0 || oc <= 0 || kh <= 0 || kw <= 0 || "
                  "sh <= 0 ||\n"
                  "        sw <= 0 || pt < 0 || pb < 0 || pl < 0 || pr < 0 || dh <= 0 || dw <= 0 "
                  "|| g <= 0 ||\n"
                  "        c %% g != 0 || oc %% g != 0 || oh <= 0 || ow <= 0)\n"
                  "        return %s;\n"
                  "    if (oh != (h + pt + pb - dh * (kh - 1) - 1) / sh + 1 ||\n"
                  "        ow != (w + pl + pr - dw * (kw - 1) - 1) / sw + 1)\n"
                  "        return %s;\n",
                  err, err);
}

static const char CUDA_CONSTS[] =
    "constexpr int kCudnnError = 2000; // + cudnnStatus_t, to tell them from CUDA errors\n"
    "constexpr int kPlans = 8;\n"
    "constexpr int kKey = 16; // n c h w oc kh kw oh ow sh sw pt pl dh dw g\n"
    "constexpr int kThreads = 256;\n\n";

static const char CUDA_GEO[] =
    "struct Geo {\n"
    "    int64_t n, c, h, w, oc, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, g;\n"
    "};\n\n";

static const char CUDA_BODY_HEAD[] =
    "// p's descriptors for the shape k (kKey values), created on p's first use.\n"
    "int describe(Plan &p, const int64_t *k) {\n"
    "    if (p.xd == nullptr) {\n"
    "        KF_CUDNN(cudnnCreateTensorDescriptor(&p.xd));\n"
    "        KF_CUDNN(cudnnCreateTensorDescriptor(&p.yd));\n"
    "        KF_CUDNN(cudnnCreateFilterDescriptor(&p.wd));\n"
    "        KF_CUDNN(cudnnCreateConvolutionDescriptor(&p.cd));\n"
    "    }\n"
    "    KF_CUDNN(cudnnSetTensor4dDescriptor(p.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, "
    "(int)k[0],\n"
    "                                        (int)k[1], (int)k[2], (int)k[3]));\n"
    "    KF_CUDNN(cudnnSetFilter4dDescriptor(p.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, "
    "(int)k[4],\n"
    "                                        (int)(k[1] / k[15]), (int)k[5], (int)k[6]));\n"
    "    KF_CUDNN(cudnnSetConvolution2dDescriptor(p.cd, (int)k[11], (int)k[12], (int)k[9], "
    "(int)k[10],\n"
    "                                             (int)k[13], (int)k[14], "
    "CUDNN_CROSS_CORRELATION,\n"
    "                                             CUDNN_DATA_FLOAT));\n"
    "    KF_CUDNN(cudnnSetConvolutionGroupCount(p.cd, (int)k[15]));\n"
    "    KF_CUDNN(cudnnSetConvolutionMathType(p.cd, CUDNN_FMA_MATH)); // plain fp32 FMA: no TF32\n"
    "    KF_CUDNN(cudnnSetTensor4dDescriptor(p.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, "
    "(int)k[0],\n"
    "                                        (int)k[4], (int)k[7], (int)k[8]));\n"
    "    int dn = 0, dc = 0, dh = 0, dw = 0;\n"
    "    KF_CUDNN(cudnnGetConvolution2dForwardOutputDim(p.cd, p.xd, p.wd, &dn, &dc, &dh, &dw));\n"
    "    if (dh != k[7] || dw != k[8])\n"
    "        return (int)cudaErrorInvalidValue;\n"
    "    return 0;\n"
    "}\n\n"
    "// The first FMA-math algorithm in cuDNN's ranking (its heuristics, or its timings when\n"
    "// kFind), and its workspace size.\n"
    "int choose(State &s, Plan &p) {\n"
    "    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];\n"
    "    int returned = 0;\n"
    "    if (kFind)\n"
    "        KF_CUDNN(cudnnFindConvolutionForwardAlgorithm(s.h, p.xd, p.wd, p.cd, p.yd,\n"
    "                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "
    "&returned,\n"
    "                                                      perf));\n"
    "    else\n"
    "        KF_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(s.h, p.xd, p.wd, p.cd, p.yd,\n"
    "                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT,\n"
    "                                                        &returned, perf));\n"
    "    p.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; // always supported, no workspace\n"
    "    for (int i = 0; i < returned; ++i) {\n"
    "        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {\n"
    "            p.algo = perf[i].algo;\n"
    "            break;\n"
    "        }\n"
    "    }\n"
    "    KF_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(s.h, p.xd, p.wd, p.cd, p.yd, p.algo,\n"
    "                                                     &p.ws_bytes));\n"
    "    return 0;\n"
    "}\n\n"
    "// The plan of key: a cached one, or a new one in the oldest slot.\n"
    "int plan_for(State &s, const int64_t *key, Plan **out) {\n";

/* CUDA_CONSTS, the cuDNN fragments, CUDA_GEO, CUDA_BODY_HEAD, a cached plan's lookup, then this. */
static const char CUDA_BODY_TAIL[] = "    p.ready = false;\n"
                                     "    int rc = describe(p, key);\n"
                                     "    if (rc == 0)\n"
                                     "        rc = choose(s, p);\n"
                                     "    if (rc != 0)\n"
                                     "        return rc;\n"
                                     "    for (int i = 0; i < kKey; ++i)\n"
                                     "        p.key[i] = key[i];\n"
                                     "    p.ready = true;\n"
                                     "    *out = &p;\n"
                                     "    return 0;\n"
                                     "}\n\n";

/* After CUDA_BODY_TAIL and the workspace (kfx_src_cudnn_workspace). */
static const char CUDA_BODY_CONV[] =
    "int cudnn_conv(const float *x, const float *wt, float *y, const Geo &g) {\n"
    "    State &s = state();\n"
    "    if (s.h == nullptr)\n"
    "        KF_CUDNN(cudnnCreate(&s.h));\n"
    "    KF_CUDNN(cudnnSetStream(s.h, 0));\n"
    "    const int64_t key[kKey] = {g.n,  g.c,  g.h,  g.w,  g.oc, g.kh, g.kw, g.oh,\n"
    "                               g.ow, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw, g.g};\n"
    "    Plan *p = nullptr;\n"
    "    int rc = plan_for(s, key, &p);\n"
    "    if (rc == 0)\n"
    "        rc = workspace(s, p->ws_bytes);\n"
    "    if (rc != 0)\n"
    "        return rc;\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    KF_CUDNN(cudnnConvolutionForward(s.h, &one, p->xd, x, p->wd, wt, p->cd, p->algo, s.ws,\n"
    "                                     p->ws_bytes, &zero, p->yd, y));\n"
    "    return 0;\n"
    "}\n\n"
    "// One thread per output: for padding cuDNN cannot express (asymmetric) or sizes past int.\n"
    "__global__ void direct(const float *__restrict__ x, const float *__restrict__ wt,\n"
    "                       float *__restrict__ y, Geo g, int64_t total) {\n"
    "    const int64_t cg = g.c / g.g, ocg = g.oc / g.g;\n"
    "    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;\n"
    "    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;\n"
    "         i += stride) {\n"
    "        const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, o = (i / (g.ow * g.oh)) % g.oc;\n"
    "        const int64_t ni = i / (g.ow * g.oh * g.oc);\n"
    "        const float *xb = x + (ni * g.c + (o / ocg) * cg) * g.h * g.w;\n"
    "        const float *wb = wt + o * cg * g.kh * g.kw;\n"
    "        float acc = 0.0f;\n"
    "        for (int64_t ci = 0; ci < cg; ++ci) {\n"
    "            for (int64_t ki = 0; ki < g.kh; ++ki) {\n"
    "                const int64_t iy = oy * g.sh - g.pt + ki * g.dh;\n"
    "                if (iy < 0 || iy >= g.h)\n"
    "                    continue;\n"
    "                for (int64_t kj = 0; kj < g.kw; ++kj) {\n"
    "                    const int64_t ix = ox * g.sw - g.pl + kj * g.dw;\n"
    "                    if (ix >= 0 && ix < g.w)\n"
    "                        acc += xb[(ci * g.h + iy) * g.w + ix] * wb[(ci * g.kh + ki) * g.kw + "
    "kj];\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        y[i] = acc;\n"
    "    }\n"
    "}\n\n"
    "// Depthwise (c == groups: each output channel reads one input channel): as many bytes as\n"
    "// a copy and few FLOPs, where cuDNN's kernels ran at some 20% of the H200's bandwidth (a\n"
    "// 3x3 over 16 x 64 x 256 x 256: 0.57 ms, torch.compile's 0.49; bench/tasks_heldout). A\n"
    "// block of 32 x 8 threads writes a 32 x 32 tile of one output plane, four rows a thread,\n"
    "// from its input tile and halo read once into shared memory (zeros outside the image, so\n"
    "// any padding, stride and dilation).\n"
    "constexpr int kDwT = 32, kDwY = 8, kDwRows = kDwT / kDwY;\n"
    "__global__ void __launch_bounds__(kDwT *kDwY)\n"
    "    depthwise(const float *__restrict__ x, const float *__restrict__ wt, float *__restrict__ "
    "y,\n"
    "              Geo g, int iw_t, int ih_t, int64_t tiles_x, int64_t tiles_y) {\n"
    "    extern __shared__ float tile[];\n"
    "    const int64_t per_plane = tiles_x * tiles_y, plane = blockIdx.x / per_plane;\n"
    "    const int64_t t = blockIdx.x % per_plane, o = plane % g.oc, ni = plane / g.oc;\n"
    "    const int64_t oy0 = t / tiles_x * kDwT, ox0 = t % tiles_x * kDwT;\n"
    "    const float *__restrict__ xp = x + (ni * g.c + o / (g.oc / g.g)) * g.h * g.w;\n"
    "    const int64_t iy0 = oy0 * g.sh - g.pt, ix0 = ox0 * g.sw - g.pl;\n"
    "    for (int k = threadIdx.y * kDwT + threadIdx.x; k < ih_t * iw_t; k += kDwT * kDwY) {\n"
    "        const int64_t iy = iy0 + k / iw_t, ix = ix0 + k % iw_t;\n"
    "        tile[k] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? xp[iy * g.w + ix] : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    const int kh = (int)g.kh, kw = (int)g.kw, sh = (int)g.sh, sw = (int)g.sw;\n"
    "    const int dh = (int)g.dh, dw = (int)g.dw, ox = threadIdx.x;\n"
    "    const float *__restrict__ wp = wt + o * kh * kw;\n"
    "    float acc[kDwRows] = {};\n"
    "    for (int ki = 0; ki < kh; ++ki)\n"
    "        for (int kj = 0; kj < kw; ++kj) {\n"
    "            const float wv = __ldg(wp + ki * kw + kj);\n"
    "            const float *__restrict__ in = tile + ki * dh * iw_t + ox * sw + kj * dw;\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < kDwRows; ++r)\n"
    "                acc[r] += in[(threadIdx.y + r * kDwY) * sh * iw_t] * wv;\n"
    "        }\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < kDwRows; ++r) {\n"
    "        const int64_t oy = oy0 + threadIdx.y + r * kDwY;\n"
    "        if (oy < g.oh && ox0 + ox < g.ow)\n"
    "            y[(plane * g.oh + oy) * g.ow + ox0 + ox] = acc[r];\n"
    "    }\n"
    "}\n\n"
    "// The depthwise kernel's launch; -1 when it does not apply (the input tile past 48 KiB of\n"
    "// shared memory, or too many tiles for the grid), for cuDNN to take the call.\n"
    "int depthwise_launch(const float *x, const float *wt, float *y, const Geo &g) {\n"
    "    const int64_t iw_t = (kDwT - 1) * g.sw + (g.kw - 1) * g.dw + 1;\n"
    "    const int64_t ih_t = (kDwT - 1) * g.sh + (g.kh - 1) * g.dh + 1;\n"
    "    const int64_t tiles_x = (g.ow + kDwT - 1) / kDwT, tiles_y = (g.oh + kDwT - 1) / kDwT;\n"
    "    const int64_t blocks = g.n * g.oc * tiles_x * tiles_y;\n"
    "    if (iw_t * ih_t * (int64_t)sizeof(float) > 48 * 1024 || blocks > INT_MAX)\n"
    "        return -1;\n"
    "    depthwise<<<(unsigned)blocks, dim3(kDwT, kDwY), (size_t)(iw_t * ih_t) * sizeof(float), "
    "0>>>(\n"
    "        x, wt, y, g, (int)iw_t, (int)ih_t, tiles_x, tiles_y);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n\n"
    "} // namespace\n\n";

static const char CUDA_ENTRY[] =
    "    if (n == 0)\n"
    "        return (int)cudaGetLastError();\n"
    "    const Geo geo{n, c, h, w, oc, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, g};\n"
    "    const bool fits = n * c * h * w <= INT_MAX && n * oc * oh * ow <= INT_MAX && "
    "pt <= INT_MAX &&\n"
    "                      pl <= INT_MAX && sh <= INT_MAX && sw <= INT_MAX && dh <= INT_MAX &&\n"
    "                      dw <= INT_MAX && kh * kw <= INT_MAX;\n"
    "    if (kDepthwise && c == g && fits) {\n"
    "        const int rc = depthwise_launch(x, wt, y, geo);\n"
    "        if (rc >= 0)\n"
    "            return rc;\n"
    "    }\n"
    "    if (pt != pb || pl != pr || !fits) {\n"
    "        const int64_t total = n * oc * oh * ow;\n"
    "        int64_t blocks = (total + kThreads - 1) / kThreads;\n"
    "        blocks = blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20);\n"
    "        direct<<<(unsigned)blocks, kThreads, 0, 0>>>(x, wt, y, geo, total);\n"
    "        return (int)cudaGetLastError();\n"
    "    }\n";

/* Variant 1's end of the entry: cuDNN alone. */
static const char CUDA_ENTRY_LIB[] = "    const int rc = cudnn_conv(x, wt, y, geo);\n"
                                     "    return rc != 0 ? rc : (int)cudaGetLastError();\n"
                                     "}\n";

/* Variant 0's end of the entry: the split path or cuDNN's, raced against the implicit GEMM. */
static const char CUDA_ENTRY_RACE[] =
    "    if (g != 1) {\n"
    "        const int rc = cudnn_conv(x, wt, y, geo);\n"
    "        return rc != 0 ? rc : (int)cudaGetLastError();\n"
    "    }\n"
    "    // large ones on the tensor cores (expert_conv_split.c), raced against our implicit\n"
    "    // GEMM (expert_conv_igemm.c) on the shape's first call\n"
    "    auto lib = [&]() -> int {\n"
    "        State &s = state();\n"
    "        if (s.h == nullptr)\n"
    "            KF_CUDNN(cudnnCreate(&s.h));\n"
    "        KF_CUDNN(cudnnSetStream(s.h, 0));\n"
    "        const SplitConv sg{false, 2, n, c, oc, {h, w, 1}, {oh, ow, 1}, {kh, kw, 1},\n"
    "                           {(int)pt, (int)pl, 0}, {(int)sh, (int)sw, 1}, {(int)dh, (int)dw, "
    "1}};\n"
    "        const int src =\n"
    "            split_conv(s, x, wt, y, sg, [&]() { return cudnn_conv(x, wt, y, geo); });\n"
    "        if (src >= 0)\n"
    "            return src;\n"
    "        const int rc = cudnn_conv(x, wt, y, geo);\n"
    "        return rc != 0 ? rc : (int)cudaGetLastError();\n"
    "    };\n"
    "    const long long in3[3] = {1, h, w}, out3[3] = {1, oh, ow}, k[3] = {1, kh, kw};\n"
    "    const long long st[3] = {1, sh, sw}, pad[3] = {0, pt, pl}, dl[3] = {1, dh, dw};\n"
    "    return ig_or(false, n, c, oc, in3, out3, k, st, pad, dl, x, wt, y, lib, KF_EPI);\n"
    "}\n";

/* The entry point: its signature (restrict_kw on the pointers), its checks (err: the code of a
 * bad call), then entry. */
static void entry_point(struct kf_buf *b, const struct kfx_call *c, const char *restrict_kw,
                        const char *err, const char *entry) {
    signature(b, c, restrict_kw);
    checks(b, err);
    kf_buf_printf(b, "%s", entry);
}

/* Variant v (0 or 1) on cuda. */
static char *cuda_src(const struct kfx_call *c, int v) {
    struct kf_buf b = {0};
    kf_buf_printf(
        &b,
        "// kforge expert: %s, conv2d through cuDNN's legacy API, variant %d: the "
        "algorithm %s.\n"
        "// y = conv2d(x, wt), NCHW float32, no bias; CUDNN_FMA_MATH (full fp32, never "
        "TF32); stream 0.\n"
        "// Descriptors, algorithm and workspace size are cached per shape (a few "
        "plans); one workspace\n"
        "// is shared and grown. Asymmetric padding goes to a direct kernel.\n"
        "#include <cuda_runtime.h>\n#include <cudnn.h>\n\n#include <algorithm>\n#include "
        "<climits>\n"
        "#include <cstdint>\n#include <cstdlib>\n\nnamespace {\n\nconstexpr bool kFind = %s;\n"
        "constexpr bool kDepthwise = %s; // depthwise: our kernel, not cuDNN's\n%s",
        c->fn, v,
        v == 0 ? "from cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7)"
               : "cuDNN times fastest (cudnnFindConvolutionForwardAlgorithm)",
        v == 0 ? "false" : "true", v == 0 ? "true" : "false",
        v == 0 ? "constexpr bool kSplit = true; // large ones: TF32 tensor cores, split operands\n"
               : "");
    kf_buf_printf(&b, "%s", CUDA_CONSTS);
    kfx_src_cudnn_check(&b);
    kf_buf_printf(&b, "%s", CUDA_GEO);
    kfx_src_cudnn_state(
        &b, "", "ready = false",
        "cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;");
    kf_buf_printf(&b, "%s", CUDA_BODY_HEAD);
    kfx_src_plan_lookup(&b, "kKey");
    kf_buf_printf(&b, "%s", CUDA_BODY_TAIL);
    kfx_src_cudnn_workspace(&b);
    if (v == 0) { /* the split and our implicit GEMM, raced against cuDNN */
        kfx_conv_split_src(&b);
        kfx_conv_igemm_src(&b);
    }
    kf_buf_printf(&b, "%s", CUDA_BODY_CONV);
    entry_point(&b, c, "", "(int)cudaErrorInvalidValue", CUDA_ENTRY);
    kf_buf_printf(&b, "%s", v == 0 ? CUDA_ENTRY_RACE : CUDA_ENTRY_LIB);
    struct kf_buf t = {0};
    params(&t, "");
    kfx_conv_epi_close(&b, c, t.data ? t.data : "", NAMES, "n * oc * oh * ow");
    kf_buf_free(&t);
    return b.data;
}

/* The cpu kernel's start, kfx_src_tiles's pack: the geometry, the packing, then the micro-kernel's
 * start. */
static const char CPU_PACK[] =
    "struct Geo {\n"
    "    int64_t n, c, h, w, oc, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, g;\n"
    "    int64_t cg, ocg, r; // per group: input channels, output channels, cg * kh * kw\n"
    "};\n\n"
    "// Implicit im2col of output pixels [p0, p0 + np) of one image and group (xg: the group's "
    "first\n"
    "// input channel): row r = (ci * kh + ki) * kw + kj of panel q (pixels p0 + q * NR ..) at\n"
    "// pb + (q * g.r + r) * NR; zeros outside the image and past np. iy, ix: scratch of np "
    "rounded\n"
    "// up to NR.\n"
    "void pack(const Geo &g, const float *xg, int64_t p0, int64_t np, float *pb, int64_t *iy,\n"
    "          int64_t *ix) {\n"
    "    const int64_t npad = (np + NR - 1) / NR * NR;\n"
    "    for (int64_t p = 0; p < npad; ++p) {\n"
    "        iy[p] = p < np ? ((p0 + p) / g.ow) * g.sh - g.pt : -(int64_t{1} << 40);\n"
    "        ix[p] = p < np ? ((p0 + p) % g.ow) * g.sw - g.pl : 0;\n"
    "    }\n"
    "    for (int64_t ci = 0; ci < g.cg; ++ci) {\n"
    "        const float *xc = xg + ci * g.h * g.w;\n"
    "        for (int64_t ki = 0; ki < g.kh; ++ki) {\n"
    "            for (int64_t kj = 0; kj < g.kw; ++kj) {\n"
    "                const int64_t r = (ci * g.kh + ki) * g.kw + kj, dy = ki * g.dh, dx = kj * "
    "g.dw;\n"
    "                for (int64_t q = 0; q * NR < npad; ++q) {\n"
    "                    float *dst = pb + (q * g.r + r) * NR;\n"
    "                    for (int64_t j = 0; j < NR; ++j) {\n"
    "                        const int64_t y = iy[q * NR + j] + dy, x = ix[q * NR + j] + dx;\n"
    "                        dst[j] = y >= 0 && y < g.h && x >= 0 && x < g.w ? xc[y * g.w + x] : "
    "0.0f;\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "// The mr x nr tile at y (row stride ldy) = rows (MR weight rows of kc, those past mr "
    "repeating\n"
    "// a valid one) times one panel.\n"
    "void micro(int64_t kc, const float *const *rows, const float *pb, float *y, int64_t ldy,\n"
    "           int64_t mr, int64_t nr) {\n";

/* kfx_src_tiles's store: the full tile's row i stored. */
static const char CPU_STORE[] = "            store(y + i * ldy, acc[i][0]);\n"
                                "            store(y + i * ldy + VW, acc[i][1]);\n";

/* kfx_src_tiles's after: the element (i, j), then one work item. */
static const char CPU_ITEMS[] =
    "            y[i * ldy + j] = tile[i][j];\n"
    "    }\n"
    "}\n\n"
    "// Output channels [o0, o0 + no) of group gi (indices within the group) at output pixels\n"
    "// [p0, p0 + np) of image ni.\n"
    "void item(const Geo &g, const float *x, const float *wt, float *y, int64_t ni, int64_t gi,\n"
    "          int64_t p0, int64_t np, int64_t o0, int64_t no, float *pb, int64_t *iy, int64_t "
    "*ix) {\n"
    "    pack(g, x + (ni * g.c + gi * g.cg) * g.h * g.w, p0, np, pb, iy, ix);\n"
    "    const int64_t hw = g.oh * g.ow;\n"
    "    for (int64_t o = o0; o < o0 + no; o += MR) {\n"
    "        const int64_t mr = std::min<int64_t>(MR, o0 + no - o);\n"
    "        const float *rows[MR];\n"
    "        for (int64_t i = 0; i < MR; ++i)\n"
    "            rows[i] = wt + (gi * g.ocg + o + std::min<int64_t>(i, mr - 1)) * g.r;\n"
    "        float *yo = y + (ni * g.oc + gi * g.ocg + o) * hw + p0;\n"
    "        for (int64_t q = 0; q * NR < np; ++q)\n"
    "            micro(g.r, rows, pb + q * g.r * NR, yo + q * NR, hw, mr,\n"
    "                  std::min<int64_t>(NR, np - q * NR));\n"
    "    }\n"
    "}\n\n"
    "} // namespace\n\n";

static const char CPU_ENTRY[] =
    "    if (n == 0)\n"
    "        return 0;\n"
    "    const Geo geo{n,  c,  h,  w,  oc, kh, kw,         oh,         ow,\n"
    "                  sh, sw, pt, pl, dh, dw, g,  c / g, oc / g, (c / g) * kh * kw};\n"
    "    const int64_t hw = oh * ow;\n"
    "    int64_t pix = kPanelFloats / geo.r / NR * NR; // output pixels per panel\n"
    "    pix = std::max<int64_t>(NR, std::min<int64_t>(pix, kMaxPixels));\n"
    "    const int64_t pblocks = (hw + pix - 1) / pix, oblocks = (geo.ocg + kChannels - 1) / "
    "kChannels;\n"
    "    const int64_t items = n * g * pblocks * oblocks;\n";

/* The work item's body, for kfx_src_omp_items. */
static const char CPU_ITEM[] =
    "            const int64_t ob = it % oblocks, pbk = (it / oblocks) % pblocks;\n"
    "            const int64_t gi = (it / (oblocks * pblocks)) % g, ni = it / (oblocks * pblocks * "
    "g);\n"
    "            const int64_t p0 = pbk * pix, o0 = ob * kChannels;\n"
    "            item(geo, x, wt, y, ni, gi, p0, std::min(pix, hw - p0), o0,\n"
    "                 std::min(kChannels, geo.ocg - o0), pb, iy, iy + pix);\n";

/* Variant v (0 or 1) on cpu. */
static char *cpu_src(const struct kfx_call *c, int v) {
    static const int panel[] = {32768, 131072}, pixels[] = {256, 512}, chans[] = {64, 128};
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert: %s, conv2d on cpu, variant %d: panels of up to %d floats "
                  "(%d output pixels),\n"
                  "// %d output channels per work item.\n"
                  "// y = conv2d(x, wt), NCHW float32, no bias. Work items (image, group, pixel "
                  "block, channel\n"
                  "// block) go to the OpenMP threads; each packs its pixels' receptive fields "
                  "(implicit im2col)\n"
                  "// into NR-wide panels and multiplies them by the weights with a "
                  "register-blocked MR x NR\n"
                  "// micro-kernel, in fp32.\n"
                  "#include <algorithm>\n#include <cstdint>\n#include <cstdlib>\n"
                  "#include <cstring>\n\nnamespace {\n\n"
                  "constexpr int64_t kPanelFloats = %d, kMaxPixels = %d, kChannels = %d;\n",
                  c->fn, v, panel[v], pixels[v], chans[v], panel[v], pixels[v], chans[v]);
    kfx_src_tiles(&b, "y", CPU_PACK, CPU_STORE, CPU_ITEMS);
    entry_point(&b, c, "__restrict", "1", CPU_ENTRY);
    kfx_src_omp_items(
        &b,
        "        // this thread's panel and pixel coordinates, for this call\n"
        "        float *pb = static_cast<float *>(std::malloc(sizeof(float) * geo.r * "
        "pix));\n"
        "        int64_t *iy = static_cast<int64_t *>(std::malloc(sizeof(int64_t) * 2 * "
        "pix));\n",
        "pb == nullptr || iy == nullptr", CPU_ITEM,
        "        std::free(pb);\n        std::free(iy);\n");
    return b.data;
}

char *kfx_conv_src(const struct kfx_call *c, int v) {
    if (kfx_convnd_rank(c->node) > 0)
        return kfx_convnd_src(c, v);
    bool module;
    if (!is_conv(c->node, &module) || v < 0 || v > 1)
        return NULL;
    return strcmp(c->backend, "cuda") == 0 ? cuda_src(c, v) : cpu_src(c, v);
}
