/* expert_multi.c: the kernels of a KFX_MULTI step (expert_plan_multi.c): K sibling reductions
 * (sum, mean, prod, var0/1, std0/1) of inputs of one shape over the same dims, read once. Each
 * reduction has its own prologue (sK::kf_elem over its leaves, a subset of the step's) and its
 * own accumulators in double: the value (a sum or a product) and, for var and std, the sum of
 * squares, finished as expert_rows.c finishes them.
 *
 * Geometry, passed at every call by model_new.py (_geom): [outer, red, inner], each output
 * [outer, inner].
 * cuda: contiguous rows (inner == 1) take a block each; few long rows are split over several
 * blocks (a 2-D grid) whose partial accumulators a second kernel combines, in a workspace that
 * the library keeps and grows. Otherwise one thread walks one column.
 * cpu: one output per iteration, shared out to the OpenMP threads.
 * Each source is built in a fresh buffer that the caller owns and frees. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

/* The accumulators: struct Acc, acc_init, KF_ACC_ADD (the element at idx), acc_merge and
 * acc_write (the outputs at o). */
static void acc(struct kf_buf *b, const struct kfx_step *st, const char *q) {
    kf_buf_printf(b, "constexpr int K = %d;\n\nstruct Acc {\n    double v[K], s[K];\n};\n\n",
                  st->n_sub);
    kf_buf_printf(b, "%s Acc acc_init() {\n    Acc a;\n", q);
    for (int k = 0; k < st->n_sub; k++)
        kf_buf_printf(b, "    a.v[%d] = %s;\n    a.s[%d] = 0.0;\n", k,
                      strcmp(st->sub[k].op, "prod") == 0 ? "1.0" : "0.0", k);
    /* KF_ACC_ADD(a, idx): a macro, as the inputs are the caller's parameters (one line) */
    kf_buf_printf(b, "    return a;\n}\n\n#define KF_ACC_ADD(a, idx) do {");
    for (int k = 0; k < st->n_sub; k++) {
        const struct kfx_sub *s = &st->sub[k];
        kf_buf_printf(b, " { const double x_ = (double)s%d::kf_elem(", k);
        for (int j = 0; j < s->n; j++)
            kf_buf_printf(b, st->pro_scalar[s->map[j]] ? "%sin%d[0]" : "%sin%d[(idx)]",
                          j ? ", " : "", s->map[j]);
        bool var = s->op[0] == 'v' || (s->op[0] == 's' && s->op[1] == 't');
        kf_buf_printf(b, "); (a).v[%d] %s= x_;", k, strcmp(s->op, "prod") == 0 ? "*" : "+");
        if (var)
            kf_buf_printf(b, " (a).s[%d] += x_ * x_;", k);
        kf_buf_printf(b, " }");
    }
    kf_buf_printf(b, " } while (0)\n\n");
    kf_buf_printf(b, "%s void acc_merge(Acc &a, const Acc &b) {\n", q);
    for (int k = 0; k < st->n_sub; k++)
        kf_buf_printf(b, "    a.v[%d] %s= b.v[%d];\n    a.s[%d] += b.s[%d];\n", k,
                      strcmp(st->sub[k].op, "prod") == 0 ? "*" : "+", k, k, k);
    kf_buf_printf(b, "}\n\n%s void acc_write(const Acc &a, int64_t o, int64_t red", q);
    for (int k = 0; k < st->n_sub; k++)
        kf_buf_printf(b, ", float *out%d", k);
    kf_buf_printf(b, ") {\n    const double n = (double)red;\n    (void)n;\n");
    for (int k = 0; k < st->n_sub; k++) {
        const char *op = st->sub[k].op;
        if (!strcmp(op, "mean"))
            kf_buf_printf(b, "    out%d[o] = (float)(a.v[%d] / n);\n", k, k);
        else if (!strcmp(op, "sum") || !strcmp(op, "prod"))
            kf_buf_printf(b, "    out%d[o] = (float)a.v[%d];\n", k, k);
        else /* var0, var1, std0, std1: correction op[3] */
            kf_buf_printf(b,
                          "    out%d[o] = (float)%s(fmax(a.s[%d] - a.v[%d] * a.v[%d] / n, 0.0) / "
                          "(n - %c));\n",
                          k, op[0] == 's' ? "sqrt" : "", k, k, k, op[3]);
    }
    kf_buf_printf(b, "}\n\n");
}

/* ", float *out0, .." (decl) or ", out0, .." */
static void outs(struct kf_buf *b, const struct kfx_step *st, bool decl) {
    for (int k = 0; k < st->n_sub; k++)
        kf_buf_printf(b, decl ? ", float *out%d" : ", out%d", k);
}

static void ins(struct kf_buf *b, const struct kfx_step *st, bool decl) {
    for (int i = 0; i < st->n_leaves; i++)
        kf_buf_printf(b, decl ? "%sconst float *__restrict__ in%d" : "%sin%d", i ? ", " : "", i);
}

/* every input, then every output, declared */
static void params(struct kf_buf *b, const struct kfx_step *st) {
    ins(b, st, true);
    outs(b, st, true);
}

static const char CUDA_BLOCK[] =
    "__device__ __forceinline__ void acc_warp(Acc &a) {\n"
    "    for (int off = 16; off > 0; off >>= 1) {\n"
    "        Acc b;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < K; ++k) {\n"
    "            b.v[k] = __shfl_down_sync(0xffffffffu, a.v[k], off);\n"
    "            b.s[k] = __shfl_down_sync(0xffffffffu, a.s[k], off);\n"
    "        }\n"
    "        acc_merge(a, b);\n"
    "    }\n"
    "}\n\n"
    "// The block's accumulators, merged into thread 0's.\n"
    "__device__ void acc_block(Acc &a) {\n"
    "    __shared__ Acc part[32];\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    acc_warp(a);\n"
    "    if (lane == 0)\n"
    "        part[warp] = a;\n"
    "    __syncthreads();\n"
    "    if (warp == 0) {\n"
    "        a = lane < (int)((blockDim.x + 31) >> 5) ? part[lane] : acc_init();\n"
    "        acc_warp(a);\n"
    "    }\n"
    "    __syncthreads(); // part is written again for the next row\n"
    "}\n\n";

static void cuda_kernels(struct kf_buf *b, const struct kfx_step *st) {
    kf_buf_printf(b, "%s", CUDA_BLOCK);
    kf_buf_printf(b, "// Rows: blockIdx.y a row, blockIdx.x a chunk of it; partials to ws when "
                     "split.\n__global__ void multi_rows(");
    params(b, st);
    kf_buf_printf(b, ", int64_t outer, int64_t red, int64_t chunk, Acc *ws) {\n"
                     "    for (int64_t r = blockIdx.y; r < outer; r += gridDim.y) {\n"
                     "        Acc a = acc_init();\n"
                     "        const int64_t j0 = (int64_t)blockIdx.x * chunk;\n"
                     "        const int64_t j1 = j0 + chunk < red ? j0 + chunk : red;\n"
                     "        const int64_t t = blockDim.x, base = r * red;\n"
                     "        int64_t j = j0 + threadIdx.x;\n"
                     "        // four elements a thread at once: their loads in flight together\n"
                     "        for (; j + 3 * t < j1; j += 4 * t) {\n"
                     "            KF_ACC_ADD(a, base + j);\n"
                     "            KF_ACC_ADD(a, base + j + t);\n"
                     "            KF_ACC_ADD(a, base + j + 2 * t);\n"
                     "            KF_ACC_ADD(a, base + j + 3 * t);\n"
                     "        }\n"
                     "        for (; j < j1; j += t)\n"
                     "            KF_ACC_ADD(a, base + j);\n"
                     "        acc_block(a);\n"
                     "        if (threadIdx.x != 0)\n"
                     "            continue;\n"
                     "        if (gridDim.x == 1)\n"
                     "            acc_write(a, r, red");
    outs(b, st, false);
    kf_buf_printf(b,
                  ");\n        else\n            ws[r * gridDim.x + blockIdx.x] = a;\n    }\n}\n\n"
                  "// A warp per row (blockIdx.x): lane l merges partials l, l + 32, ... in chunk "
                  "order,\n// then the lanes in a fixed order (one thread for 2048 partials took "
                  "0.25 ms).\n__global__ void multi_combine(");
    kf_buf_printf(b, "const Acc *ws");
    outs(b, st, true);
    kf_buf_printf(b, ", int64_t red, int64_t splits) {\n"
                     "    const int64_t r = blockIdx.x;\n"
                     "    Acc a = acc_init();\n"
                     "    for (int64_t i = threadIdx.x; i < splits; i += 32)\n"
                     "        acc_merge(a, ws[r * splits + i]);\n"
                     "    acc_warp(a);\n"
                     "    if (threadIdx.x == 0)\n"
                     "        acc_write(a, r, red");
    outs(b, st, false);
    kf_buf_printf(b, ");\n}\n\n// Columns: a thread each.\n__global__ void multi_cols(");
    params(b, st);
    kf_buf_printf(b, ", int64_t outer, int64_t red, int64_t inner) {\n"
                     "    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < "
                     "outer * inner;\n         c += (int64_t)gridDim.x * blockDim.x) {\n"
                     "        Acc a = acc_init();\n"
                     "        int64_t idx = (c / inner) * red * inner + c %% inner;\n"
                     "        for (int64_t j = 0; j < red; ++j, idx += inner)\n"
                     "            KF_ACC_ADD(a, idx);\n"
                     "        acc_write(a, c, red");
    outs(b, st, false);
    kf_buf_printf(b, ");\n    }\n}\n\n"
                     "// The partials' workspace, kept for the library's lifetime and grown.\n"
                     "Acc *workspace(size_t n) {\n"
                     "    static Acc *ws = nullptr;\n"
                     "    static size_t cap = 0;\n"
                     "    if (n > cap) {\n"
                     "        cudaFree(ws);\n"
                     "        ws = nullptr;\n"
                     "        cap = 0;\n"
                     "        if (cudaMalloc(&ws, n * sizeof(Acc)) != cudaSuccess)\n"
                     "            return nullptr;\n"
                     "        cap = n;\n"
                     "    }\n"
                     "    return ws;\n"
                     "}\n\n} // namespace\n\n");
}

static void cuda_entry(struct kf_buf *b, const struct kfx_step *st, int threads) {
    kf_buf_printf(b,
                  "    if (outer <= 0 || inner <= 0 || red < 0)\n"
                  "        return outer < 0 || inner < 0 || red < 0;\n"
                  "    if (inner > 1 || red == 0) {\n"
                  "        const int64_t want = (outer * inner + 255) / 256;\n"
                  "        multi_cols<<<(unsigned)(want < 65535 * 16 ? want : 65535 * 16), 256, 0, "
                  "0>>>(");
    ins(b, st, false);
    outs(b, st, false);
    kf_buf_printf(b,
                  ", outer, red, inner);\n        return (int)cudaGetLastError();\n    }\n"
                  "    // few long rows: each split over blocks of 8192 elements or more, about "
                  "2048 blocks in all\n"
                  "    int64_t splits = 1;\n"
                  "    if (outer < 1024 && red >= 32768) {\n"
                  "        splits = (2048 + outer - 1) / outer;\n"
                  "        if (splits > red / 8192)\n            splits = red / 8192;\n"
                  "    }\n"
                  "    const int64_t chunk = (red + splits - 1) / splits;\n"
                  "    Acc *ws = splits > 1 ? workspace((size_t)(outer * splits)) : nullptr;\n"
                  "    if (splits > 1 && ws == nullptr)\n"
                  "        return (int)cudaErrorMemoryAllocation;\n"
                  "    const dim3 grid((unsigned)splits, (unsigned)(outer < 65535 ? outer : "
                  "65535));\n"
                  "    multi_rows<<<grid, %d, 0, 0>>>(",
                  threads);
    ins(b, st, false);
    outs(b, st, false);
    kf_buf_printf(b, ", outer, red, chunk, ws);\n    if (splits > 1)\n"
                     "        multi_combine<<<(unsigned)outer, 32, 0, 0>>>(ws");
    outs(b, st, false);
    kf_buf_printf(b, ", red, splits);\n    return (int)cudaGetLastError();\n}\n");
}

char *kfx_multi_src(const struct kfx_step *st, const char *backend, int v) {
    bool cuda = strcmp(backend, "cuda") == 0;
    if (v < 0 || v >= (cuda ? 2 : 1) || st->n_sub < 1)
        return NULL;
    const int threads = v == 0 ? 256 : 512;
    const char *q = cuda ? "__device__ __forceinline__" : "inline";
    struct kf_buf b = {0};
    kf_buf_printf(&b, "// kforge expert: %s, %d sibling reductions (", st->fn, st->n_sub);
    for (int k = 0; k < st->n_sub; k++)
        kf_buf_printf(&b, "%s%s", k ? ", " : "", st->sub[k].op);
    kf_buf_printf(
        &b, ") read once, variant %d: %s.\n#include <cmath>\n#include <cstdint>\n%s\n", v,
        cuda ? (v == 0 ? "a block of 256 threads per row" : "a block of 512 threads per row")
             : "one output per iteration, OpenMP",
        cuda ? "#include <cuda_runtime.h>\n" : "");
    kf_buf_printf(&b, "namespace {\n\n");
    for (int k = 0; k < st->n_sub; k++) {
        kf_buf_printf(&b, "namespace s%d {\n\n", k);
        kfw_ew_elem(&b, st->sub[k].body, st->sub[k].n, q);
        kf_buf_printf(&b, "} // namespace s%d\n\n", k);
    }
    acc(&b, st, q);
    if (cuda)
        cuda_kernels(&b, st);
    else
        kf_buf_printf(&b, "} // namespace\n\n");
    kf_buf_printf(&b, "extern \"C\" int %s(", st->fn);
    params(&b, st);
    kf_buf_printf(&b, ", int64_t outer, int64_t red, int64_t inner) {\n");
    if (cuda) {
        cuda_entry(&b, st, threads);
        return b.data;
    }
    kf_buf_printf(&b, "    if (outer < 0 || red < 0 || inner < 0)\n        return 1;\n"
                      "#pragma omp parallel for schedule(static)\n"
                      "    for (int64_t c = 0; c < outer * inner; ++c) {\n"
                      "        Acc a = acc_init();\n"
                      "        int64_t idx = (c / inner) * red * inner + c %% inner;\n"
                      "        for (int64_t j = 0; j < red; ++j, idx += inner)\n"
                      "            KF_ACC_ADD(a, idx);\n"
                      "        acc_write(a, c, red");
    outs(&b, st, false);
    kf_buf_printf(&b, ");\n    }\n    return 0;\n}\n");
    return b.data;
}
