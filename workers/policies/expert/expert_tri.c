/* expert_tri.c: torch.tril and torch.triu (functions and methods, any diagonal) for the expert.
 * The last two dims of the input keep the elements on one side of a diagonal and zero the
 * rest: the planner reads that as an elementwise select against a rows x cols float mask
 * (1 kept, 0 zeroed), which broadcasts over the leading dims like a bias does, so the select
 * fuses into the chain around it (a matmul's tail, a scale after it). The mask is made by its
 * own small kernel (KFX_MASK) when the module first sees its shape and device, and kept on the
 * module (_mask in model_new.py says when it is new): later calls read it, which costs one extra
 * read of rows x cols floats in the fused pass. A select, not a product: tril keeps a NaN or an
 * infinity where it keeps elements and writes 0 elsewhere, which x * mask would not. Each source is
 * built in a fresh buffer that the caller owns and frees. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

/* The element test of the kept side, over row i and column j: "j - i <= 1" (tril, diagonal 1). */
static void keep_test(const struct kfx_step *st, char *out, size_t n) {
    snprintf(out, n, "j - i %s %d", strcmp(st->op, "tril") == 0 ? "<=" : ">=", st->diag);
}

char *kfx_mask_src(const struct kfx_step *st, const char *backend, int v) {
    if (v != 0)
        return NULL;
    char test[48];
    keep_test(st, test, sizeof(test));
    struct kf_buf b = {0};
    if (strcmp(backend, "cuda") == 0)
        kf_buf_printf(
            &b,
            "// kforge expert: %s, the %s mask (%s), variant 0: 256 threads, grid-stride.\n"
            "#include <cuda_runtime.h>\n#include <cstdint>\n\n"
            "namespace {\n\n"
            "__global__ void mask(float *__restrict__ out, int64_t rows, int64_t cols) {\n"
            "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
            "    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * cols;"
            " e += stride) {\n"
            "        const int64_t i = e / cols, j = e %% cols;\n"
            "        out[e] = %s ? 1.0f : 0.0f;\n"
            "    }\n"
            "}\n\n"
            "} // namespace\n\n"
            "extern \"C\" int %s(float *out, int64_t rows, int64_t cols) {\n"
            "    if (rows <= 0 || cols <= 0)\n"
            "        return rows < 0 || cols < 0;\n"
            "    const int64_t want = (rows * cols + 255) / 256;\n"
            "    mask<<<(unsigned)(want < 65535 * 16 ? want : 65535 * 16), 256, 0, 0>>>(out, "
            "rows, cols);\n"
            "    return (int)cudaGetLastError();\n"
            "}\n",
            st->fn, st->op, test, test, st->fn);
    else
        kf_buf_printf(&b,
                      "// kforge expert: %s, the %s mask (%s), variant 0: OpenMP over rows.\n"
                      "#include <cstdint>\n\n"
                      "extern \"C\" int %s(float *out, int64_t rows, int64_t cols) {\n"
                      "    if (rows < 0 || cols < 0)\n"
                      "        return 1;\n"
                      "#pragma omp parallel for schedule(static)\n"
                      "    for (int64_t i = 0; i < rows; ++i)\n"
                      "        for (int64_t j = 0; j < cols; ++j)\n"
                      "            out[i * cols + j] = %s ? 1.0f : 0.0f;\n"
                      "    return 0;\n"
                      "}\n",
                      st->fn, st->op, test, st->fn, test);
    return b.data;
}

int kfx_tri_mask(struct kfx_plan *p, int k, const char *op, long long rows, long long cols,
                 long long diag, char *detail, size_t dlen) {
    /* past either corner every element is kept or every one zeroed: clamped into an int */
    diag = diag < -rows - 1 ? -rows - 1 : diag > cols + 1 ? cols + 1 : diag;
    if (p->n_vals >= KFX_MAX_VALS) {
        snprintf(detail, dlen, "a graph of more than %d nodes", KFX_MAX_VALS);
        return -1;
    }
    struct kfx_step *st = kfx_add_step(p, KFX_MASK, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "%s", op);
    st->diag = (int)diag;
    char m[16];
    snprintf(m, sizeof(m), "m%d", k);
    const long long shape[2] = {rows, cols};
    int mv = kfx_new_val(p, m, shape, 2);
    if (mv < 0)
        return -1;
    /* the mask's shape is the graph's: a call with other sizes in those two dims fails in the
     * select's broadcast with PyTorch's shape error, never silently */
    kfx_line(p, "%s, %s_new = _mask(self, \"%s\", %lld, %lld, %s)", m, m, m, rows, cols, p->like);
    kfx_line(p, "if %s_new:", m);
    kfx_line(p, "    self.k.%s(%s, %lld, %lld)", st->fn, m, rows, cols);
    return mv;
}

int kfx_plan_tri(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen) {
    if (strcmp(s, "tril") != 0 && strcmp(s, "triu") != 0)
        return 0;
    int in = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *dj = kfx_node_arg(node, 1, "diagonal");
    if (in < 0 || p->val[in].is_int || p->val[in].kind == KFX_SIZE ||
        p->val[in].kind == KFX_TUPLE || p->val[in].ndim < 2 || (dj && !json_is_integer(dj)) ||
        p->n_vals >= KFX_MAX_VALS) {
        snprintf(detail, dlen,
                 "%s of something that is not a float tensor of 2 or more dims, "
                 "or with a diagonal that is not an int (not yet)",
                 s);
        return -1;
    }
    const long long rows = p->val[in].shape[p->val[in].ndim - 2];
    const long long cols = p->val[in].shape[p->val[in].ndim - 1];
    int mv = kfx_tri_mask(p, k, s, rows, cols, dj ? json_integer_value(dj) : 0, detail, dlen);
    if (mv < 0)
        return -1;
    char e[64];
    snprintf(e, sizeof(e), "v%d != 0.0f ? v%d : 0.0f", mv, in);
    return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
}
