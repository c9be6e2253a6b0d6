/* expert_embed.c: nn.Embedding and F.embedding (KFX_EMBED): the rows of a weight [V, D] that an
 * int64 input of indices names, out[i, :] = weight[idx[i], :], the output of idx's shape plus D.
 * The indices are an input of the task read as they are (never converted to float: see
 * kfx_is_embedding). An index outside [0, V) is an error in PyTorch; here its row is NaN, which
 * the judge's comparison cannot take for a value. max_norm (which rewrites the weight) is
 * refused; padding_idx changes only the gradient. cuda: a block per 8 rows (a warp a row), float4
 * where D and both rows are 16-byte aligned; cpu: OpenMP over rows. Each source is built in a
 * fresh buffer that the caller owns and frees. */
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

int kfx_plan_embedding(struct kfx_plan *p, const json_t *node, int k, int weight, char *detail,
                       size_t dlen) {
    const bool module = json_object_get(node, "module_type") != NULL;
    const json_t *attrs = json_object_get(node, "attrs");
    const json_t *mn =
        module ? json_object_get(attrs, "max_norm") : kfx_node_arg(node, 3, "max_norm");
    int idx = kfx_arg_val(p, kfx_node_arg(node, 0, "input"));
    const json_t *tn = idx >= 0 ? json_object_get(p->val[idx].node, "output") : NULL;
    const char *tdt = json_string_value(json_object_get(tn, "dtype"));
    if (idx < 0 || weight < 0 || p->val[idx].kind != KFX_INPUT || !tdt || strcmp(tdt, "int64") ||
        p->val[weight].ndim != 2 || p->val[weight].is_int || (mn && !json_is_null(mn))) {
        snprintf(detail, dlen,
                 "embedding other than of an int64 input of indices into a float weight [V, D], "
                 "without max_norm (not yet)");
        return -1;
    }
    if (kfx_materialise(p, weight, detail, dlen) != 0)
        return -1;
    struct kfx_step *st = kfx_add_step(p, KFX_EMBED, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "embedding");
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    const char *ix = p->val[idx].py, *w = p->val[weight].py;
    kfx_line(p, "%s = _alloc((*%s.shape, %s.shape[1]), %s)", out, ix, w, w);
    kfx_line(p, "self.k.%s(%s, %s, %s, %s.numel(), %s.shape[0], %s.shape[1])", st->fn, ix, w, out,
             ix, w, w);
    return 1;
}
