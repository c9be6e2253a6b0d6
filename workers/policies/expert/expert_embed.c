/* expert_embed.c: nn.Embedding and F.embedding (KFX_EMBED): the rows of a weight [V, D] that an
 * int64 input of indices names, out[i, :] = weight[idx[i], :], the output of idx's shape plus D;
 * and x[idx] of a float tensor x by an int64 tensor (Swin's relative position bias, a buffer
 * of indices): the rows of x seen as [V, D]. The indices are an input of the task or a buffer,
 * read as they are (never converted to float: see kfx_is_embedding). An embedding by
 * torch.arange (GPT's positions) is a slice of the weight's rows, a view. An index outside [0, V)
 * is an error in PyTorch; here its row is NaN, which the judge's comparison cannot take for a value
 * (a negative index, which x[idx] reads from the end, too: judged incorrect, never silently wrong).
 * max_norm (which rewrites the weight) is refused; padding_idx changes only the gradient. cuda: a
 * block per 8 rows (a warp a row), float4 where D and both rows are 16-byte aligned; cpu: OpenMP
 * over rows. Each source is built in a fresh buffer that the caller owns and frees. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

bool kfx_is_embedding(const json_t *node) {
    const char *mt = json_string_value(json_object_get(node, "module_type"));
    if (mt)
        return strcmp(mt, "Embedding") == 0;
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = kfw_short_name(json_string_value(json_object_get(node, "target")));
    return op && s && strcmp(op, "call_method") != 0 && strcmp(s, "embedding") == 0;
}

static const char *const CUDA =
    "#include <cuda_runtime.h>\n#include <cstdint>\n#include <math.h>\n\n"
    "namespace {\n\n"
    "__global__ void __launch_bounds__(256) rows(const int64_t *__restrict__ idx,\n"
    "        const float *__restrict__ w, float *__restrict__ out, int64_t n, int64_t V,\n"
    "        int64_t D, bool vec) {\n"
    "    const int64_t r = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;\n"
    "    if (r >= n)\n        return;\n"
    "    const int lane = threadIdx.x % 32;\n"
    "    const int64_t i = idx[r];\n"
    "    float *o = out + r * D;\n"
    "    if (i < 0 || i >= V) {\n"
    "        for (int64_t j = lane; j < D; j += 32)\n            o[j] = NAN;\n"
    "        return;\n    }\n"
    "    const float *src = w + i * D;\n"
    "    if (vec) {\n"
    "        const float4 *s4 = reinterpret_cast<const float4 *>(src);\n"
    "        float4 *o4 = reinterpret_cast<float4 *>(o);\n"
    "        for (int64_t j = lane; j < D / 4; j += 32)\n            o4[j] = s4[j];\n"
    "    } else {\n"
    "        for (int64_t j = lane; j < D; j += 32)\n            o[j] = src[j];\n    }\n}\n\n"
    "} // namespace\n\n"
    "extern \"C\" int @FN@(const int64_t *idx, const float *w, float *out, int64_t n, int64_t V,\n"
    "                     int64_t D) {\n"
    "    if (n < 0 || V < 0 || D < 0)\n        return 1;\n"
    "    if (n == 0 || D == 0)\n        return 0;\n"
    "    const bool vec = D % 4 == 0 && ((uintptr_t)w & 15) == 0 && ((uintptr_t)out & 15) == 0;\n"
    "    rows<<<(unsigned)((n + 7) / 8), 256, 0, 0>>>(idx, w, out, n, V, D, vec);\n"
    "    return (int)cudaGetLastError();\n}\n";

static const char *const CPU =
    "#include <cmath>\n#include <cstdint>\n#include <cstring>\n\n"
    "extern \"C\" int @FN@(const int64_t *idx, const float *w, float *out, int64_t n, int64_t V,\n"
    "                     int64_t D) {\n"
    "    if (n < 0 || V < 0 || D < 0)\n        return 1;\n"
    "#pragma omp parallel for schedule(static)\n"
    "    for (int64_t r = 0; r < n; ++r) {\n"
    "        const int64_t i = idx[r];\n"
    "        if (i < 0 || i >= V) {\n"
    "            for (int64_t j = 0; j < D; ++j)\n                out[r * D + j] = NAN;\n"
    "        } else if (D > 0) {\n"
    "            std::memcpy(out + r * D, w + i * D, sizeof(float) * (size_t)D);\n"
    "        }\n    }\n    return 0;\n}\n";

char *kfx_embed_src(const struct kfx_step *st, const char *backend, int v) {
    if (v != 0)
        return NULL;
    const bool cuda = strcmp(backend, "cuda") == 0;
    struct kf_buf b = {0};
    kf_buf_printf(&b, "// kforge expert: %s, embedding rows, variant 0: %s.\n", st->fn,
                  cuda ? "a warp a row, float4 where aligned" : "OpenMP over rows, a memcpy a row");
    const char *t = cuda ? CUDA : CPU;
    for (const char *at; (at = strstr(t, "@FN@")) != NULL; t = at + 4)
        kf_buf_printf(&b, "%.*s%s", (int)(at - t), t, st->fn);
    kf_buf_printf(&b, "%s", t);
    return b.data;
}

/* Val k (node's): the rows of the [V, D] tensor w (Python text) that the int64 tensor ix names,
 * into a new tensor of shape (Python text). 1, or -1 with detail. */
static int rows_step(struct kfx_plan *p, const json_t *node, int k, const char *ix, const char *w,
                     const char *shape, char *detail, size_t dlen) {
    struct kfx_step *st = kfx_add_step(p, KFX_EMBED, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "embedding");
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    kfx_line(p, "%s = _alloc(%s, %s)", out, shape, w);
    kfx_line(p, "self.k.%s(%s, %s, %s, %s.numel(), %s.shape[0], %s.shape[1])", st->fn, ix, w, out,
             ix, w, w);
    return 1;
}

/* Whether val i holds int64 indices in memory: an input of the task or a buffer of the module
 * (or a view of one that is laid out as it is). */
static bool indices(const struct kfx_plan *p, int i) {
    const json_t *tn = i >= 0 ? json_object_get(p->val[i].node, "output") : NULL;
    const char *tdt = json_string_value(json_object_get(tn, "dtype"));
    return i >= 0 && (p->val[i].kind == KFX_INPUT || p->val[i].kind == KFX_PARAM) && tdt &&
           !strcmp(tdt, "int64") && !p->val[i].noncontig && !p->val[i].offset;
}

int kfx_plan_embedding(struct kfx_plan *p, const json_t *node, int k, int weight, char *detail,
                       size_t dlen) {
    const bool module = json_object_get(node, "module_type") != NULL;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *mn =
        module ? json_object_get(attrs, "max_norm") : kfx_node_arg(node, 3, "max_norm");
    int idx = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *in = idx >= 0 ? p->val[idx].node : NULL;
    const char *made = in ? kfw_short_name(json_string_value(json_object_get(in, "target"))) : NULL;
    double start, step;
    if (made && !strcmp(made, "arange") && weight >= 0 && p->val[weight].ndim == 2 &&
        kfx_arange_args(p, in, &start, &step) && start == (long long)start &&
        step == (long long)step && step >= 1.0 && (!mn || json_is_null(mn))) {
        /* wpe(torch.arange(t)): rows start, start + step, ... of the weight, a view */
        if (kfx_materialise(p, weight, detail, dlen) != 0)
            return -1;
        const long long n = p->val[idx].shape[0], a = (long long)start, s = (long long)step;
        char py[160];
        snprintf(py, sizeof(py), "%s[%lld:%lld:%lld]", p->val[weight].py, a, a + n * s, s);
        return kfx_view_as(p, node, k, weight, py);
    }
    if (!indices(p, idx) || weight < 0 || p->val[weight].ndim != 2 || p->val[weight].is_int ||
        (mn && !json_is_null(mn))) {
        snprintf(detail, dlen,
                 "embedding other than of an int64 input of indices into a float weight [V, D], "
                 "without max_norm (not yet)");
        return -1;
    }
    if (kfx_materialise(p, weight, detail, dlen) != 0)
        return -1;
    const char *ix = p->val[idx].py, *w = p->val[weight].py;
    char shape[96];
    snprintf(shape, sizeof(shape), "(*%s.shape, %s.shape[1])", ix, w);
    return rows_step(p, node, k, ix, w, shape, detail, dlen);
}

int kfx_plan_index_rows(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const json_t *args = json_object_get(node, "args");
    int x = kfx_arg_val(p, json_array_get(args, 0));
    int idx = kfx_arg_val(p, json_array_get(args, 1));
    if (idx < 0 || !p->val[idx].is_int || x < 0 || p->val[x].kind == KFX_TUPLE ||
        p->val[x].kind == KFX_SIZE)
        return 0; /* not a tensor indexed by an integer tensor */
    if (!indices(p, idx) || p->val[x].is_int || p->val[x].ndim < 1 ||
        kfx_materialise(p, x, detail, dlen) != 0 || p->val[x].noncontig || p->val[x].offset) {
        if (!detail[0])
            snprintf(detail, dlen,
                     "indexing by a tensor other than an int64 input or buffer, or of a strided "
                     "view (not yet)");
        return -1;
    }
    long long rows = p->val[x].shape[0], per = 1;
    for (int d = 1; d < p->val[x].ndim; d++)
        per *= p->val[x].shape[d];
    char w[24], shape[96];
    snprintf(w, sizeof(w), "w%d", k);
    kfx_line(p, "%s = %s.view(%lld, %lld)", w, p->val[x].py, rows, per);
    snprintf(shape, sizeof(shape), "(*%s.shape, *%s.shape[1:])", p->val[idx].py, p->val[x].py);
    return rows_step(p, node, k, p->val[idx].py, w, shape, detail, dlen);
}
