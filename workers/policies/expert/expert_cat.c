/* expert_cat.c: torch.cat (torch.concat, torch.concatenate) of up to KFX_MAX_CAT float tensors
 * along one dim (KFX_CAT), and torch.stack, a cat of the inputs each unsqueezed at the dim (a
 * length of 1 each). Each input, made contiguous, is a run of outer blocks of len_s *
 * inner contiguous elements that land at (o * total + start_s) * inner in the output: the
 * kernel copies those runs. cuda: a block per chunk of up to 16384 elements of one run, with
 * float4 loads and stores where the run and both ends are 16-byte aligned; cpu: a memcpy per
 * run, OpenMP over runs. Geometry at every call from model_new.py: outer, inner (the output's,
 * _geom over the dim) and each input's length along the dim. Each source is built in a fresh
 * buffer that the caller owns and frees. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

/* "const float *in0, .., float *out, int64_t outer, int64_t inner, int64_t l0, .." */
static void params(struct kf_buf *b, int n) {
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "const float *in%d, ", k);
    kf_buf_printf(b, "float *out, int64_t outer, int64_t inner");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, ", int64_t l%d", k);
}

static void args(struct kf_buf *b, int n) {
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "in%d, ", k);
    kf_buf_printf(b, "out, outer, inner");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, ", l%d", k);
}

static char *cuda(const struct kfx_step *st, int n, int v) {
    struct kf_buf b = {0};
    const int threads = v == 0 ? 256 : 512;
    kf_buf_printf(&b,
                  "// kforge expert: %s, cat of %d, variant %d: %d threads a block, a block per "
                  "chunk of a run.\n#include <cuda_runtime.h>\n#include <cstdint>\n\n"
                  "namespace {\n\nconstexpr int64_t kChunk = 16384;\n\n"
                  "__global__ void __launch_bounds__(%d) cat_runs(",
                  st->fn, n, v, threads, threads);
    params(&b, n);
    kf_buf_printf(&b, ", int64_t per_o) {\n"
                      "    const int64_t o = blockIdx.x / per_o;\n"
                      "    int64_t c = blockIdx.x %% per_o, start = 0, total = 0;\n");
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, "    total += l%d;\n", k);
    kf_buf_printf(&b, "    const float *src = nullptr;\n    int64_t len = 0;\n");
    for (int k = 0; k < n; k++)
        kf_buf_printf(
            &b,
            "    if (src == nullptr) {\n"
            "        const int64_t run = l%d * inner, chunks = (run + kChunk - 1) / kChunk;\n"
            "        if (c < chunks) {\n"
            "            src = in%d + o * run + c * kChunk;\n"
            "            len = run - c * kChunk < kChunk ? run - c * kChunk : kChunk;\n"
            "            start = (o * total + start) * inner + c * kChunk;\n"
            "        } else {\n            c -= chunks;\n            start += l%d;\n"
            "        }\n    }\n",
            k, k, k);
    kf_buf_printf(
        &b,
        "    if (src == nullptr)\n        return;\n"
        "    float *dst = out + start;\n"
        "    if (((uintptr_t)src & 15) == 0 && ((uintptr_t)dst & 15) == 0 && len %% 4 == 0) {\n"
        "        const float4 *s4 = reinterpret_cast<const float4 *>(src);\n"
        "        float4 *d4 = reinterpret_cast<float4 *>(dst);\n"
        "        for (int64_t i = threadIdx.x; i < len / 4; i += blockDim.x)\n"
        "            d4[i] = s4[i];\n"
        "    } else {\n"
        "        for (int64_t i = threadIdx.x; i < len; i += blockDim.x)\n"
        "            dst[i] = src[i];\n    }\n}\n\n} // namespace\n\n"
        "extern \"C\" int %s(",
        st->fn);
    params(&b, n);
    kf_buf_printf(&b, ") {\n    if (outer < 0 || inner < 0)\n        return 1;\n"
                      "    int64_t per_o = 0;\n");
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, "    per_o += (l%d * inner + kChunk - 1) / kChunk;\n", k);
    kf_buf_printf(&b,
                  "    if (outer == 0 || per_o == 0)\n        return 0;\n"
                  "    if (outer * per_o > 0x7fffffff)\n        return 1;\n"
                  "    cat_runs<<<(unsigned)(outer * per_o), %d, 0, 0>>>(",
                  threads);
    args(&b, n);
    kf_buf_printf(&b, ", per_o);\n    return (int)cudaGetLastError();\n}\n");
    return b.data;
}

static char *cpu(const struct kfx_step *st, int n) {
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert: %s, cat of %d, variant 0: a memcpy per run, OpenMP over "
                  "runs.\n#include <cstdint>\n#include <cstring>\n\nextern \"C\" int %s(",
                  st->fn, n, st->fn);
    params(&b, n);
    kf_buf_printf(&b,
                  ") {\n    if (outer < 0 || inner < 0)\n        return 1;\n"
                  "    const float *in[%d] = {",
                  n);
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, "%sin%d", k ? ", " : "", k);
    kf_buf_printf(&b, "};\n    const int64_t l[%d] = {", n);
    for (int k = 0; k < n; k++)
        kf_buf_printf(&b, "%sl%d", k ? ", " : "", k);
    kf_buf_printf(
        &b,
        "};\n    int64_t total = 0, start[%d];\n"
        "    for (int k = 0; k < %d; ++k) {\n        start[k] = total;\n"
        "        total += l[k];\n    }\n"
        "#pragma omp parallel for schedule(static)\n"
        "    for (int64_t r = 0; r < outer * %d; ++r) {\n"
        "        const int64_t o = r / %d, k = r %% %d;\n"
        "        if (l[k] * inner > 0)\n"
        "            std::memcpy(out + (o * total + start[k]) * inner, in[k] + o * l[k] * "
        "inner,\n                        sizeof(float) * (size_t)(l[k] * inner));\n"
        "    }\n    return 0;\n}\n",
        n, n, n, n, n);
    return b.data;
}

char *kfx_cat_src(const struct kfx_step *st, const char *backend, int v) {
    const bool is_cuda = strcmp(backend, "cuda") == 0;
    if (v < 0 || v >= (is_cuda ? 2 : 1))
        return NULL;
    return is_cuda ? cuda(st, st->n_ins, v) : cpu(st, st->n_ins);
}

int kfx_plan_cat(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen) {
    const bool stack = strcmp(s, "stack") == 0;
    if (strcmp(s, "cat") != 0 && strcmp(s, "concat") != 0 && strcmp(s, "concatenate") != 0 &&
        !stack)
        return 0;
    const json_t *list = kfx_node_arg(node, 0, "tensors"), *dj = kfx_node_arg(node, 1, "dim");
    const size_t n = json_array_size(list);
    int in[KFX_MAX_CAT];
    const json_t *outj = json_object_get(node, "output");
    const char *dt = json_string_value(json_object_get(outj, "dtype"));
    const int nd = (int)json_array_size(json_object_get(outj, "shape"));
    long long d = dj ? (json_is_integer(dj) ? json_integer_value(dj) : -99) : 0;
    d = d < 0 && d >= -nd ? d + nd : d;
    bool ok = json_is_array(list) && n >= 1 && n <= KFX_MAX_CAT && d >= 0 && d < nd && dt &&
              !strcmp(dt, "float32");
    for (size_t i = 0; ok && i < n; i++) {
        in[i] = kfx_arg_val(p, json_array_get(list, i));
        ok = in[i] >= 0 && !p->val[in[i]].is_int && p->val[in[i]].ndim == nd - stack &&
             p->val[in[i]].kind != KFX_TUPLE && p->val[in[i]].kind != KFX_SIZE;
    }
    if (!ok) {
        snprintf(detail, dlen,
                 "%s of other than 1 to %d float tensors of one rank along one dim (not yet)",
                 stack ? "stack" : "cat", KFX_MAX_CAT);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (kfx_materialise(p, in[i], detail, dlen) != 0)
            return -1;
    struct kfx_step *st = kfx_add_step(p, KFX_CAT, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "cat");
    st->n_ins = (int)n;
    char xs[KFX_MAX_CAT * 20] = "", lens[KFX_MAX_CAT * 40] = "", out[16];
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(xs), b = strlen(lens);
        snprintf(xs + a, sizeof(xs) - a, "%s, ", p->val[in[i]].py);
        if (stack)
            snprintf(lens + b, sizeof(lens) - b, ", 1");
        else
            snprintf(lens + b, sizeof(lens) - b, ", %s.shape[%lld]", p->val[in[i]].py, d);
    }
    snprintf(out, sizeof(out), "t%d", k);
    kfx_set_val(p, k, node, KFX_TENSOR, out);
    kfx_line(p, "%s = _alloc(_%s_shape(%lld, %.*s), %s)", out, stack ? "stack" : "cat", d,
             (int)strlen(xs) - 2, xs, p->like);
    kfx_line(p, "%s_g = _geom(%s.shape, (%lld,), True)", out, out, d);
    kfx_line(p, "self.k.%s(%s%s, %s_g[0], %s_g[2]%s)", st->fn, xs, out, out, out, lens);
    return 1;
}
