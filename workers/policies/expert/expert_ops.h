/* expert_ops.h: the expert's generators for operators backed by a library or a sliding window:
 * the matmul family, convolutions and pooling. Each turns one FX node of the `inspect`
 * graph into (1) the Python lines of ModelNew.forward() that allocate the node's output and call
 * its kernel, and (2) the kernel's source, in variants. The planner (expert_plan.c) owns the
 * order of the nodes, the names, the fusion of what comes before and after (a linear layer's or
 * a convolution's bias is added by the planner's fused elementwise pass, not here), and which
 * variant is tried when. */
#ifndef KF_EXPERT_OPS_H
#define KF_EXPERT_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct kf_buf;

/* One node to generate: every field borrowed from the planner. */
struct kfx_call {
    const json_t *node; /* the FX node: op, target, args, kwargs, output; module_type, attrs and
                           parameters when op is call_module */
    const char *fn;     /* the extern "C" function to define and call, e.g. "kf_op3" */
    const char *in[4];  /* Python expressions of the tensor operands, each a contiguous float32
                           tensor on the backend's device, in the order each kind documents */
    int n_in;
    const char *out;     /* the Python local to assign the output tensor to, e.g. "t3" */
    const char *backend; /* "cuda" or "cpu" */
    bool trans_b;        /* matmul: in[1] is the contiguous tensor whose last two dims, swapped,
                            are b (a @ k.transpose(-2, -1)), passed as is with op = transpose */
    bool trans_a;        /* matmul: the same for in[0] and a (x.T @ y) */
    const char *b_view;  /* trans_b, for kfx_gemm_py: the Python expression of b itself */
    const char *a_view;  /* trans_a: of a */
    /* a convolution's epilogue (cuda; NULL: none): the elementwise body (expert_ew.c's format)
     * over epi_leaves leaves, leaf 0 the convolution's value and leaf k > 0 an extra operand
     * read at the output's flat index j as k[0] (epi_scalar[k]), k[(j / q) % m] (epi_bcast[k])
     * or k[j]; the function then takes those operands and the output after its own arguments
     * (expert_conv_epi.c) */
    const char *epi_body;
    int epi_leaves;
    const unsigned char *epi_scalar;
    const unsigned char *epi_bcast;
};

/* The Python lines (each indented 8 spaces, ending in a newline) appended to py: they compute
 * the output's shape from the operands' shapes at run time (the judge also runs other shapes),
 * allocate `out` (torch.empty / new_empty: ModelNew may allocate and take views, never compute)
 * and call `self.k.<fn>(...)` (kforge_runtime: a tensor passes as a pointer, an int as int64_t,
 * a float as float). Temporaries are named `<out>_<something>`. 0, or -1 with what is not
 * supported in detail (e.g. "conv2d with groups 2 (not yet)"). */
typedef int (*kfx_py_fn)(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);

/* The source (owned) of kernels/<fn>.cu (cuda) or kernels/<fn>.cpp (cpu), variant v: it defines
 * `extern "C" int <fn>(...)` (0 on success, a CUDA or library error code otherwise; CUDA work on
 * stream 0) and keeps every other symbol internal (static or an anonymous namespace), since
 * several generated files link into one library. NULL when v is past the last variant; variant
 * 0 always exists. Must compile warning-free with nvcc -O3 -std=c++17 / g++ -O3 -Wall -Wextra
 * -fopenmp. No TF32 or lower precision: full float32 arithmetic, as the judge demands. */
typedef char *(*kfx_src_fn)(const struct kfx_call *c, int v);

/* torch.matmul, torch.mm, torch.bmm, `@` (_operator.matmul): in = {a, b}; a [.., M, K] and
 * b [K, N] or b batched like a. torch.nn.functional.linear and nn.Linear: in = {x, weight},
 * x [.., K], weight [N, K]: out = x @ weight^T (the bias, if any, is the planner's). */
int kfx_gemm_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);
char *kfx_gemm_src(const struct kfx_call *c, int v);
/* expert_gemm_split.c: the CUDA section of large products on TF32 tensor cores with split
 * operands (use_split, split_gemm), appended to b inside the source's namespace, after the
 * cuBLAS handle. */
void kfx_gemm_split_src(struct kf_buf *b);
/* The split itself (split_one, the split_tf32 kernel, split_space), which both use. */
void kfx_src_split_kernel(struct kf_buf *b);
/* expert_conv_split.c: the CUDA section of convolutions on TF32 tensor cores with split
 * operands (SplitConv, split_conv), appended to b inside the source's namespace, after its
 * cuDNN State and workspace. */
void kfx_conv_split_src(struct kf_buf *b);
/* expert_conv_igemm.c: the CUDA section of fp32 convolutions as implicit GEMMs of our own
 * (IgPlan, ig_run, ig_or: the faster of it and the caller's cuDNN path), appended to b inside
 * the source's namespace. */
void kfx_conv_igemm_src(struct kf_buf *b);

/* expert_conv_epi.c: a fused convolution's epilogue (c->epi_body), for both convolution
 * generators' cuda sources. kfx_conv_epi_open: where the exported function's signature goes,
 * params its parameters' text: without an epilogue that signature, with one the epilogue's
 * section (KfEpi), then kf_core's signature (params, then the epilogue, out and done); KF_EPI
 * defined as ig_or's last arguments either way. kfx_conv_epi_close: after the body, with one,
 * the exported function (params, the extra operands, out), which calls kf_core with names and
 * applies the pass where the core left the plain output in y; total: the C expression of the
 * output's element count. */
void kfx_conv_epi_open(struct kf_buf *b, const struct kfx_call *c, const char *params);
void kfx_conv_epi_close(struct kf_buf *b, const struct kfx_call *c, const char *params,
                        const char *names, const char *total);

/* nn.Conv2d or torch.nn.functional.conv2d / torch.conv2d: in = {x, weight}; x [N, C, H, W],
 * weight [OC, C/groups, KH, KW]; stride, padding, dilation from attrs / args / kwargs; the bias,
 * if any, is the planner's. */
int kfx_conv_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);
char *kfx_conv_src(const struct kfx_call *c, int v);

/* The other convolutions, expert_convnd.c: nn.Conv1d / nn.Conv3d, F.conv1d / F.conv3d, and the
 * transposed ones of 1, 2 or 3 dimensions (nn.ConvTranspose1d/2d/3d, F.conv_transpose1d/2d/3d):
 * in = {x, weight}; x [N, C, *spatial] or unbatched, weight [OC, C/groups, *k] (transposed:
 * [C, OC/groups, *k]); the bias, if any, is the planner's. kfx_conv_py and kfx_conv_src hand
 * these nodes here. kfx_convnd_rank: the node's spatial dimensions, 0 when it is none of these. */
int kfx_convnd_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);
char *kfx_convnd_src(const struct kfx_call *c, int v);
int kfx_convnd_rank(const json_t *node);

/* nn.MaxPool2d / nn.AvgPool2d or torch.nn.functional.max_pool2d / avg_pool2d: in = {x};
 * x [N, C, H, W]; kernel_size, stride (default: kernel_size), padding, and for avg
 * count_include_pad (default true) and ceil_mode (default false). */
int kfx_pool_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);
char *kfx_pool_src(const struct kfx_call *c, int v);

/* 3-D pooling, expert_pool3d.c: nn.MaxPool3d / nn.AvgPool3d, F.max_pool3d / F.avg_pool3d:
 * in = {x}; x [N, C, D, H, W] or [C, D, H, W]; the options as in 2-D. kfx_pool_py and
 * kfx_pool_src hand these nodes here; kfx_pool3d_is: whether node is one. */
int kfx_pool3d_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen);
char *kfx_pool3d_src(const struct kfx_call *c, int v);
int kfx_pool3d_is(const json_t *node);

#endif
