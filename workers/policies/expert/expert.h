/* expert.h: the built-in `expert` policy (issue 6), which needs no LLM. It is a policy like any
 * other: each call returns the next assistant message (OpenAI format, with tool calls), and it
 * learns only from what the tools return (it reads the judge's verdicts in structured form:
 * ep->last_verdict). This first version handles chains of elementwise operations of float32
 * inputs that broadcast to the output (activations, arithmetic with scalars, up to 4
 * dimensions): it profiles the reference, writes one
 * fused kernel (C++ with OpenMP on cpu, CUDA with vector loads on cuda) in a few variants,
 * compiles, verifies and profiles each, and submits the fastest correct one. Anything else
 * ends the episode with end_reason `unsupported`, naming the operator. */
#ifndef KF_EXPERT_H
#define KF_EXPERT_H

#include <jansson.h>
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

/* expert_ew.c: the elementwise plan. From the inspect graph (the `graph` of profile-reference),
 * the C statements of one element (`const float vN = ...;`, reading in0[i].. and ending with
 * `out[i] = vK;`) in *body (owned) and the number of inputs; 0, or -1 with the unsupported
 * operator or shape in detail. */
int kfw_ew_plan(const json_t *graph, char **body, int *n_inputs, int *bcast, char *detail,
                size_t detaillen);

/* The kernel source of variant v (owned) for the backend; NULL when v is past the last. */
char *kfw_ew_kernel(const char *backend, const char *body, int n_inputs, int v);

/* The model_new.py that calls the kernel (owned). */
char *kfw_ew_model(int n_inputs);

/* "const float *RESTRICT in0, ..., float *RESTRICT out, int64_t n", into b. */
void kfw_ew_params(struct kf_buf *b, int n_inputs, const char *restrict_kw);

/* model_new.py up to the body of forward(self, x0, ...): the docstring (doc), the imports,
 * helpers (Python source, may be ""), the class and __init__, into b. */
void kfw_ew_model_head(struct kf_buf *b, const char *doc, const char *helpers, int n_inputs);

/* The element function `QUAL float kf_elem(float x0, ...)` of a plan's body, into b. */
void kfw_ew_elem(struct kf_buf *b, const char *body, int n_inputs, const char *qual);

/* expert_bcast.c: the same when *bcast (inputs that broadcast to the output, at most 4
 * dimensions): kernels taking the output's dims and each input's strides, and the
 * model_new.py that passes them. */
char *kfw_bcast_kernel(const char *backend, const char *body, int n_inputs, int v);
char *kfw_bcast_model(int n_inputs);

#endif
