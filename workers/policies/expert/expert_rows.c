/* expert_rows.c: the expert's kernels that reduce along a dimension: reductions (sum, mean,
 * amax, amin, argmax, argmin, logsumexp, prod, var, std), softmax and log-softmax, and the moments
 * (mean and 1/std) of the norms. The input is read through the step's prologue (kf_elem over its
 * leaves, all of the input's shape), so an elementwise chain before the reduction costs no pass.
 *
 * Geometry, passed at every call by model_new.py (_geom): the input is [outer, red, inner];
 * the reduction runs over red. On cuda a row (inner == 1) is reduced by one block with warp
 * shuffles; otherwise one thread walks one column. The moments kernel reads [A, G, B] and
 * reduces each g over A and B in double precision, writing its result rep times (its cuda
 * kernels: expert_moments.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"
#include "expert_moments.h"
#include "expert_rows_reg.h"

/* Leaf k's parameters (decl) or arguments: its pointer, and its (q, m) when it broadcasts. */
static void leaf_param(struct kf_buf *b, const struct kfx_step *st, int k, bool decl) {
    kf_buf_printf(b, decl ? "const float *__restrict__ in%d, " : "in%d, ", k);
    if (st->pro_bcast[k])
        kf_buf_printf(b, decl ? "int64_t q%d, int64_t m%d, " : "q%d, m%d, ", k, k);
}

/* Appends tmpl with @IN@ (the leaves' parameters), @ARGS@ (their names), @FN@ and @T@ (the
 * block size) replaced. */
void kfx_rows_put(struct kf_buf *b, const char *tmpl, const struct kfx_step *st, int threads) {
    for (const char *q = tmpl; *q;) {
        if (strncmp(q, "@IN@", 4) == 0) {
            for (int k = 0; k < st->n_leaves; k++)
                leaf_param(b, st, k, true);
            q += 4;
        } else if (strncmp(q, "@ARGS@", 6) == 0) {
            for (int k = 0; k < st->n_leaves; k++)
                leaf_param(b, st, k, false);
            q += 6;
        } else if (strncmp(q, "@FN@", 4) == 0) {
            kf_buf_printf(b, "%s", st->fn);
            q += 4;
        } else if (strncmp(q, "@T@", 3) == 0) {
            kf_buf_printf(b, "%d", threads);
            q += 3;
        } else {
            kf_buf_append(b, q, 1);
            q++;
        }
    }
}

/* The accumulator of each operator: Acc, acc_init, acc_add (x at index j), acc_merge, and the
 * result type and acc_fin (over red elements). QUAL is the function qualifier. */
static void acc_code(struct kf_buf *b, const char *op, const char *qual) {
    bool arg = strncmp(op, "arg", 3) == 0;
    bool lse = strcmp(op, "logsumexp") == 0 || strcmp(op, "softmax") == 0 ||
               strcmp(op, "log_softmax") == 0;
    bool sum = strcmp(op, "sum") == 0 || strcmp(op, "mean") == 0;
    bool prod = strcmp(op, "prod") == 0;
    /* var0, var1, std0, std1: the variance (standard deviation) with correction 0 or 1, from
     * the sum and the sum of squares in double */
    bool var = strncmp(op, "var", 3) == 0 || strncmp(op, "std", 3) == 0;
    bool mx = strcmp(op, "amax") == 0 || strcmp(op, "argmax") == 0;
    const char *init = sum || var ? "0.0f" : prod ? "1.0f" : lse || mx ? "-INFINITY" : "INFINITY";
    /* sums accumulate in double: a long serial sum in float loses what the judge measures; a
     * product too, so that no partial product over- or underflows where the result does not */
    kf_buf_printf(b, "struct Acc {\n    %s v;\n    %s s;\n    int64_t i;\n};\n\n",
                  sum || prod || var ? "double" : "float", var ? "double" : "float");
    kf_buf_printf(b, "%s Acc acc_init() { return Acc{%s, 0.0f, INT64_MAX}; }\n\n", qual, init);
    if (var) {
        kf_buf_printf(b,
                      "%s void acc_add(Acc &a, float x, int64_t) {\n"
                      "    a.v += x;\n    a.s += (double)x * x;\n}\n"
                      "%s Acc acc_merge(Acc a, Acc b) {\n"
                      "    a.v += b.v;\n    a.s += b.s;\n    return a;\n}\n",
                      qual, qual);
    } else if (prod) {
        kf_buf_printf(b,
                      "%s void acc_add(Acc &a, float x, int64_t) { a.v *= x; }\n"
                      "%s Acc acc_merge(Acc a, Acc b) { a.v *= b.v; return a; }\n",
                      qual, qual);
    } else if (sum) {
        kf_buf_printf(b,
                      "%s void acc_add(Acc &a, float x, int64_t) { a.v += x; }\n"
                      "%s Acc acc_merge(Acc a, Acc b) { a.v += b.v; return a; }\n",
                      qual, qual);
    } else if (lse) {
        kf_buf_printf(b,
                      "%s Acc acc_merge(Acc a, Acc b) {\n"
                      "    if (b.v == -INFINITY) return a;\n"
                      "    if (a.v == -INFINITY) return b;\n"
                      "    if (a.v >= b.v) return Acc{a.v, a.s + b.s * expf(b.v - a.v), 0};\n"
                      "    return Acc{b.v, b.s + a.s * expf(a.v - b.v), 0};\n}\n"
                      "%s void acc_add(Acc &a, float x, int64_t) { a = acc_merge(a, Acc{x, "
                      "1.0f, 0}); }\n",
                      qual, qual);
    } else if (!arg) {
        /* amax, amin: NaN wins (as in PyTorch); no index to keep */
        kf_buf_printf(
            b,
            "%s void acc_add(Acc &a, float x, int64_t) { if (x != x || x %c a.v) a.v = x; "
            "}\n"
            "%s Acc acc_merge(Acc a, Acc b) { return b.v != b.v || b.v %c a.v ? b : a; }\n",
            qual, mx ? '>' : '<', qual, mx ? '>' : '<');
    } else {
        /* arg-extremes: NaN wins (as in PyTorch), then the value, then the lower index */
        kf_buf_printf(b,
                      "%s bool acc_better(float x, int64_t i, float v, int64_t j) {\n"
                      "    if (x != x) return v == v || i < j;\n"
                      "    if (v != v) return false;\n"
                      "    return x %c v || (x == v && i < j);\n}\n"
                      "%s void acc_add(Acc &a, float x, int64_t j) {\n"
                      "    if (acc_better(x, j, a.v, a.i)) { a.v = x; a.i = j; }\n}\n"
                      "%s Acc acc_merge(Acc a, Acc b) { return acc_better(b.v, b.i, a.v, a.i) ? "
                      "b : a; }\n",
                      qual, mx ? '>' : '<', qual, qual);
    }
    char vfin[160];
    snprintf(vfin, sizeof(vfin),
             "(float)%s(fmax(a.s - a.v * a.v / (double)red, 0.0) / (double)(red - %c))",
             strncmp(op, "std", 3) == 0 ? "sqrt" : "", var ? op[3] : '0');
    const char *fin = var                        ? vfin
                      : strcmp(op, "mean") == 0  ? "a.v / (float)red"
                      : arg                      ? "a.i == INT64_MAX ? 0 : a.i"
                      : !strcmp(op, "logsumexp") ? "a.v == -INFINITY ? a.v : a.v + logf(a.s)"
                                                 : "a.v";
    if (strcmp(op, "softmax") != 0) /* softmax writes rows, not one value */
        kf_buf_printf(b, "%s %s acc_fin(Acc a, int64_t red) { (void)red; return %s; }\n\n", qual,
                      arg ? "int64_t" : "float", fin);
}

static const char CUDA_BLOCK_REDUCE[] =
    "__device__ __forceinline__ Acc acc_shfl(Acc a, int off) {\n"
    "    Acc b;\n"
    "    b.v = __shfl_down_sync(0xffffffffu, a.v, off);\n"
    "    b.s = __shfl_down_sync(0xffffffffu, a.s, off);\n"
    "    b.i = __shfl_down_sync(0xffffffffu, a.i, off);\n"
    "    return b;\n"
    "}\n\n"
    "// The block's combined accumulator, in every thread.\n"
    "__device__ Acc block_reduce(Acc a) {\n"
    "    __shared__ Acc part[32];\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    for (int off = 16; off > 0; off >>= 1)\n"
    "        a = acc_merge(a, acc_shfl(a, off));\n"
    "    __syncthreads();\n"
    "    if (lane == 0)\n"
    "        part[warp] = a;\n"
    "    __syncthreads();\n"
    "    a = lane < (int)((blockDim.x + 31) >> 5) ? part[lane] : acc_init();\n"
    "    for (int off = 16; off > 0; off >>= 1)\n"
    "        a = acc_merge(a, acc_shfl(a, off));\n"
    "    return Acc{__shfl_sync(0xffffffffu, a.v, 0), __shfl_sync(0xffffffffu, a.s, 0),\n"
    "               __shfl_sync(0xffffffffu, a.i, 0)};\n"
    "}\n\n";

/* The start of a columns kernel's body: each thread's accumulator of its share of a column,
 * stored in part[][] for the block to combine. */
#define COLS_HEAD                                                                                  \
    "    __shared__ Acc part[SPLIT][32];\n"                                                        \
    "    const int64_t i = (int64_t)blockIdx.x * 32 + threadIdx.x;\n"                              \
    "    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {\n"                              \
    "        const int64_t base = o * red * inner + i;\n"                                          \
    "        Acc a = acc_init();\n"                                                                \
    "        if (i < inner) {\n"                                                                   \
    "            int64_t j = threadIdx.y;\n"                                                       \
    "            ACC4(SPLIT, inner, (void)0)\n"                                                    \
    "        }\n"                                                                                  \
    "        part[threadIdx.y][threadIdx.x] = a;\n"                                                \
    "        __syncthreads();\n"

/* The end of a launcher: tiles of columns when inner > 1. */
#define COLS_LAUNCH                                                                                \
    "    } else {\n"                                                                               \
    "        const dim3 grid((unsigned)((inner + 31) / 32), (unsigned)(outer < 65535 ? outer : "   \
    "65535));\n"                                                                                   \
    "        cols<<<grid, dim3(32, SPLIT), 0, 0>>>(@ARGS@out, outer, red, inner);\n"               \
    "    }\n"                                                                                      \
    "    return (int)cudaGetLastError();\n"                                                        \
    "}\n"

static const char CUDA_REDUCE[] =
    "__global__ void rows(@IN@OutT *__restrict__ out, int64_t outer, int64_t red) {\n"
    "    for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {\n"
    "        const int64_t base = r * red;\n"
    "        Acc a = acc_init();\n"
    "        if (KF_ROW_V4(red))\n"
    "            ACC_V4(threadIdx.x, blockDim.x)\n"
    "        else {\n"
    "            ROW_ACC(blockDim.x, 1, (void)0)\n"
    "        }\n"
    "        a = block_reduce(a);\n"
    "        if (threadIdx.x == 0)\n"
    "            out[r] = acc_fin(a, red);\n"
    "    }\n"
    "}\n\n"
    "// Short rows (red <= 1024): a warp per row, combined by shuffles alone (a block per row\n"
    "// spends more on its two barriers than on the row's loads).\n"
    "__global__ void rows_warp(@IN@OutT *__restrict__ out, int64_t outer, int64_t red) {\n"
    "    const int lane = threadIdx.x & 31;\n"
    "    const int64_t wpb = blockDim.x >> 5;\n"
    "    for (int64_t r = (int64_t)blockIdx.x * wpb + (threadIdx.x >> 5); r < outer;\n"
    "         r += (int64_t)gridDim.x * wpb) {\n"
    "        const int64_t base = r * red;\n"
    "        Acc a = acc_init();\n"
    "        int64_t j = lane;\n"
    "        if (KF_ROW_V4(red)) {\n"
    "            ACC_V4(lane, 32)\n"
    "        } else {\n"
    "            ACC4(32, 1, (void)0)\n"
    "        }\n"
    "        for (int off = 16; off > 0; off >>= 1)\n"
    "            a = acc_merge(a, acc_shfl(a, off));\n"
    "        if (lane == 0)\n"
    "            out[r] = acc_fin(a, red);\n"
    "    }\n"
    "}\n\n"
    "// Few long rows (a loss's mean, a norm over everything): gridDim.x blocks per row (y), each\n"
    "// reducing its chunk into part[], which rows_merge combines: one block per row left most of\n"
    "// the GPU idle (the H200: a 128 MiB mean 22.9 ms against eager's 0.3).\n"
    "__global__ void rows_split(@IN@Acc *__restrict__ part, int64_t red, int64_t chunk) {\n"
    "    const int64_t r = blockIdx.y, j0 = (int64_t)blockIdx.x * chunk;\n"
    "    const int64_t j1 = j0 + chunk < red ? j0 + chunk : red, base = r * red;\n"
    "    Acc a = acc_init();\n"
    "    if (KF_ROW_V4(red) && chunk % 4 == 0) { // j0, j1 and base multiples of 4: float4 loads\n"
    "#pragma unroll 4\n"
    "        for (int64_t q = j0 / 4 + threadIdx.x; q < j1 / 4; q += blockDim.x) {\n"
    "            const float4 u = KF_LOAD4(base / 4 + q);\n"
    "            ACC_ADD4(a, u, 4 * q)\n"
    "        }\n"
    "    } else {\n"
    "#pragma unroll 4\n"
    "        for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x)\n"
    "            acc_add(a, KF_LOAD(base + j), j);\n"
    "    }\n"
    "    a = block_reduce(a);\n"
    "    if (threadIdx.x == 0)\n"
    "        part[r * gridDim.x + blockIdx.x] = a;\n"
    "}\n\n"
    "// One warp per row: its splits' partials combined in order of their chunks.\n"
    "__global__ void rows_merge(const Acc *__restrict__ part, OutT *__restrict__ out, int64_t "
    "red,\n"
    "                           int splits) {\n"
    "    const int64_t r = blockIdx.x;\n"
    "    Acc a = acc_init();\n"
    "    for (int s = threadIdx.x; s < splits; s += 32)\n"
    "        a = acc_merge(a, part[r * splits + s]);\n"
    "    for (int off = 16; off > 0; off >>= 1)\n"
    "        a = acc_merge(a, acc_shfl(a, off));\n"
    "    if (threadIdx.x == 0)\n"
    "        out[r] = acc_fin(a, red);\n"
    "}\n\n"
    "// The partials' buffer, kept and grown for the library's lifetime (stream 0 orders its\n"
    "// uses); nullptr when it cannot be had.\n"
    "Acc *partials(int64_t n) {\n"
    "    static Acc *buf = nullptr;\n"
    "    static int64_t cap = 0;\n"
    "    if (n > cap) {\n"
    "        if (buf != nullptr)\n"
    "            cudaFree(buf);\n"
    "        buf = nullptr;\n"
    "        cap = 0;\n"
    "        if (cudaMalloc(&buf, (size_t)n * sizeof(Acc)) != cudaSuccess)\n"
    "            return buf = nullptr;\n"
    "        cap = n;\n"
    "    }\n"
    "    return buf;\n"
    "}\n\n"
    "// A tile of 32 columns per block, its rows split over SPLIT threads (threadIdx.y), combined\n"
    "// in shared memory: loads coalesced along the columns, SPLIT loads in flight per column.\n"
    "__global__ void cols(@IN@OutT *__restrict__ out, int64_t outer, int64_t red, int64_t "
    "inner) {\n" COLS_HEAD "        if (threadIdx.y == 0 && i < inner) {\n"
    "            for (int y = 1; y < SPLIT; ++y)\n"
    "                a = acc_merge(a, part[y][threadIdx.x]);\n"
    "            out[o * inner + i] = acc_fin(a, red);\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n\n"
    "// cols with four adjacent columns per thread (float4 loads, two rows in flight), 128 per\n"
    "// block: a warp reads 512 bytes of a row at once, not 128 (the H200's sum over dim 1 of\n"
    "// (384, 256, 16384): 1.45 ms against 1.88, bench/kernels/pass_shapes_bench.cu).\n"
    "__global__ void cols4(@IN@OutT *__restrict__ out, int64_t outer, int64_t red, int64_t "
    "inner) {\n"
    "    __shared__ Acc part[SPLIT][4][32];\n"
    "    const int64_t i = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 4;\n"
    "    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {\n"
    "        const int64_t base = o * red * inner + i;\n"
    "        Acc a[4] = {acc_init(), acc_init(), acc_init(), acc_init()};\n"
    "        if (i < inner) {\n"
    "            int64_t j = threadIdx.y;\n"
    "            for (; j + SPLIT < red; j += 2 * SPLIT) {\n"
    "                const float4 u = KF_LOAD4((base + j * inner) / 4);\n"
    "                const float4 w = KF_LOAD4((base + (j + SPLIT) * inner) / 4);\n"
    "                ACC_COLS4(u, j)\n"
    "                ACC_COLS4(w, j + SPLIT)\n"
    "            }\n"
    "            for (; j < red; j += SPLIT) {\n"
    "                const float4 u = KF_LOAD4((base + j * inner) / 4);\n"
    "                ACC_COLS4(u, j)\n"
    "            }\n"
    "        }\n"
    "        for (int l = 0; l < 4; ++l)\n"
    "            part[threadIdx.y][l][threadIdx.x] = a[l];\n"
    "        __syncthreads();\n"
    "        if (threadIdx.y == 0 && i < inner)\n"
    "            for (int l = 0; l < 4; ++l) {\n"
    "                for (int y = 1; y < SPLIT; ++y)\n"
    "                    a[l] = acc_merge(a[l], part[y][l][threadIdx.x]);\n"
    "                out[o * inner + i + l] = acc_fin(a[l], red);\n"
    "            }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n\n"
    "} // namespace\n\n"
    "extern \"C\" int @FN@(@IN@OutT *out, int64_t outer, int64_t red, int64_t inner) {\n"
    "    if (outer <= 0 || inner <= 0)\n"
    "        return outer < 0 || inner < 0;\n"
    "    if (inner == 1 && red <= 1024) {\n"
    "        const int64_t blocks = (outer + @T@ / 32 - 1) / (@T@ / 32);\n"
    "        rows_warp<<<(unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16), @T@, 0, 0>>>(\n"
    "            @ARGS@out, outer, red);\n"
    "    } else if (inner == 1 && outer < 256 && red >= (int64_t{1} << 16)) {\n"
    "        // some 1056 blocks of at least 16 Ki elements each, over the rows\n"
    "        int64_t splits = (1056 + outer - 1) / outer;\n"
    "        splits = splits < red / 16384 ? splits : red / 16384;\n"
    "        // a multiple of 4 (the float4 loads'), the last block's chunk cut short\n"
    "        const int64_t chunk = ((red + splits - 1) / splits + 3) / 4 * 4;\n"
    "        Acc *part = partials(outer * splits);\n"
    "        if (part == nullptr)\n"
    "            return (int)cudaErrorMemoryAllocation;\n"
    "        rows_split<<<dim3((unsigned)splits, (unsigned)outer), @T@, 0, 0>>>(@ARGS@part, red, "
    "chunk);\n"
    "        rows_merge<<<(unsigned)outer, 32, 0, 0>>>(part, out, red, (int)splits);\n"
    "    } else if (inner == 1) {\n"
    "#if KF_REG_ROWS\n"
    "        if (red <= KMAX * @T@)\n"
    "            return rows_reg_launch(@ARGS@out, outer, red);\n"
    "#endif\n"
    "        const int64_t blocks = outer < 65535 * 16 ? outer : 65535 * 16;\n"
    "        rows<<<(unsigned)blocks, @T@, 0, 0>>>(@ARGS@out, outer, red);\n"
    "    } else if (KF_ALIGNED && inner % 4 == 0) {\n"
    "        const dim3 grid((unsigned)((inner / 4 + 31) / 32), (unsigned)(outer < 65535 ? outer "
    ": 65535));\n"
    "        cols4<<<grid, dim3(32, SPLIT), 0, 0>>>(@ARGS@out, outer, red, inner);\n" COLS_LAUNCH;

static const char CUDA_SOFTMAX[] =
    "__device__ __forceinline__ float kf_out(float x, Acc a) {\n"
    "    return LOG_SOFTMAX ? x - a.v - logf(a.s) : expf(x - a.v) / a.s;\n"
    "}\n\n"
    "__global__ void rows(@IN@float *__restrict__ out, int64_t outer, int64_t red, bool "
    "cache) {\n"
    "    extern __shared__ float row[];\n"
    "    for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {\n"
    "        const int64_t base = r * red;\n"
    "        Acc a = acc_init();\n"
    "        ROW_ACC(blockDim.x, 1, if (cache) row[jj] = x)\n"
    "        a = block_reduce(a);\n"
    "        for (int64_t j = threadIdx.x; j < red; j += blockDim.x)\n"
    "            out[base + j] = kf_out(cache ? row[j] : KF_LOAD(base + j), a);\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n\n"
    "__global__ void cols(@IN@float *__restrict__ out, int64_t outer, int64_t red, int64_t "
    "inner) {\n" COLS_HEAD "        a = part[0][threadIdx.x];\n"
    "        for (int y = 1; y < SPLIT; ++y)\n"
    "            a = acc_merge(a, part[y][threadIdx.x]);\n"
    "        if (i < inner)\n"
    "            for (int64_t j = threadIdx.y; j < red; j += SPLIT)\n"
    "                out[base + j * inner] = kf_out(KF_LOAD(base + j * inner), a);\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n\n"
    "#if KF_REG_ROWS && !KF_COLS_TILE\n"
    "// Columns (inner > 1) of at most COLS_Y * K elements: a block of COLS_X columns by COLS_Y\n"
    "// threads along the reduced dimension (the variant's geometry), each thread holding the\n"
    "// elements threadIdx.y + k * COLS_Y of its column in registers. Read once, an exact maximum\n"
    "// and sum through shared memory, the output written from the registers (the online\n"
    "// accumulation paid an exponential per element on its read and another on its second\n"
    "// read).\n"
    "template <int K>\n"
    "__global__ void __launch_bounds__(COLS_X *COLS_Y) cols_reg(@IN@float *__restrict__ out,\n"
    "        int64_t outer, int64_t red, int64_t inner) {\n"
    "    __shared__ float part[COLS_Y][COLS_X + 1];\n"
    "    const int64_t i = (int64_t)blockIdx.x * COLS_X + threadIdx.x;\n"
    "    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {\n"
    "        const int64_t base = o * red * inner + i;\n"
    "        float x[K];\n"
    "        float m = -INFINITY;\n"
    "        // a running index: one add per load, not an address per element held live\n"
    "        int64_t at = base + threadIdx.y * inner;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < K; ++k, at += COLS_Y * inner) {\n"
    "            const int64_t j = threadIdx.y + (int64_t)k * COLS_Y;\n"
    "            x[k] = i < inner && j < red ? KF_LOAD(at) : -INFINITY;\n"
    "            m = fmaxf(m, x[k]);\n"
    "        }\n"
    "        part[threadIdx.y][threadIdx.x] = m;\n"
    "        __syncthreads();\n"
    "        m = part[0][threadIdx.x];\n"
    "        for (int y = 1; y < COLS_Y; ++y)\n"
    "            m = fmaxf(m, part[y][threadIdx.x]);\n"
    "        __syncthreads();\n"
    "        float s = 0.0f;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < K; ++k)\n"
    "            if (threadIdx.y + (int64_t)k * COLS_Y < red)\n"
    "                s += __expf(x[k] - m);\n"
    "        part[threadIdx.y][threadIdx.x] = s;\n"
    "        __syncthreads();\n"
    "        s = 0.0f;\n"
    "        for (int y = 0; y < COLS_Y; ++y)\n"
    "            s += part[y][threadIdx.x];\n"
    "        __syncthreads();\n"
    "        const float inv = 1.0f / s, ls = __logf(s);\n"
    "        at = base + threadIdx.y * inner;\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < K; ++k, at += COLS_Y * inner) {\n"
    "            const int64_t j = threadIdx.y + (int64_t)k * COLS_Y;\n"
    "            if (i < inner && j < red)\n"
    "                out[at] = LOG_SOFTMAX ? x[k] - m - ls : __expf(x[k] - m) * "
    "inv;\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "// The smallest K (a power of two from 4) for red <= COLS_MAX elements.\n"
    "constexpr int COLS_MAX = 1024;\n"
    "static_assert(COLS_MAX % COLS_Y == 0 && COLS_MAX / COLS_Y >= 4, \"the variant's geometry\");\n"
    "int cols_reg_launch(@IN@float *out, int64_t outer, int64_t red, int64_t inner) {\n"
    "    const dim3 grid((unsigned)((inner + COLS_X - 1) / COLS_X),\n"
    "                    (unsigned)(outer < 65535 ? outer : 65535)),\n"
    "        block(COLS_X, COLS_Y);\n"
    "    if (red <= 4 * COLS_Y)\n"
    "        cols_reg<4><<<grid, block, 0, 0>>>(@ARGS@out, outer, red, inner);\n"
    "    else if (red <= 8 * COLS_Y)\n"
    "        cols_reg<8><<<grid, block, 0, 0>>>(@ARGS@out, outer, red, inner);\n"
    "    else if (red <= 16 * COLS_Y)\n"
    "        cols_reg<16><<<grid, block, 0, 0>>>(@ARGS@out, outer, red, inner);\n"
    "    else if (red <= 32 * COLS_Y)\n"
    "        cols_reg<(COLS_MAX / COLS_Y < 32 ? COLS_MAX / COLS_Y : 32)><<<grid, block, 0, 0>>>(\n"
    "            @ARGS@out, outer, red, inner);\n"
    "    else\n"
    "        cols_reg<COLS_MAX / COLS_Y><<<grid, block, 0, 0>>>(@ARGS@out, outer, red, inner);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n"
    "#endif\n\n"
    "#if KF_REG_ROWS && KF_COLS_TILE\n"
    "// Columns (inner > 1) whose tile of COLS_X columns by red rows fits in TILE_MAX bytes of\n"
    "// shared memory: read once into the tile, COLS_Y threads down each column keeping a running\n"
    "// maximum and sum (four loads in flight), combined, then the output written from the\n"
    "// tile. A few blocks share an SM, so one block's loads overlap another's stores (the\n"
    "// register kernel's 1024-thread blocks fit one an SM).\n"
    "constexpr int64_t TILE_MAX = 64 * 1024;\n"
    "__device__ __forceinline__ void online(float &m, float &s, float v) {\n"
    "    if (v > m) {\n"
    "        s *= __expf(m - v);\n"
    "        m = v;\n"
    "    }\n"
    "    if (m != -INFINITY)\n"
    "        s += __expf(v - m);\n"
    "}\n\n"
    "__global__ void __launch_bounds__(COLS_X *COLS_Y) cols_tile(@IN@float *__restrict__ out,\n"
    "        int64_t outer, int64_t red, int64_t inner) {\n"
    "    extern __shared__ float tile[]; // [red][COLS_X]\n"
    "    __shared__ float pm[COLS_Y][COLS_X + 1], ps[COLS_Y][COLS_X + 1];\n"
    "    const int tx = threadIdx.x, ty = threadIdx.y;\n"
    "    const int64_t i = (int64_t)blockIdx.x * COLS_X + tx;\n"
    "    const bool on = i < inner;\n"
    "    const int rows = (int)red;\n"
    "    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {\n"
    "        const int64_t base = o * red * inner + i;\n"
    "        float m = -INFINITY, s = 0.0f;\n"
    "        int j = ty;\n"
    "        for (; j + 3 * COLS_Y < rows; j += 4 * COLS_Y) {\n"
    "            float v[4];\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < 4; ++u)\n"
    "                v[u] = on ? KF_LOAD(base + (int64_t)(j + u * COLS_Y) * inner) : -INFINITY;\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < 4; ++u) {\n"
    "                tile[(j + u * COLS_Y) * COLS_X + tx] = v[u];\n"
    "                online(m, s, v[u]);\n"
    "            }\n"
    "        }\n"
    "        for (; j < rows; j += COLS_Y) {\n"
    "            const float v = on ? KF_LOAD(base + (int64_t)j * inner) : -INFINITY;\n"
    "            tile[j * COLS_X + tx] = v;\n"
    "            online(m, s, v);\n"
    "        }\n"
    "        pm[ty][tx] = m;\n"
    "        ps[ty][tx] = s;\n"
    "        __syncthreads();\n"
    "        float mx = -INFINITY, sum = 0.0f;\n"
    "        for (int y = 0; y < COLS_Y; ++y)\n"
    "            mx = fmaxf(mx, pm[y][tx]);\n"
    "        for (int y = 0; y < COLS_Y; ++y)\n"
    "            if (pm[y][tx] != -INFINITY)\n"
    "                sum += ps[y][tx] * __expf(pm[y][tx] - mx);\n"
    "        const float inv = 1.0f / sum, ls = __logf(sum);\n"
    "        if (on)\n"
    "#pragma unroll 4\n"
    "            for (j = ty; j < rows; j += COLS_Y) {\n"
    "                const float x = tile[j * COLS_X + tx];\n"
    "                out[base + (int64_t)j * inner] = LOG_SOFTMAX ? x - mx - ls : __expf(x - mx) * "
    "inv;\n"
    "            }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "#endif\n\n"
    "} // namespace\n\n"
    "extern \"C\" int @FN@(@IN@float *out, int64_t outer, int64_t red, int64_t inner) {\n"
    "    if (outer <= 0 || inner <= 0 || red <= 0)\n"
    "        return outer < 0 || inner < 0 || red < 0;\n"
    "#if KF_REG_ROWS && KF_COLS_TILE\n"
    "    if (inner > 1 && red * COLS_X * 4 <= TILE_MAX) {\n"
    "        const int smem = (int)(red * COLS_X * 4);\n"
    "        if (smem > 48 * 1024)\n"
    "            cudaFuncSetAttribute(cols_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, "
    "smem);\n"
    "        const dim3 grid((unsigned)((inner + COLS_X - 1) / COLS_X),\n"
    "                        (unsigned)(outer < 65535 ? outer : 65535));\n"
    "        cols_tile<<<grid, dim3(COLS_X, COLS_Y), smem, 0>>>(@ARGS@out, outer, red, inner);\n"
    "        return (int)cudaGetLastError();\n"
    "    }\n"
    "#elif KF_REG_ROWS\n"
    "    if (inner > 1 && red <= COLS_MAX)\n"
    "        return cols_reg_launch(@ARGS@out, outer, red, inner);\n"
    "#endif\n"
    "    if (inner == 1) {\n"
    "#if KF_REG_ROWS\n"
    "        if (red <= KMAX * @T@)\n"
    "            return rows_reg_launch(@ARGS@out, outer, red);\n"
    "#endif\n"
    "        const int64_t blocks = outer < 65535 * 16 ? outer : 65535 * 16;\n"
    "        const bool cache = CACHE_ROW && red * 4 <= 48 * 1024;\n"
    "        rows<<<(unsigned)blocks, @T@, cache ? red * 4 : 0, 0>>>(@ARGS@out, outer, red, "
    "cache);\n" COLS_LAUNCH;

/* Four accumulators per thread, so that four loads are in flight (the accumulation is a
 * chain); ON_X(jj, x) runs for each element (the softmax caches its row there). */
static const char ACC_MACROS[] =
    "#define ACC4(STEP, STRIDE, ON_X)                                            \\\n"
    "    {                                                                       \\\n"
    "        Acc a1 = acc_init(), a2 = acc_init(), a3 = acc_init();             \\\n"
    "        for (; j + 3 * (int64_t)(STEP) < red; j += 4 * (int64_t)(STEP)) {  \\\n"
    "            const int64_t s_ = (STEP);                                      \\\n"
    "            const float x0 = KF_LOAD(base + j * (STRIDE));                  \\\n"
    "            const float x1 = KF_LOAD(base + (j + s_) * (STRIDE));           \\\n"
    "            const float x2 = KF_LOAD(base + (j + 2 * s_) * (STRIDE));       \\\n"
    "            const float x3 = KF_LOAD(base + (j + 3 * s_) * (STRIDE));       \\\n"
    "            { const int64_t jj = j; const float x = x0; (void)jj; (void)x; ON_X; }            "
    " \\\n"
    "            { const int64_t jj = j + s_; const float x = x1; (void)jj; (void)x; ON_X; }       "
    " \\\n"
    "            { const int64_t jj = j + 2 * s_; const float x = x2; (void)jj; (void)x; ON_X; }   "
    " \\\n"
    "            { const int64_t jj = j + 3 * s_; const float x = x3; (void)jj; (void)x; ON_X; }   "
    " \\\n"
    "            acc_add(a, x0, j);                                              \\\n"
    "            acc_add(a1, x1, j + s_);                                        \\\n"
    "            acc_add(a2, x2, j + 2 * s_);                                    \\\n"
    "            acc_add(a3, x3, j + 3 * s_);                                    \\\n"
    "        }                                                                   \\\n"
    "        for (; j < red; j += (STEP)) {                                      \\\n"
    "            const int64_t jj = j;                                           \\\n"
    "            const float x = KF_LOAD(base + j * (STRIDE));                   \\\n"
    "            (void)jj;                                                       \\\n"
    "            ON_X;                                                           \\\n"
    "            acc_add(a, x, j);                                               \\\n"
    "        }                                                                   \\\n"
    "        a = acc_merge(acc_merge(a, a1), acc_merge(a2, a3));                 \\\n"
    "    }\n"
    "// Contiguous rows of a multiple of 4 with every input 16-byte aligned: float4 loads, four\n"
    "// in flight per thread (element 4q + l of the row at index 4q + l, as ACC4 numbers them).\n"
    "#define KF_ROW_V4(red) (KF_ALIGNED && (red) % 4 == 0)\n"
    "#define ACC_V4(START, STEP)                                                  \\\n"
    "    {                                                                        \\\n"
    "        const int64_t q0_ = base / 4, m_ = red / 4, t_ = (STEP);             \\\n"
    "        Acc b_ = acc_init();                                                 \\\n"
    "        int64_t q = (START);                                                 \\\n"
    "        for (; q + 3 * t_ < m_; q += 4 * t_) {                              \\\n"
    "            const float4 u0 = KF_LOAD4(q0_ + q), u1 = KF_LOAD4(q0_ + q + t_);   \\\n"
    "            const float4 u2 = KF_LOAD4(q0_ + q + 2 * t_);                    \\\n"
    "            const float4 u3 = KF_LOAD4(q0_ + q + 3 * t_);                    \\\n"
    "            ACC_ADD4(a, u0, 4 * q) ACC_ADD4(b_, u1, 4 * (q + t_))             \\\n"
    "            ACC_ADD4(a, u2, 4 * (q + 2 * t_)) ACC_ADD4(b_, u3, 4 * (q + 3 * t_)) \\\n"
    "        }                                                                    \\\n"
    "        for (; q < m_; q += t_) {                                            \\\n"
    "            const float4 u0 = KF_LOAD4(q0_ + q);                             \\\n"
    "            ACC_ADD4(a, u0, 4 * q)                                           \\\n"
    "        }                                                                    \\\n"
    "        a = acc_merge(a, b_);                                                \\\n"
    "    }\n"
    "#define ACC_ADD4(A, U, J)                                                    \\\n"
    "    acc_add(A, (U).x, (J));                                                  \\\n"
    "    acc_add(A, (U).y, (J) + 1);                                              \\\n"
    "    acc_add(A, (U).z, (J) + 2);                                              \\\n"
    "    acc_add(A, (U).w, (J) + 3);\n"
    "// the four columns of a float4 U of row J into a[0..3] (cols4)\n"
    "#define ACC_COLS4(U, J)                                                      \\\n"
    "    acc_add(a[0], (U).x, (J));                                               \\\n"
    "    acc_add(a[1], (U).y, (J));                                               \\\n"
    "    acc_add(a[2], (U).z, (J));                                               \\\n"
    "    acc_add(a[3], (U).w, (J));\n"
    "#define ROW_ACC(STEP, STRIDE, ON_X) \\\n"
    "    int64_t j = threadIdx.x;        \\\n"
    "    ACC4(STEP, STRIDE, ON_X)\n\n";

/* s (a double2) += the sums of x and x*x over elements [BASE, BASE + N) read by the block's
 * threads in turn (the ...T forms: by threads T0, T0 + TN, ... of TN, a warp's lanes), four loads
 * in flight per thread. The four (sixteen with float4) values of an iteration are summed in float
 * and the running sums kept in double: one conversion to double per sum and iteration rather than
 * one per value (conversions and double adds per value cost the H200 more issue time than the
 * loads). The error this adds to a variance is about 1e-8 times the square of the input's mean over
 * its spread: far below fp32's tolerance unless the mean is near a hundred times the spread; double
 * still carries the long sums. */
static const char MOMENTS_MACRO[] =
    "#define KF_MOMENTS_ADD(s, BASE, N) KF_MOMENTS_ADDT(s, BASE, N, threadIdx.x, blockDim.x)\n"
    "#define KF_MOMENTS_ADDT(s, BASE, N, T0, TN)                                         \\\n"
    "    {                                                                               \\\n"
    "        const int64_t base_ = (BASE), n_ = (N), t_ = (TN);                          \\\n"
    "        int64_t b_ = (T0);                                                          \\\n"
    "        for (; b_ + 3 * t_ < n_; b_ += 4 * t_) {                                    \\\n"
    "            const float x0 = KF_LOAD(base_ + b_), x1 = KF_LOAD(base_ + b_ + t_);    \\\n"
    "            const float x2 = KF_LOAD(base_ + b_ + 2 * t_);                          \\\n"
    "            const float x3 = KF_LOAD(base_ + b_ + 3 * t_);                          \\\n"
    "            s.x += (double)((x0 + x1) + (x2 + x3));                                 \\\n"
    "            s.y += (double)((x0 * x0 + x1 * x1) + (x2 * x2 + x3 * x3));             \\\n"
    "        }                                                                           \\\n"
    "        for (; b_ < n_; b_ += t_) {                                                 \\\n"
    "            const float x = KF_LOAD(base_ + b_);                                    \\\n"
    "            s.x += (double)x;                                                       \\\n"
    "            s.y += (double)(x * x);                                                 \\\n"
    "        }                                                                           \\\n"
    "    }\n"
    "// the same with float4 loads (four in flight), for BASE and N multiples of 4 and KF_ALIGNED\n"
    "#define KF_SUM4(u) (((u).x + (u).y) + ((u).z + (u).w))\n"
    "#define KF_SQ4(u) (((u).x * (u).x + (u).y * (u).y) + ((u).z * (u).z + (u).w * (u).w))\n"
    "#define KF_MOMENTS_ADD4(s, BASE, N) KF_MOMENTS_ADD4T(s, BASE, N, threadIdx.x, blockDim.x)\n"
    "#define KF_MOMENTS_ADD4T(s, BASE, N, T0, TN)                                        \\\n"
    "    {                                                                               \\\n"
    "        const int64_t q_ = (BASE) / 4, m_ = (N) / 4, t_ = (TN);                     \\\n"
    "        int64_t b_ = (T0);                                                          \\\n"
    "        for (; b_ + 3 * t_ < m_; b_ += 4 * t_) {                                    \\\n"
    "            const float4 u0 = KF_LOAD4(q_ + b_), u1 = KF_LOAD4(q_ + b_ + t_);       \\\n"
    "            const float4 u2 = KF_LOAD4(q_ + b_ + 2 * t_), u3 = KF_LOAD4(q_ + b_ + 3 * t_);\\\n"
    "            s.x += (double)((KF_SUM4(u0) + KF_SUM4(u1)) + (KF_SUM4(u2) + KF_SUM4(u3)));\\\n"
    "            s.y += (double)((KF_SQ4(u0) + KF_SQ4(u1)) + (KF_SQ4(u2) + KF_SQ4(u3))); \\\n"
    "        }                                                                           \\\n"
    "        for (; b_ < m_; b_ += t_) {                                                 \\\n"
    "            const float4 u0 = KF_LOAD4(q_ + b_);                                    \\\n"
    "            s.x += (double)KF_SUM4(u0);                                             \\\n"
    "            s.y += (double)KF_SQ4(u0);                                              \\\n"
    "        }                                                                           \\\n"
    "    }\n"
    "\n";

void kfx_src_bix(struct kf_buf *b) {
    /* 32-bit divisions where every operand fits (a fraction of 64-bit ones' cost); for device
     * code whenever nvcc compiles it (a scan's kernels take no kf_load4: cuda is false) */
    kf_buf_printf(b, "#ifdef __CUDACC__\n__device__ __forceinline__\n#else\ninline\n#endif\n"
                     "int64_t kf_bix(int64_t j, int64_t q, int64_t m) {\n"
                     "    if (((j | q | m) >> 31) == 0)\n"
                     "        return (int64_t)((uint32_t)j / (uint32_t)q %% (uint32_t)m);\n"
                     "    return j / q %% m;\n}\n\n");
}

/* KF_LOAD(idx): the step's value at flat index idx; with four lanes (kf_load4), KF_LOAD4(i4) at
 * idx 4 * i4 .. 4 * i4 + 3, for where KF_ALIGNED (every input 16-byte aligned) holds */
void kfx_rows_load(struct kf_buf *b, const struct kfx_step *st, bool cuda) {
    const int n = st->n_leaves;
    const unsigned char *scalar = st->pro_scalar; /* 0-d: element 0 for every index */
    const unsigned char *bc = st->pro_bcast;      /* element (idx / qK) % mK */
    bool any = false;
    for (int k = 0; k < n; k++)
        any = any || bc[k];
    if (any)
        kfx_src_bix(b);
    kf_buf_printf(b, "#define KF_LOAD(idx) kf_elem(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b,
                      scalar[k] ? "%sin%d[0]"
                      : bc[k]   ? "%sin%d[kf_bix((idx), q%d, m%d)]"
                                : "%sin%d[(idx)]",
                      k ? ", " : "", k, k, k);
    kf_buf_printf(b, ")\n\n");
    if (!cuda)
        return;
    kf_buf_printf(b, "__device__ __forceinline__ float4 kf_load4(");
    for (int k = 0; k < n; k++)
        leaf_param(b, st, k, true);
    kf_buf_printf(b, "int64_t i4) {\n");
    for (int k = 0; k < n; k++)
        if (bc[k]) /* one value for the four (q a multiple of 4), else four reads */
            kf_buf_printf(b,
                          "    float4 a%1$d;\n    if (q%1$d %% 4 == 0) {\n"
                          "        const float u_ = in%1$d[kf_bix(4 * i4, q%1$d, m%1$d)];\n"
                          "        a%1$d = make_float4(u_, u_, u_, u_);\n"
                          "    } else if (q%1$d == 1 && m%1$d %% 4 == 0) {\n"
                          "        const int64_t j_ = kf_bix(4 * i4, 1, m%1$d);\n"
                          "        a%1$d = make_float4(in%1$d[j_], in%1$d[j_ + 1], in%1$d[j_ + 2], "
                          "in%1$d[j_ + 3]);\n"
                          "    } else {\n"
                          "        a%1$d = make_float4(in%1$d[kf_bix(4 * i4, q%1$d, m%1$d)], "
                          "in%1$d[kf_bix(4 * i4 + 1, q%1$d, m%1$d)],\n"
                          "                         in%1$d[kf_bix(4 * i4 + 2, q%1$d, m%1$d)], "
                          "in%1$d[kf_bix(4 * i4 + 3, q%1$d, m%1$d)]);\n    }\n",
                          k);
        else
            kf_buf_printf(
                b,
                scalar[k] ? "    const float4 a%d = make_float4(in%d[0], in%d[0], in%d[0], "
                            "in%d[0]);\n"
                          : "    const float4 a%d = reinterpret_cast<const float4 *>(in%d)[i4];\n",
                k, k, k, k, k);
    kf_buf_printf(b, "    float4 y;\n");
    for (const char *l = "xyzw"; *l; l++) {
        kf_buf_printf(b, "    y.%c = kf_elem(", *l);
        for (int k = 0; k < n; k++)
            kf_buf_printf(b, "%sa%d.%c", k ? ", " : "", k, *l);
        kf_buf_printf(b, ");\n");
    }
    kf_buf_printf(b, "    return y;\n}\n#define KF_LOAD4(i4) kf_load4(");
    for (int k = 0; k < n; k++)
        leaf_param(b, st, k, false);
    kf_buf_printf(b, "(i4))\n#define KF_ALIGNED ((0");
    for (int k = 0; k < n; k++)
        if (!scalar[k] && !bc[k])
            kf_buf_printf(b, " | (uintptr_t)in%d", k);
    kf_buf_printf(b, ") %% 16 == 0)\n\n");
}

/* kf_second(var, n, eps): a statistics kernel's second value from the population variance of n
 * elements: a norm's 1/sqrt(var + eps), or the variance or standard deviation with Bessel's
 * correction (n - corr in the denominator; NaN for n == corr, as PyTorch) */
static void second_code(struct kf_buf *b, const struct kfx_step *st, bool cuda) {
    const char *sq = cuda ? "sqrt" : "std::sqrt";
    kf_buf_printf(b,
                  "constexpr int KF_SECOND = %d; // 0: 1/sqrt(var + eps), 1: var, 2: std\n"
                  "constexpr double KF_CORR = %d.0;\n\n"
                  "%s float kf_second(double var, double n, float eps) {\n"
                  "    if (KF_SECOND == 0)\n"
                  "        return (float)(1.0 / %s(var + (double)eps));\n"
                  "    const double v = var * n / (n - KF_CORR);\n"
                  "    return (float)(KF_SECOND == 1 ? v : %s(v));\n"
                  "}\n\n",
                  st->kind == KFX_MOMENTS ? st->second : 0, st->corr,
                  cuda ? "__device__ __forceinline__" : "inline", sq, sq);
}

static char *cuda_src(const struct kfx_step *st, int v) {
    static const int threads[] = {256, 512, 128, 1024};
    bool sm = st->kind == KFX_SOFTMAX;
    /* statistics with the pass that reads them (expert_plan_fuse.c): expert_norm_fused.c, rows
     * held in registers with about 4 then 2 float4 per thread, then read twice by 256 and 512
     * threads */
    bool fused = st->ew_body != NULL && (st->kind == KFX_MOMENTS || st->kind == KFX_REDUCE);
    int nv = sm || fused ? 4 : 3;
    if (v >= nv)
        return NULL;
    /* softmax and logsumexp: rows held in registers (expert_rows_reg.c) in every variant but
     * the last, which reads a row twice (cached in shared memory when it fits) with an online
     * maximum and sum */
    /* logsumexp's rows in registers: 512 threads first (1.05x over compile on the H200 against
     * 0.97x with 256: bench/README.md, variant_bench) */
    int r = !sm && !fused && strcmp(st->op, "logsumexp") == 0 ? (int[]){1, 0, 2}[v] : v;
    int t = sm      ? (int[]){512, 1024, 256, 256}[v]
            : fused ? (int[]){256, 256, 256, 512}[v]
                    : threads[r];
    int split = fused                     ? 16
                : st->kind == KFX_MOMENTS ? (int[]){16, 32, 8}[v]
                : sm                      ? (int[]){8, 32, 4, 16}[v]
                                          : (int[]){8, 16, 4}[r];
    bool reg = (sm || strcmp(st->op, "logsumexp") == 0) && v < nv - 1;
    bool cache = sm && !reg;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert: %s, variant %d: %d threads per row%s; columns in tiles of 32, "
                  "each split over %d threads.\n#include <cuda_runtime.h>\n#include <cmath>\n"
                  "#include <cstdint>\n\nnamespace {\n\nconstexpr int SPLIT = %d;\n\n",
                  st->op, v, t,
                  reg     ? ", rows in registers"
                  : cache ? ", the row cached in shared memory"
                          : "",
                  split, split);
    kfw_ew_elem(&b, st->body, st->n_leaves, "__device__ __forceinline__");
    kfx_rows_load(&b, st, st->kind != KFX_SOFTMAX || reg);
    kf_buf_printf(&b, "%s", ACC_MACROS);
    if (st->kind == KFX_MOMENTS || fused) {
        kf_buf_printf(&b, "%s", MOMENTS_MACRO);
        second_code(&b, st, true);
    }
    if (fused) {
        char *fused = kfx_norm_fused_tmpl(st, (int[]){4, 2, 0, 0}[v]);
        if (fused != NULL)
            kfx_rows_put(&b, fused, st, t);
        free(fused);
        return b.data;
    }
    if (st->kind == KFX_MOMENTS) {
        kfx_rows_put(&b, kfx_moments_tmpl(), st, t);
        return b.data;
    }
    const char *op = sm ? "softmax" : st->op;
    acc_code(&b, op, "__device__ __forceinline__");
    kf_buf_printf(&b, "%s", CUDA_BLOCK_REDUCE);
    kf_buf_printf(&b, "#define KF_REG_ROWS %d\n", reg ? 1 : 0);
    if (reg) {
        kf_buf_printf(&b, "constexpr int MODE = %d;\n\n",
                      !sm                                  ? 2
                      : strcmp(st->op, "log_softmax") == 0 ? 1
                                                           : 0);
        kfx_rows_put(&b, kfx_rows_reg_tmpl(), st, t);
    }
    if (sm) {
        /* columns: a shared-memory tile of 8 columns by 32 threads (variant 0: on the H200,
         * softmax_dim1 1.62 ms against compile's 1.62) or 16 by 16 (1.77 ms), else in
         * registers, blocks of 32 columns by 32 threads (32 values each; 2.41 ms) */
        kf_buf_printf(&b, "constexpr bool LOG_SOFTMAX = %s;\nconstexpr bool CACHE_ROW = %s;\n",
                      strcmp(st->op, "log_softmax") == 0 ? "true" : "false",
                      cache ? "true" : "false");
        if (reg)
            kf_buf_printf(&b, "#define KF_COLS_TILE %d\nconstexpr int COLS_X = %d, COLS_Y = %d;\n",
                          v < 2 ? 1 : 0, (int[]){8, 16, 32}[v], (int[]){32, 16, 32}[v]);
        kf_buf_printf(&b, "\n");
        kfx_rows_put(&b, CUDA_SOFTMAX, st, t);
    } else {
        kf_buf_printf(&b, "using OutT = %s;\n\n",
                      strncmp(st->op, "arg", 3) == 0 ? "int64_t" : "float");
        kfx_rows_put(&b, CUDA_REDUCE, st, t);
    }
    return b.data;
}

/* B == 1 (a batch norm over (N, C): each g a column): tiles of 64 columns, each read a row at a
 * time, so the matrix is read once along its rows rather than once per column down a stride of
 * G (this machine's CPU: batch_norm1d_relu's statistics were most of its 11.7 ms) */
static const char CPU_MOMENTS[] =
    "inline void kf_finish(double sx, double sy, double n, float *mean, float *rstd, int64_t g,\n"
    "                      int64_t rep, float eps) {\n"
    "    const double m = n > 0 ? sx / n : 0.0;\n"
    "    double var = n > 0 ? sy / n - m * m : 0.0;\n"
    "    var = var > 0.0 ? var : 0.0;\n"
    "    for (int64_t k = 0; k < rep; ++k) {\n"
    "        mean[g * rep + k] = (float)m;\n"
    "        rstd[g * rep + k] = kf_second(var, n, eps);\n"
    "    }\n"
    "}\n\n"
    "extern \"C\" int @FN@(@IN@float *mean, float *rstd, int64_t A, int64_t G, int64_t B,\n"
    "                     int64_t rep, float eps) {\n"
    "    if (A < 0 || G < 0 || B < 0 || rep < 0)\n"
    "        return 1;\n"
    "    if (B == 1) {\n"
    "#pragma omp parallel for schedule(SCHED)\n"
    "        for (int64_t g0 = 0; g0 < G; g0 += 64) {\n"
    "            const int64_t w = G - g0 < 64 ? G - g0 : 64;\n"
    "            double sx[64] = {0.0}, sy[64] = {0.0};\n"
    "            for (int64_t a = 0; a < A; ++a)\n"
    "#pragma omp simd\n"
    "                for (int64_t j = 0; j < w; ++j) {\n"
    "                    const double x = KF_LOAD(a * G + g0 + j);\n"
    "                    sx[j] += x;\n"
    "                    sy[j] += x * x;\n"
    "                }\n"
    "            for (int64_t j = 0; j < w; ++j)\n"
    "                kf_finish(sx[j], sy[j], (double)A, mean, rstd, g0 + j, rep, eps);\n"
    "        }\n"
    "        return 0;\n"
    "    }\n"
    "#pragma omp parallel for schedule(SCHED)\n"
    "    for (int64_t g = 0; g < G; ++g) {\n"
    "        double sx = 0.0, sy = 0.0;\n"
    "        for (int64_t a = 0; a < A; ++a)\n"
    "            // vectorised: a simd reduction may reorder the double sums (without it, g++\n"
    "            // keeps their serial order and one value per instruction)\n"
    "#pragma omp simd reduction(+ : sx, sy)\n"
    "            for (int64_t b = 0; b < B; ++b) {\n"
    "                const double x = KF_LOAD(a * G * B + g * B + b);\n"
    "                sx += x;\n"
    "                sy += x * x;\n"
    "            }\n"
    "        kf_finish(sx, sy, (double)(A * B), mean, rstd, g, rep, eps);\n"
    "    }\n"
    "    return 0;\n"
    "}\n";

static char *cpu_src(const struct kfx_step *st, int v) {
    if (v > 1)
        return NULL;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert: %s, variant %d: OpenMP over rows and columns, %s "
                  "schedule.\n#include <cmath>\n#include <cstdint>\n\nnamespace {\n\n",
                  st->op, v, v == 0 ? "static" : "dynamic");
    bool sm = st->kind == KFX_SOFTMAX;
    const char *op = sm && strcmp(st->op, "log_softmax") != 0 ? "softmax" : st->op;
    /* statistics with the pass that reads them (expert_plan_fuse.c): expert_norm_fused_cpu.c */
    bool fused = st->ew_body != NULL && (st->kind == KFX_MOMENTS || st->kind == KFX_REDUCE);
    /* the two-pass rows' exp (expert_cpu_math.c), first (its pragma covers what follows),
     * unless the prologue brings it */
    if (st->kind != KFX_MOMENTS && !fused && kfx_rows_cpu_exp(op) && !kfw_cpu_math_used(st->body))
        kfw_cpu_math_defs(&b);
    else if (fused && kfw_cpu_math_used(st->ew_body) && !kfw_cpu_math_used(st->body))
        kfw_cpu_math_pragma(&b); /* the pass's math comes after the prologue's kf_elem */
    kfw_ew_elem(&b, st->body, st->n_leaves, "inline");
    kfx_rows_load(&b, st, false);
    if (st->kind != KFX_MOMENTS && !fused)
        acc_code(&b, sm ? "softmax" : st->op, "inline");
    else
        second_code(&b, st, false);
    kf_buf_printf(&b, "#define SCHED %s\n", v == 0 ? "static" : "dynamic, 8");
    if (fused) {
        char *tmpl = kfx_norm_fused_cpu(st);
        if (tmpl != NULL)
            kfx_rows_put(&b, tmpl, st, 0);
        free(tmpl);
        return b.data;
    }
    kf_buf_printf(&b, "using OutT = %s;\n\n} // namespace\n\n",
                  strncmp(st->op, "arg", 3) == 0 ? "int64_t" : "float");
    if (st->kind == KFX_MOMENTS)
        kfx_rows_put(&b, CPU_MOMENTS, st, 0);
    else
        kfx_rows_cpu_kernel(&b, st, op);
    return b.data;
}

char *kfx_rows_src(const struct kfx_step *st, const char *backend, int v) {
    return strcmp(backend, "cuda") == 0 ? cuda_src(st, v) : cpu_src(st, v);
}
