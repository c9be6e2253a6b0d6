/* expert_cast.c: the conversion kernel of a boolean or integer input or result (KFX_CAST): a mask
 * (torch.bool), class indices or counts (int64, int32) read once into a float32 tensor of the
 * same shape, so that every other kernel reads it as the float it becomes in PyTorch's type
 * promotion (x * mask). Exact for booleans and for integers up to 2^24 in magnitude, the range
 * in which a float32 computation in PyTorch sees them exactly too. st->op holds the input's C
 * element type. Each source is built in a fresh buffer that the caller owns and frees. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert_plan.h"

const char *kfx_cast_ctype(const char *dtype) {
    static const char *const map[][2] = {
        {"bool", "bool"}, {"int64", "int64_t"}, {"int32", "int32_t"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (dtype && strcmp(dtype, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

char *kfx_cast_src(const struct kfx_step *st, const char *backend, int v) {
    if (v != 0)
        return NULL;
    struct kf_buf b = {0};
    if (strcmp(backend, "cuda") == 0)
        kf_buf_printf(
            &b,
            "// kforge expert: %s, %s to float32, variant 0: 256 threads, grid-stride.\n"
            "#include <cuda_runtime.h>\n#include <cstdint>\n\n"
            "namespace {\n\n"
            "__global__ void cast(const %s *__restrict__ in, float *__restrict__ out, "
            "int64_t n) {\n"
            "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
            "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
            "i += stride)\n"
            "        out[i] = (float)in[i];\n"
            "}\n\n"
            "} // namespace\n\n"
            "extern \"C\" int %s(const %s *in, float *out, int64_t n) {\n"
            "    if (n <= 0)\n"
            "        return n < 0;\n"
            "    const int64_t want = (n + 255) / 256;\n"
            "    cast<<<(unsigned)(want < 65535 * 16 ? want : 65535 * 16), 256, 0, 0>>>(in, "
            "out, n);\n"
            "    return (int)cudaGetLastError();\n"
            "}\n",
            st->fn, st->op, st->op, st->fn, st->op);
    else
        kf_buf_printf(&b,
                      "// kforge expert: %s, %s to float32, variant 0: OpenMP.\n"
                      "#include <cstdint>\n\n"
                      "extern \"C\" int %s(const %s *in, float *out, int64_t n) {\n"
                      "    if (n < 0)\n"
                      "        return 1;\n"
                      "#pragma omp parallel for simd schedule(static)\n"
                      "    for (int64_t i = 0; i < n; ++i)\n"
                      "        out[i] = (float)in[i];\n"
                      "    return 0;\n"
                      "}\n",
                      st->fn, st->op, st->fn, st->op);
    return b.data;
}

int kfx_plan_cast(struct kfx_plan *p, int k, const char *dtype, char *detail, size_t dlen) {
    const char *ctype = kfx_cast_ctype(dtype);
    if (ctype == NULL) {
        snprintf(detail, dlen, "input %s is a %s tensor (not yet)", p->val[k].py,
                 dtype ? dtype : "non-tensor");
        return -1;
    }
    struct kfx_step *st = kfx_add_step(p, KFX_CAST, detail, dlen);
    if (st == NULL)
        return -1;
    snprintf(st->op, sizeof(st->op), "%s", ctype);
    char out[16];
    snprintf(out, sizeof(out), "t%d", k);
    kfx_line(p, "%s = _alloc(%s.shape, %s)", out, p->val[k].py, p->val[k].py);
    kfx_line(p, "self.k.%s(%s, %s, %s.numel())", st->fn, p->val[k].py, out, out);
    p->val[k].kind = KFX_TENSOR;
    snprintf(p->val[k].py, sizeof(p->val[k].py), "%s", out);
    p->val[k].is_int = 0;
    return 0;
}

/* x.float(), x.to(torch.float32) and x.type(torch.float32): 0 when the node is none of them
 * or casts to another dtype; for a float or a comparison's boolean, the same value (lazy);
 * for an integer result (an arg-reduction's indices), a KFX_CAST step into a float32 tensor,
 * as PyTorch converts it. 1 handled, -1 with detail. */
int kfx_plan_to_float32(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *s = json_string_value(json_object_get(node, "target"));
    const json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
    const char *dt = json_string_value(json_object_get(json_object_get(node, "output"), "dtype"));
    if (strcmp(op, "call_method") != 0 || dt == NULL || strcmp(dt, "float32") != 0)
        return 0;
    size_t na = json_array_size(args), nk = json_object_size(kw);
    const char *to = na == 2 ? json_string_value(json_array_get(args, 1))
                             : json_string_value(json_object_get(kw, "dtype"));
    bool plain = !strcmp(s, "float") && na == 1 && nk == 0;
    bool named = (!strcmp(s, "to") || !strcmp(s, "type")) && na + nk == 2 && to != NULL &&
                 !strcmp(to, "float32");
    if (!plain && !named)
        return 0;
    int j = kfx_arg_val(p, json_array_get(args, 0));
    if (j < 0)
        return 0;
    struct kfx_val *v = &p->val[j];
    if (v->kind == KFX_TUPLE || v->kind == KFX_SIZE || v->kind == KFX_DEVICE)
        return 0;
    if (!v->is_int || v->kind == KFX_LAZY) { /* already read as float by elementwise code */
        char e[16];
        snprintf(e, sizeof(e), "v%d", j);
        return kfx_set_lazy(p, k, node, e) == 0 ? 1 : -1;
    }
    if (v->kind != KFX_TENSOR || v->noncontig || v->offset) {
        snprintf(detail, dlen, "%s of a strided view of an integer result (not yet)", s);
        return -1;
    }
    kfx_set_val(p, k, node, KFX_TENSOR, v->py);
    p->val[k].is_int = 1;
    return kfx_plan_cast(p, k, "int64", detail, dlen) == 0 ? 1 : -1;
}
