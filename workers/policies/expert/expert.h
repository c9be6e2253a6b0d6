/* expert.h: the built-in `expert` policy, which needs no LLM. It is a policy like any
 * other: each call returns the next assistant message (OpenAI format, with tool calls), and it
 * learns only from what the tools return (it reads the judge's verdicts in structured form:
 * ep->last_verdict). It profiles the reference, plans kernels from the operator graph
 * (expert_plan.h), writes them (C++ with OpenMP on cpu, CUDA on cuda) with model_new.py,
 * compiles, verifies and profiles them, tries each kernel's variants in turn (keeping the
 * fastest correct one), and submits the best. What it cannot plan ends the episode with
 * end_reason `unsupported`, naming the operator. */
#ifndef KF_EXPERT_H
#define KF_EXPERT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct kfw_episode;
struct kfw_expert;

/* A new expert for one episode (backend "cuda" or "cpu"), or NULL when memory ran out. */
struct kfw_expert *kfw_expert_new(const char *backend);
void kfw_expert_free(struct kfw_expert *x);

/* The next assistant message (owned by the caller), or NULL when the expert stops: then
 * *why is "unsupported" (detail names the operator) or "" (nothing more to do). */
json_t *kfw_expert_next(struct kfw_expert *x, const json_t *last_verdict, char *why, size_t whylen,
                        char *detail, size_t detaillen);

struct kf_buf;

/* expert_ew.c: elementwise code. */
/* The operator's short name: "torch.nn.functional.gelu" -> "gelu", "_operator.add" -> "add". */
const char *kfw_short_name(const char *target);

/* A float literal of C for v ("2.0f", "1e-05f") in buf. */
const char *kfw_ew_lit(double v, char buf[40]);

/* tanh of sp, where sp is softplus's default expression of some x, in one exponential: 0, or -1
 * when sp is not that form. */
int kfw_tanh_softplus(const char *sp, char *e, size_t n);

/* The less common one-operand operators (expert_unary.c): op of a with keywords kw into e; 0,
 * or -1 when op is not one of them. */
int kfw_unary_more(const char *op, const json_t *kw, const char *a, char *e, size_t n);

/* The C expression of elementwise operator op (a short name) with keyword arguments kw over the
 * operand expressions a and b (nargs of them: 1 or 2) into e; 0, or -1 when op is not one. */
int kfw_ew_expr(const char *op, const json_t *kw, const char *a, const char *b, int nargs, char *e,
                size_t n);

/* The kernel source of variant v (owned), defining extern "C" fn(in0.., out, n) over a body
 * (`const float vN = ...;` reading in0[i].. and ending with `out[i] = vK;`) for the backend;
 * NULL when v is past the last. scalar (NULL: none): input k holds one value (a 0-d constant,
 * a parameter of one element) that every element reads, as inK[0]. */
char *kfw_ew_kernel(const char *backend, const char *fn, const char *body, int n_inputs,
                    const unsigned char *scalar, int v);

/* "const float *RESTRICT in0, ..., float *RESTRICT out, int64_t n", into b. */
void kfw_ew_params(struct kf_buf *b, int n_inputs, const char *restrict_kw);

/* The element function `QUAL float kf_elem(float x0, ...)` of a body, into b (QUAL without
 * __device__: a cpu kernel's, with kfw_cpu_math's functions). */
void kfw_ew_elem(struct kf_buf *b, const char *body, int n_inputs, const char *qual);

/* expert_cpu_math.c: for a cpu kernel's body that calls erff, expf, tanhf, fmaxf or fminf, the
 * definitions of kf_expf, kf_erff, kf_tanhf, kf_fmaxf and kf_fminf (vectorisable) into b, and
 * the body with those calls renamed
 * (owned by the caller); NULL, b untouched, when the body calls none of them. */
char *kfw_cpu_math(struct kf_buf *b, const char *body);
/* Whether body calls any of them (kfw_cpu_math then defines all five); and the definitions
 * alone, into b, for a kernel that calls kf_expf itself. */
bool kfw_cpu_math_used(const char *body);
void kfw_cpu_math_defs(struct kf_buf *b);
/* Their pragma alone (no floating-point traps), into b, for a kernel whose functions before
 * the definitions are inlined into one after them: g++ inlines across a change of optimize
 * options poorly (the cpu fused layer_norm_gelu took 4.9 ms with the pragma halfway through
 * its source, 2.3 with it first). */
void kfw_cpu_math_pragma(struct kf_buf *b);

/* A pass along one row of the output with float4 loads and stores, as kf_rows4 (expert_bcast.c)
 * and the fused norm (expert_norm_fused.c) write it. In the generated code, input k has a row
 * pointer pK and a last stride sK3, 1 (read as float4) or 0 (one value per row, bK); an input
 * with value[k] set is passed to the element function as that expression of the pass instead (a
 * norm's "mu") and read by none of the code below. */
struct kfw_row4 {
    int n;                    /* inputs */
    const char *const *value; /* NULL (all tensors), or per input NULL or the value to pass */
    const char *elem;         /* the element function: "kf_elem", "ew::kf_elem" */
    const char *in;           /* the host's name of input k's pointer is <in>k: "in", "e" */
    int pad;                  /* the row's statements' indent; the loop body's: 4 more */
    /* NULL, or per input nonzero where the caller already holds it as the float4 aK of column c */
    const unsigned char *held;
    /* nonzero: every input read runs along the row (the launch checked each sK3 == 1), so its
     * float4 is loaded without the per-input test that the general pass makes (that test cost
     * the H200's batch norm pass 22%: 1.267 ms against 1.035 without it) */
    int along;
};

/* `const float bK = sK3 ? 0.0f : pK[0];` (at pad), into b; nothing when r->along. */
void kfw_row4_base(struct kf_buf *b, const struct kfw_row4 *r, int k);

/* The body of the caller's loop over the row's float4 columns c: each input's float4 aK (pK's
 * c-th, or bK four times), y = the element function of them lane by lane, and `OUT4[c] = y;`
 * (out4 an expression of type float4 *), into b. */
void kfw_row4_body(struct kf_buf *b, const struct kfw_row4 *r, const char *out4);

/* The host's test that the pass applies, into b: `bool VAR = ROWS && <out 16-byte aligned>;`
 * (rows: the caller's condition on the row length d3, at least "d3 % 4 == 0"), then a line a
 * tensor input: it broadcasts along the row, or runs along it with stride 1 from a 16-byte
 * aligned start at every row (its pointer aligned, its other strides multiples of 4). */
void kfw_row4_check(struct kf_buf *b, const struct kfw_row4 *r, const char *var, const char *rows);

/* expert_bcast.c: the same when the inputs broadcast to the output (at most 4 dimensions):
 * fn(in0.., out, n, d1, d2, d3, s00, s01, s02, s03, s10, ...) with the output's last three dims
 * and each input's strides in the output's index space (0 where it broadcasts). */
char *kfw_bcast_kernel(const char *backend, const char *fn, const char *body, int n_inputs, int v);

/* expert_bcast.c, the cpu row loop where some input does not run along its row (a norm's mean
 * and 1/std, one value per row): the row d3 in chunks of KF_CH columns, each input pK read with
 * stride sK3 first copied to a chunk buffer on the stack unless that stride is 1 (one value
 * repeated where it is 0), so that the chunk's loop `o[c0 + j] = ELEM(...)` reads every input
 * contiguously and vectorises (g++ gathered every element of a strided loop: layer_norm over
 * 32 x 112 x 2048 took 11.5 ms on this machine's CPU, 4.2 ms with the chunks). value:
 * NULL, or per input an expression of one value (read in place of pK, no buffer) or NULL.
 * kfw_cpu_chunk_defs: KF_CH and kf_chunk, which the loop calls. */
void kfw_cpu_chunks(struct kf_buf *b, int n, const char *elem, const char *const *value);
void kfw_cpu_chunk_defs(struct kf_buf *b);

#endif
