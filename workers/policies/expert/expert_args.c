/* expert_args.c: the helpers the library-backed generators share, see expert_args.h. */
#include "expert_args.h"

#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert_ops.h"

const char *kfx_arg_short_name(const char *target) {
    const char *dot = strrchr(target, '.');
    return dot ? dot + 1 : target;
}

const json_t *kfx_arg_param(const json_t *node, bool module, size_t pos, const char *name) {
    if (module)
        return json_object_get(json_object_get(node, "attrs"), name);
    const json_t *args = json_object_get(node, "args");
    if (pos < json_array_size(args))
        return json_array_get(args, pos);
    return json_object_get(json_object_get(node, "kwargs"), name);
}

int kfx_arg_avg_opts(const json_t *node, bool module, const char *what, bool *count_pad,
                     long *divisor, char *detail, size_t dlen) {
    const json_t *cip = kfx_arg_param(node, module, 5, "count_include_pad");
    const json_t *div = kfx_arg_param(node, module, 6, "divisor_override");
    *count_pad = cip == NULL || json_is_null(cip) || json_is_true(cip);
    if (div && !json_is_null(div) && (!json_is_integer(div) || json_integer_value(div) == 0)) {
        snprintf(detail, dlen, "%s: divisor_override not understood", what);
        return -1;
    }
    *divisor = json_is_integer(div) ? (long)json_integer_value(div) : 0;
    return 0;
}

int kfx_arg_pair(const json_t *v, const long def[2], long out[2]) {
    if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0)) {
        out[0] = def[0];
        out[1] = def[1];
        return 0;
    }
    if (json_is_integer(v)) {
        out[0] = out[1] = (long)json_integer_value(v);
        return 0;
    }
    size_t n = json_array_size(v);
    if (n > 2)
        return -1;
    for (size_t i = 0; i < 2; i++) {
        const json_t *e = json_array_get(v, n == 1 ? 0 : i);
        if (!json_is_integer(e))
            return -1;
        out[i] = (long)json_integer_value(e);
    }
    return 0;
}

int kfx_arg_operands(const struct kfx_call *c, int n, const char *what, const char *which,
                     char *detail, size_t dlen) {
    if (c->n_in != n) {
        snprintf(detail, dlen, "%s takes %d tensor operand%s%s, not %d", what, n, n == 1 ? "" : "s",
                 which, c->n_in);
        return -1;
    }
    const char *dt =
        json_string_value(json_object_get(json_object_get(c->node, "output"), "dtype"));
    if (dt && strcmp(dt, "float32") != 0) {
        snprintf(detail, dlen, "%s of %s (only float32)", what, dt);
        return -1;
    }
    return 0;
}

const char *kfx_arg_name(const json_t *node) {
    const char *name = json_string_value(json_object_get(node, "name"));
    return name ? name : "?";
}

void kfx_arg_expand(struct kf_buf *b, const char *tmpl, const struct kfx_call *c) {
    for (const char *p = tmpl; *p; p++) {
        if (*p == '@')
            kf_buf_printf(b, "%s", c->out);
        else if (*p == '$')
            kf_buf_printf(b, "%s", c->fn);
        else if (*p == '`' && p[1] >= '0' && p[1] < '0' + c->n_in)
            kf_buf_printf(b, "%s", c->in[*++p - '0']);
        else
            kf_buf_append(b, p, 1);
    }
}

int kfx_arg_emit(struct kf_buf *b, struct kf_buf *t, const struct kfx_call *c) {
    kfx_arg_expand(b, t->data ? t->data : "", c);
    kf_buf_free(t);
    return 0;
}

/* ---- fragments of generated C++ ---- */

static void src_vec(struct kf_buf *b, const char *what) {
    kf_buf_printf(b,
                  "#if defined(__AVX512F__)\n"
                  "constexpr int VW = 16;\n"
                  "#elif defined(__AVX__)\n"
                  "constexpr int VW = 8;\n"
                  "#else\n"
                  "constexpr int VW = 4;\n"
                  "#endif\n"
                  "constexpr int MR = 6, NR = 2 * VW; // the micro-kernel's tile of %s, in "
                  "registers\n"
                  "typedef float vec __attribute__((vector_size(VW * sizeof(float))));\n\n"
                  "inline vec load(const float *p) {\n"
                  "    vec v;\n"
                  "    std::memcpy(&v, p, sizeof v);\n"
                  "    return v;\n"
                  "}\n\n"
                  "inline void store(float *p, vec v) {\n"
                  "    std::memcpy(p, &v, sizeof v);\n"
                  "}\n\n",
                  what);
}

static void src_micro_head(struct kf_buf *b) {
    kf_buf_printf(b, "%s",
                  "    const float *r[MR];\n"
                  "    vec acc[MR][2];\n"
                  "#pragma GCC unroll 8\n"
                  "    for (int i = 0; i < MR; ++i) {\n"
                  "        r[i] = rows[i];\n"
                  "        acc[i][0] = acc[i][1] = vec{};\n"
                  "    }\n"
                  "    for (int64_t p = 0; p < kc; ++p) {\n"
                  "        const vec b0 = load(pb + p * NR), b1 = load(pb + p * NR + VW);\n"
                  "#pragma GCC unroll 8\n"
                  "        for (int i = 0; i < MR; ++i) {\n"
                  "            const float av = r[i][p];\n"
                  "            acc[i][0] += av * b0;\n"
                  "            acc[i][1] += av * b1;\n"
                  "        }\n"
                  "    }\n"
                  "    if (mr == MR && nr == NR) {\n"
                  "#pragma GCC unroll 8\n"
                  "        for (int i = 0; i < MR; ++i) {\n");
}

static void src_micro_tail(struct kf_buf *b) {
    kf_buf_printf(b, "%s",
                  "        }\n"
                  "        return;\n"
                  "    }\n"
                  "    float tile[MR][NR];\n"
                  "    for (int i = 0; i < MR; ++i) {\n"
                  "        store(tile[i], acc[i][0]);\n"
                  "        store(tile[i] + VW, acc[i][1]);\n"
                  "    }\n"
                  "    for (int64_t i = 0; i < mr; ++i) {\n"
                  "        for (int64_t j = 0; j < nr; ++j)\n");
}

void kfx_src_tiles(struct kf_buf *b, const char *what, const char *pack, const char *store,
                   const char *after) {
    src_vec(b, what);
    kf_buf_printf(b, "%s", pack);
    src_micro_head(b);
    kf_buf_printf(b, "%s", store);
    src_micro_tail(b);
    kf_buf_printf(b, "%s", after);
}

void kfx_src_plan_lookup(struct kf_buf *b, const char *nkey) {
    kf_buf_printf(b,
                  "    for (Plan &p : s.plans) {\n"
                  "        bool same = p.ready;\n"
                  "        for (int i = 0; same && i < %s; ++i)\n"
                  "            same = p.key[i] == key[i];\n"
                  "        if (same) {\n"
                  "            *out = &p;\n"
                  "            return 0;\n"
                  "        }\n"
                  "    }\n"
                  "    Plan &p = s.plans[s.next];\n"
                  "    s.next = (s.next + 1) %% kPlans;\n",
                  nkey);
}

void kfx_src_cudnn_check(struct kf_buf *b) {
    kf_buf_printf(b, "%s",
                  "#define KF_CUDNN(call)                                                          "
                  "        \\\n"
                  "    do {                                                                        "
                  "        \\\n"
                  "        const cudnnStatus_t st_ = (call);                                       "
                  "        \\\n"
                  "        if (st_ != CUDNN_STATUS_SUCCESS)                                        "
                  "        \\\n"
                  "            return kCudnnError + (int)st_;                                      "
                  "        \\\n"
                  "    } while (0)\n\n");
}

void kfx_src_cudnn_state(struct kf_buf *b, const char *what, const char *flags, const char *algo) {
    kf_buf_printf(b,
                  "// One shape's descriptors, algorithm and workspace size%s.\n"
                  "struct Plan {\n"
                  "    bool %s;\n"
                  "    int64_t key[kKey] = {};\n"
                  "    cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;\n"
                  "    cudnnFilterDescriptor_t wd = nullptr;\n"
                  "    cudnnConvolutionDescriptor_t cd = nullptr;\n"
                  "    %s\n"
                  "    size_t ws_bytes = 0;\n"
                  "};\n\n"
                  "// The library's state, kept for its lifetime: the handle, a few plans, one "
                  "workspace.\n"
                  "struct State {\n"
                  "    cudnnHandle_t h = nullptr;\n"
                  "    Plan plans[kPlans];\n"
                  "    int next = 0;\n"
                  "    void *ws = nullptr;\n"
                  "    size_t ws_cap = 0;\n"
                  "};\n\n"
                  "State &state() {\n"
                  "    static State s;\n"
                  "    return s;\n"
                  "}\n\n",
                  what, flags, algo);
}

void kfx_src_cudnn_workspace(struct kf_buf *b) {
    kf_buf_printf(b, "%s",
                  "// The shared workspace, grown to at least bytes.\n"
                  "int workspace(State &s, size_t bytes) {\n"
                  "    if (bytes <= s.ws_cap)\n"
                  "        return 0;\n"
                  "    if (s.ws != nullptr)\n"
                  "        cudaFree(s.ws);\n"
                  "    s.ws = nullptr;\n"
                  "    s.ws_cap = 0;\n"
                  "    const cudaError_t e = cudaMalloc(&s.ws, bytes);\n"
                  "    if (e != cudaSuccess) {\n"
                  "        s.ws = nullptr;\n"
                  "        return (int)e;\n"
                  "    }\n"
                  "    s.ws_cap = bytes;\n"
                  "    return 0;\n"
                  "}\n\n");
}

void kfx_src_omp_items(struct kf_buf *b, const char *alloc, const char *bad, const char *item,
                       const char *frees) {
    kf_buf_printf(b,
                  "    int failed = 0;\n"
                  "#pragma omp parallel\n"
                  "    {\n"
                  "%s"
                  "        if (%s) {\n"
                  "#pragma omp atomic write\n"
                  "            failed = 1;\n"
                  "        }\n"
                  "#pragma omp for schedule(dynamic, 1)\n"
                  "        for (int64_t it = 0; it < items; ++it) {\n"
                  "            if (%s)\n"
                  "                continue;\n",
                  alloc, bad, bad);
    kf_buf_printf(b,
                  "%s"
                  "        }\n"
                  "%s"
                  "    }\n"
                  "    return failed ? 2 : 0;\n"
                  "}\n",
                  item, frees);
}
