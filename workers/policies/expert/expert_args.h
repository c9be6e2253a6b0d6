/* expert_args.h: what the library-backed generators (expert_gemm.c, expert_conv.c,
 * expert_pool.c; see expert_ops.h) share. It owns (1) reading a node: the short name of its
 * target, an argument by position or keyword (or a module's attribute), an int-or-pair
 * parameter, the output's dtype; (2) expanding the Python templates' placeholders; and (3) the
 * C++ fragments that more than one generated source repeats (the vector type and micro-kernel
 * scaffolding of the cpu kernels, the plan-cache lookup and the OpenMP work loop).
 * Nothing here keeps state: nodes are only read and text is appended to the caller's buffer. */
#ifndef KF_EXPERT_ARGS_H
#define KF_EXPERT_ARGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct kf_buf;
struct kfx_call;

/* "torch.nn.functional.linear" -> "linear": what follows the last dot of target. */
const char *kfx_arg_short_name(const char *target);

/* A module's attribute name (module), or a function's argument: args[pos], else kwargs[name];
 * NULL when absent. */
const json_t *kfx_arg_param(const json_t *node, bool module, size_t pos, const char *name);

/* An average pooling's options (nn.AvgPool*d / F.avg_pool*d, positions 5 and 6):
 * count_include_pad (default true) into *count_pad and divisor_override (0: none) into *divisor.
 * 0, or -1 with detail naming what (the node) when the divisor is not a nonzero int. */
int kfx_arg_avg_opts(const json_t *node, bool module, const char *what, bool *count_pad,
                     long *divisor, char *detail, size_t dlen);

/* An int or a list of 1 or 2 ints into out; def[] when v is absent, null or empty. 0, or -1. */
int kfx_arg_pair(const json_t *v, const long def[2], long out[2]);

/* Whether c has n tensor operands and a float32 output (or none given): 0, or -1 with
 * "<what> takes <n> tensor operand(s)<which>, not <n_in>" or "<what> of <dtype> (only float32)"
 * in detail. */
int kfx_arg_operands(const struct kfx_call *c, int n, const char *what, const char *which,
                     char *detail, size_t dlen);

/* The node's name, "?" when it has none. */
const char *kfx_arg_name(const json_t *node);

/* Appends tmpl to b with `@` replaced by c's output name, `$` by its function's and `0, `1, ..
 * by its operands' expressions. */
void kfx_arg_expand(struct kf_buf *b, const char *tmpl, const struct kfx_call *c);

/* Appends t's text (NULL: nothing) to b expanded as kfx_arg_expand does, then frees t. 0. */
int kfx_arg_emit(struct kf_buf *b, struct kf_buf *t, const struct kfx_call *c);

/* ---- fragments of generated C++ ---- */

/* The cpu kernels' register tiling, in this order: the vector width VW, the tile MR x NR ("the
 * micro-kernel's tile of <what>"), the vector type `vec` and its load / store; then pack (the
 * caller's code up to and including the micro-kernel's opening line, which takes kc, rows, pb,
 * mr and nr); the micro-kernel's MR x 2 accumulators over kc and its full-tile loop over rows i,
 * whose body is store; its partial tile through `tile`, in a loop over (i < mr, j < nr) whose
 * body is after's first line; then the rest of after. */
void kfx_src_tiles(struct kf_buf *b, const char *what, const char *pack, const char *store,
                   const char *after);

/* The cached plan of `key` (nkey entries) among s.plans: returns it through *out when found,
 * else takes the oldest slot as `Plan &p`. */
void kfx_src_plan_lookup(struct kf_buf *b, const char *nkey);

/* expert_gemm.c's cuBLAS handle, for another generator's source (expert_rnn.c): kCublasError
 * and `cublasHandle_t handle()` (created once, full fp32 math), inside the source's namespace. */
void kfx_src_cublas_handle(struct kf_buf *b);

/* The cuDNN generators' KF_CUDNN(call) (return kCudnnError + the status unless it succeeded). */
void kfx_src_cudnn_check(struct kf_buf *b);

/* The cuDNN generators' `struct Plan` (one shape's descriptors, algorithm and workspace size:
 * what ends its comment, its bool fields with their defaults, its algorithm field's line), the
 * `struct State` of kPlans of them with the handle and the workspace, and `State &state()`. */
void kfx_src_cudnn_state(struct kf_buf *b, const char *what, const char *flags, const char *algo);

/* The cuDNN generators' `int workspace(State &s, size_t bytes)`: s.ws (s.ws_cap bytes) grown to
 * at least bytes, 0 or the CUDA error. */
void kfx_src_cudnn_workspace(struct kf_buf *b);

/* The end of a cpu entry point: `int failed = 0;` and an OpenMP parallel region whose threads
 * run alloc (their scratch), flag failed when `bad`, share out the work items `it < items` (body
 * item, skipped when `bad`), run frees; then `return failed ? 2 : 0;` and the closing brace. */
void kfx_src_omp_items(struct kf_buf *b, const char *alloc, const char *bad, const char *item,
                       const char *frees);

#endif
