/* expert_bcast.c: the expert's kernels for elementwise chains whose inputs broadcast to the
 * output (a bias row over a matrix, a per-channel scale over NCHW): each input is read through
 * strides in the output's index space (0 where it broadcasts), at most 4 dimensions. The
 * strides come from model_new.py at every call (x.expand(shape).stride(), metadata only), so
 * nothing is specialised to one shape. */
#include "expert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* ", int64_t d1, int64_t d2, int64_t d3, int64_t s00, ..." */
static void dims_params(struct kf_buf *b, int n) {
    kf_buf_printf(b, ", int64_t d1, int64_t d2, int64_t d3");
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 4; j++)
            kf_buf_printf(b, ", int64_t s%d%d", k, j);
}

/* kf_elem(in0[i0 * s00 + ...], ...) for the current (i0, i1, i2, i3) */
static void elem_call(struct kf_buf *b, int n) {
    kf_buf_printf(b, "kf_elem(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "%sin%d[i0 * s%d0 + i1 * s%d1 + i2 * s%d2 + i3 * s%d3]", k ? ", " : "", k,
                      k, k, k, k);
    kf_buf_printf(b, ")");
}

static const char SPLIT[] = "        const int64_t i3 = i %% d3;\n"
                            "        int64_t t = i / d3;\n"
                            "        const int64_t i2 = t %% d2;\n"
                            "        t /= d2;\n"
                            "        const int64_t i1 = t %% d1;\n"
                            "        const int64_t i0 = t / d1;\n";

/* "s03 == 1 && s13 == 1 ...": every input runs along the row */
static void along_test(struct kf_buf *b, int n) {
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "%ss%d3 == 1", k ? " && " : "", k);
}

/* elem_call over each input's row pointer pK, every input running along the row: pK[i3] */
static void row_elem_call(struct kf_buf *b, int n) {
    kf_buf_printf(b, "kf_elem(");
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "%sp%d[i3]", k ? ", " : "", k);
    kf_buf_printf(b, ")");
}

static void fold_dims(struct kf_buf *b, int n);

/* the cpu chunked row loop (expert.h) */
void kfw_cpu_chunks(struct kf_buf *b, int n, const char *elem, const char *const *value) {
    kf_buf_printf(b, "            for (int64_t c0 = 0; c0 < d3; c0 += KF_CH) {\n"
                     "                const int64_t w = d3 - c0 < KF_CH ? d3 - c0 : KF_CH;\n");
    for (int k = 0; k < n; k++)
        if (value == NULL || value[k] == NULL)
            kf_buf_printf(b,
                          "                float b%d[KF_CH];\n"
                          "                const float *__restrict__ q%d = kf_chunk(p%d, s%d3, c0, "
                          "w, b%d);\n",
                          k, k, k, k, k);
    kf_buf_printf(b,
                  "#pragma omp simd\n"
                  "                for (int64_t j = 0; j < w; ++j)\n"
                  "                    o[c0 + j] = %s(",
                  elem);
    for (int k = 0; k < n; k++)
        if (value != NULL && value[k] != NULL)
            kf_buf_printf(b, "%s%s", k ? ", " : "", value[k]);
        else
            kf_buf_printf(b, "%sq%d[j]", k ? ", " : "", k);
    kf_buf_printf(b, ");\n            }\n");
}

static const char CPU_CHUNK[] =
    "constexpr int64_t KF_CH = 512;\n\n"
    "// columns c0 .. c0 + w of a row read with stride s: in place when s is 1, else copied to "
    "buf\n"
    "inline const float *kf_chunk(const float *p, int64_t s, int64_t c0, int64_t w, float *buf) {\n"
    "    if (s == 1)\n"
    "        return p + c0;\n"
    "    if (s == 0) {\n"
    "        const float v = p[0];\n"
    "#pragma omp simd\n"
    "        for (int64_t j = 0; j < w; ++j)\n"
    "            buf[j] = v;\n"
    "    } else {\n"
    "        for (int64_t j = 0; j < w; ++j)\n"
    "            buf[j] = p[(c0 + j) * s];\n"
    "    }\n"
    "    return buf;\n"
    "}\n";

void kfw_cpu_chunk_defs(struct kf_buf *b) {
    kf_buf_printf(b, "%s", CPU_CHUNK);
}

/* Variant 0 walks rows (OpenMP over rows, simd along the last dimension) after fold_dims has
 * merged the dimensions that every input walks as one (a per-channel scale over NCHW: rows of
 * H*W), splitting a row's index once per row; where every input runs along the row its loads
 * are contiguous and the loop vectorises (this machine's CPU: scale_bias_relu's 2048 x 2048 pass
 * 16.3 ms with one division chain per element, bench/host_gap.py), and otherwise the row goes
 * in chunks (kfw_cpu_chunks). Variant 1 is the flat loop. */
static char *cpu(const char *fn, const char *body, int n, int v) {
    if (v > 1)
        return NULL;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert, broadcasting, variant %d: %s.\n#include <cmath>\n"
                  "#include <cstdint>\n\n",
                  v, v == 1 ? "one flat OpenMP loop" : "OpenMP over rows, simd along the last dim");
    kfw_ew_elem(&b, body, n, "static inline");
    if (v == 0)
        kfw_cpu_chunk_defs(&b);
    kf_buf_printf(&b, "\nextern \"C\" int %s(", fn);
    kfw_ew_params(&b, n, "__restrict__");
    dims_params(&b, n);
    kf_buf_printf(&b, ") {\n    if (n <= 0 || d1 <= 0 || d2 <= 0 || d3 <= 0)\n"
                      "        return n < 0;\n");
    if (v == 1) {
        kf_buf_printf(&b, "#pragma omp parallel for schedule(static)\n"
                          "    for (int64_t i = 0; i < n; ++i) {\n");
        kf_buf_printf(&b, SPLIT);
        kf_buf_printf(&b, "        out[i] = ");
        elem_call(&b, n);
        kf_buf_printf(&b, ";\n    }\n");
    } else {
        fold_dims(&b, n);
        kf_buf_printf(&b, "    const bool along = ");
        along_test(&b, n);
        kf_buf_printf(
            &b, ";\n    const int64_t rows = n / d3;\n"
                "#pragma omp parallel for schedule(static)\n"
                "    for (int64_t r = 0; r < rows; ++r) {\n"
                "        const int64_t i2 = r %% d2, i1 = (r / d2) %% d1, i0 = r / d2 / d1;\n");
        for (int k = 0; k < n; k++)
            kf_buf_printf(&b,
                          "        const float *__restrict__ p%d = in%d + i0 * s%d0 + i1 * s%d1 + "
                          "i2 * s%d2;\n",
                          k, k, k, k, k);
        kf_buf_printf(&b, "        float *__restrict__ o = out + r * d3;\n"
                          "        if (along) {\n#pragma omp simd\n"
                          "            for (int64_t i3 = 0; i3 < d3; ++i3)\n"
                          "                o[i3] = ");
        row_elem_call(&b, n);
        kf_buf_printf(&b, ";\n        } else {\n");
        kfw_cpu_chunks(&b, n, "kf_elem", NULL);
        kf_buf_printf(&b, "        }\n    }\n");
    }
    kf_buf_printf(&b, "    return 0;\n}\n");
    return b.data;
}

/* "in0, .., out, n, d1, d2, d3, s00, ..<more>);\n": a launch's arguments */
static void launch_args(struct kf_buf *b, int n, const char *more) {
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "in%d, ", k);
    kf_buf_printf(b, "out, n, d1, d2, d3");
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 4; j++)
            kf_buf_printf(b, ", s%d%d", k, j);
    kf_buf_printf(b, "%s);\n", more);
}

/* host code: folds each dimension into the next inner one wherever every input (and the
 * contiguous output) walks the two as one, and drops dimensions of size 1, so that a
 * per-channel parameter over NCHW reads rows of H*W instead of rows of W (fewer, longer rows:
 * less index work per element, wider loads). Rows are one block's work each: where that leaves
 * fewer than 4096 rows of 8192 or more (a tensor times a 0-d tensor folds into one row, and
 * took 15.9 ms for 268 MB on the H200), a row is split in rows of up to 4096. */
static void fold_dims(struct kf_buf *b, int n) {
    kf_buf_printf(b,
                  "    {\n        const int64_t D[4] = {n / (d1 * d2 * d3), d1, d2, d3};\n"
                  "        const int64_t S[%d][4] = {",
                  n);
    for (int k = 0; k < n; k++)
        kf_buf_printf(b, "%s{s%d0, s%d1, s%d2, s%d3}", k ? ", " : "", k, k, k, k);
    kf_buf_printf(b,
                  "};\n        int64_t nd[4] = {1, 1, 1, 1}, ns[%d][4] = {};\n"
                  "        int cur = 3;\n        bool first = true;\n"
                  "        for (int j = 3; j >= 0; --j) {\n"
                  "            if (D[j] == 1)\n                continue;\n"
                  "            if (!first) {\n                bool fold = true;\n"
                  "                for (int k = 0; k < %d; ++k)\n"
                  "                    fold = fold && S[k][j] == ns[k][cur] * nd[cur];\n"
                  "                if (fold) {\n                    nd[cur] *= D[j];\n"
                  "                    continue;\n                }\n"
                  "                --cur;\n            }\n"
                  "            first = false;\n            nd[cur] = D[j];\n"
                  "            for (int k = 0; k < %d; ++k)\n"
                  "                ns[k][cur] = S[k][j];\n        }\n"
                  "        // few long rows (a whole tensor times a scalar folds into one row,\n"
                  "        // which one block would walk): the row split into rows of c\n"
                  "        if (nd[0] == 1 && nd[3] >= 8192 && n / nd[3] < 4096) {\n"
                  "            int64_t c = 4096;\n"
                  "            while (c > 256 && nd[3] %% c != 0)\n                c /= 2;\n"
                  "            if (nd[3] %% c == 0) {\n"
                  "                nd[0] = nd[1], nd[1] = nd[2], nd[2] = nd[3] / c, nd[3] = c;\n"
                  "                for (int k = 0; k < %d; ++k) {\n"
                  "                    ns[k][0] = ns[k][1], ns[k][1] = ns[k][2];\n"
                  "                    ns[k][2] = ns[k][3] * c;\n                }\n"
                  "            }\n        }\n"
                  "        d1 = nd[1];\n        d2 = nd[2];\n        d3 = nd[3];\n",
                  n, n, n, n);
    for (int k = 0; k < n; k++)
        kf_buf_printf(
            b, "        s%d0 = ns[%d][0], s%d1 = ns[%d][1], s%d2 = ns[%d][2], s%d3 = ns[%d][3];\n",
            k, k, k, k, k, k, k, k);
    kf_buf_printf(b, "    }\n");
}

/* kf_rows4's inputs in0.. as the float4 row pass (expert_ew.c) names them; along: every input
 * runs along the row (kf_rows4a) */
static struct kfw_row4 rows4(int n, int along) {
    return (struct kfw_row4){.n = n, .elem = "kf_elem", .in = "in", .pad = 12, .along = along};
}

/* kf_rows4: kf_rows with four columns per thread, for rows whose every input runs along the
 * row with stride 1 (read as float4) or 0 (one value per row, read once): the common bias and
 * per-channel cases. A row takes the fewest threads (a power of two, at least a warp) that
 * cover it, so a block works on several short rows at once; each group of threads splits its
 * first row's index once per chunk and counts up from there. The launch (rows4_launch) checks
 * the strides and the alignment at run time and otherwise falls through to kf_rows. */
static void rows4_kernel(struct kf_buf *b, int n, int along) {
    kf_buf_printf(b, "__global__ void kf_rows4%s(", along ? "a" : "");
    kfw_ew_params(b, n, "__restrict__");
    dims_params(b, n);
    kf_buf_printf(b, ", int64_t rb) {\n    const int64_t rows = n / d3;\n"
                     "    const int len4 = (int)(d3 / 4);\n"
                     "    int tpr = blockDim.x;\n"
                     "    while (tpr > 32 && tpr / 2 >= len4)\n        tpr /= 2;\n"
                     "    const int groups = blockDim.x / tpr, g = threadIdx.x / tpr, "
                     "lane = threadIdx.x %% tpr;\n"
                     "    for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < rows; "
                     "r0 += (int64_t)gridDim.x * rb) {\n"
                     "        const int64_t r1 = r0 + rb < rows ? r0 + rb : rows;\n"
                     "        int64_t r = r0 + g;\n"
                     "        if (r >= r1)\n            continue;\n"
                     "        int64_t i2 = r %% d2, i1 = (r / d2) %% d1, i0 = r / d2 / d1;\n"
                     "        for (; r < r1; r += groups) {\n");
    const struct kfw_row4 r = rows4(n, along);
    for (int k = 0; k < n; k++) {
        kf_buf_printf(b,
                      "            const float *__restrict__ p%d = in%d + i0 * s%d0 + i1 * s%d1 "
                      "+ i2 * s%d2;\n",
                      k, k, k, k, k);
        kfw_row4_base(b, &r, k);
    }
    kf_buf_printf(b,
                  "            float4 *__restrict__ o = reinterpret_cast<float4 *>(out + r * d3);\n"
                  "#pragma unroll 2\n"
                  "            for (int c = lane; c < len4; c += tpr) {\n");
    kfw_row4_body(b, &r, "o");
    kf_buf_printf(b, "            }\n"
                     "            i2 += groups;\n"
                     "            while (i2 >= d2) {\n                i2 -= d2;\n"
                     "                if (++i1 == d1) {\n                    i1 = 0;\n"
                     "                    ++i0;\n                }\n            }\n"
                     "        }\n    }\n}\n\n");
}

/* kf_long4: few long rows that fold_dims could not cut into rows of a power of two (a conv3d's
 * per-channel bias over 16 x 32 rows of 30 x 62 x 62: 512 rows of 115320 went to the flat kernel,
 * with a 64-bit division chain per element: 0.61 ms on the H200 for what a row pass reads in
 * some 0.12). Row blockIdx.y, its float4 columns split over gridDim.x blocks; each block splits
 * its row's index once. kf_long is the same with scalar loads (rows not a multiple of 4, or
 * misaligned). */
static void long_kernel(struct kf_buf *b, int n, bool vec) {
    kf_buf_printf(b, "__global__ void kf_long%s(", vec ? "4" : "");
    kfw_ew_params(b, n, "__restrict__");
    dims_params(b, n);
    kf_buf_printf(b, ") {\n    const int64_t r = blockIdx.y;\n"
                     "    const int64_t i2 = r %% d2, i1 = (r / d2) %% d1, i0 = r / d2 / d1;\n");
    for (int k = 0; k < n; k++) {
        kf_buf_printf(b,
                      "    const float *__restrict__ p%d = in%d + i0 * s%d0 + i1 * s%d1 + "
                      "i2 * s%d2;\n",
                      k, k, k, k, k);
        if (vec)
            kf_buf_printf(b, "    const float b%d = s%d3 ? 0.0f : p%d[0];\n", k, k, k);
    }
    kf_buf_printf(b,
                  "    const int64_t len = %s, step = (int64_t)gridDim.x * blockDim.x;\n"
                  "    %s *__restrict__ o = reinterpret_cast<%s *>(out + r * d3);\n"
                  "    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < len; "
                  "c += step) {\n",
                  vec ? "d3 / 4" : "d3", vec ? "float4" : "float", vec ? "float4" : "float");
    if (vec) {
        struct kfw_row4 body = rows4(n, 0);
        body.pad = 4;
        kfw_row4_body(b, &body, "o");
    } else {
        kf_buf_printf(b, "        o[c] = kf_elem(");
        for (int k = 0; k < n; k++)
            kf_buf_printf(b, "%sp%d[c * s%d3]", k ? ", " : "", k, k);
        kf_buf_printf(b, ");\n");
    }
    kf_buf_printf(b, "    }\n}\n\n");
}

/* the launch of kf_long4 or kf_long for rows of 8192 or more too few to fill the GPU (fewer
 * than 1024; at most 65535, the grid's y) */
static void long_launch(struct kf_buf *b, int n) {
    const struct kfw_row4 r = rows4(n, 0);
    kfw_row4_check(b, &r, "lvec", "d3 % 4 == 0");
    kf_buf_printf(b, "    if (d3 >= 8192 && n / d3 < 1024 && d3 <= 0x7fffffff) {\n"
                     "        const int64_t per = lvec ? d3 / 4 : d3, rows = n / d3;\n"
                     "        // four columns per thread, and some 2048 blocks in all\n"
                     "        int64_t bx = (per + 4 * threads - 1) / (4 * threads);\n"
                     "        const int64_t want = (2048 + rows - 1) / rows;\n"
                     "        bx = bx < want ? bx : want;\n"
                     "        const dim3 grid((unsigned)(bx > 0 ? bx : 1), (unsigned)rows);\n"
                     "        if (lvec)\n            kf_long4<<<grid, threads, 0, 0>>>(");
    launch_args(b, n, "");
    kf_buf_printf(b, "        else\n            kf_long<<<grid, threads, 0, 0>>>(");
    launch_args(b, n, "");
    kf_buf_printf(b, "        return (int)cudaGetLastError();\n    }\n");
}

/* the host's test for kf_rows4 and its launch: rows of a multiple of 4, the output and every
 * input that runs along the row 16-byte aligned at every row start */
/* the row kernels take rows of 64 or more, unless there are too few of them to fill the GPU (a
 * long row that fold_dims could not split): those go to the flat kernel */
#define ROWS_OK "d3 >= 64 && (d3 < 8192 || n / d3 >= 1024)"

static void rows4_launch(struct kf_buf *b, int n) {
    const struct kfw_row4 r = rows4(n, 0);
    kfw_row4_check(b, &r, "vec", ROWS_OK " && d3 % 4 == 0 && d3 / 4 <= 0x7fffffff");
    kf_buf_printf(b, "    if (vec) {\n        const int64_t rows = n / d3;\n"
                     "        const int64_t rb = d3 >= 4096 ? 1 : 4096 / d3;\n"
                     "        const int64_t chunks = (rows + rb - 1) / rb;\n"
                     "        const int64_t blocks = chunks < 65535 * 16 ? chunks : 65535 * 16;\n"
                     "        if (");
    along_test(b, n);
    kf_buf_printf(b, ")\n            kf_rows4a<<<(unsigned)blocks, threads, 0, 0>>>(");
    launch_args(b, n, ", rb");
    kf_buf_printf(b, "        else\n            kf_rows4<<<(unsigned)blocks, threads, 0, 0>>>(");
    launch_args(b, n, ", rb");
    kf_buf_printf(b, "        return (int)cudaGetLastError();\n    }\n");
}

/* cuda: variants 0 and 1 walk the output by rows of its last dimension (one division per chunk
 * of rows, threads along the row: coalesced when an input's last stride is 1 or 0; four columns
 * per thread where kf_rows4 applies), falling back to the flat kernel when rows are short; variant
 * 2 is the flat kernel alone (one index split per element). */
static char *cuda(const char *fn, const char *body, int n, int v) {
    static const int threads[] = {256, 512, 256};
    if (v > 2)
        return NULL;
    struct kf_buf b = {0};
    kf_buf_printf(&b,
                  "// kforge expert, broadcasting, variant %d: %d threads per block, %s.\n"
                  "#include <cuda_runtime.h>\n#include <cstdint>\n\nnamespace {\n\n",
                  v, threads[v],
                  v < 2 ? "rows of the last dimension (the flat kernel for short rows)"
                        : "flat, strided loads");
    kfw_ew_elem(&b, body, n, "__device__ __forceinline__");
    kf_buf_printf(&b, "\n__global__ void kf_bcast(");
    kfw_ew_params(&b, n, "__restrict__");
    dims_params(&b, n);
    kf_buf_printf(&b, ") {\n    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
                      "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                      "i += stride) {\n");
    kf_buf_printf(&b, SPLIT);
    kf_buf_printf(&b, "        out[i] = ");
    elem_call(&b, n);
    kf_buf_printf(&b, ";\n    }\n}\n\n");
    if (v < 2) {
        kf_buf_printf(&b, "__global__ void kf_rows(");
        kfw_ew_params(&b, n, "__restrict__");
        dims_params(&b, n);
        /* a block takes rb consecutive rows: the row's (i0, i1, i2) split once per chunk and
         * then counted up (64-bit divisions per row cost more than a short row's loads), each
         * input's row start once per row, a 32-bit column index */
        kf_buf_printf(&b,
                      ", int64_t rb) {\n    const int64_t rows = n / d3;\n"
                      "    const int len = (int)d3;\n"
                      "    for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < rows; "
                      "r0 += (int64_t)gridDim.x * rb) {\n"
                      "        int64_t i2 = r0 %% d2, i1 = (r0 / d2) %% d1, i0 = r0 / d2 / d1;\n"
                      "        const int64_t r1 = r0 + rb < rows ? r0 + rb : rows;\n"
                      "        for (int64_t r = r0; r < r1; ++r) {\n");
        for (int k = 0; k < n; k++)
            kf_buf_printf(
                &b,
                "            const float *__restrict__ p%d = in%d + i0 * s%d0 + i1 * s%d1 "
                "+ i2 * s%d2;\n",
                k, k, k, k, k);
        kf_buf_printf(&b, "            float *__restrict__ o = out + r * d3;\n#pragma unroll 4\n"
                          "            for (int c = threadIdx.x; c < len; c += blockDim.x)\n"
                          "                o[c] = kf_elem(");
        for (int k = 0; k < n; k++)
            kf_buf_printf(&b, "%sp%d[c * s%d3]", k ? ", " : "", k, k);
        kf_buf_printf(&b, ");\n            if (++i2 == d2) {\n                i2 = 0;\n"
                          "                if (++i1 == d1) {\n                    i1 = 0;\n"
                          "                    ++i0;\n                }\n            }\n"
                          "        }\n    }\n}\n\n");
        rows4_kernel(&b, n, 0);
        rows4_kernel(&b, n, 1);
        long_kernel(&b, n, true);
        long_kernel(&b, n, false);
    }
    kf_buf_printf(&b, "} // namespace\n\nextern \"C\" int %s(", fn);
    kfw_ew_params(&b, n, "");
    dims_params(&b, n);
    kf_buf_printf(&b,
                  ") {\n    if (n <= 0 || d1 <= 0 || d2 <= 0 || d3 <= 0)\n        return n < 0;\n"
                  "    const int threads = %d;\n",
                  threads[v]);
    fold_dims(&b, n);
    if (v < 2) {
        rows4_launch(&b, n);
        kf_buf_printf(
            &b, "    if (" ROWS_OK " && d3 <= 0x7fffffff) {\n        const int64_t rows = n / d3;\n"
                "        const int64_t rb = d3 >= 4096 ? 1 : 4096 / d3;\n"
                "        const int64_t chunks = (rows + rb - 1) / rb;\n"
                "        const int64_t blocks = chunks < 65535 * 16 ? chunks : 65535 * 16;\n"
                "        kf_rows<<<(unsigned)blocks, threads, 0, 0>>>(");
        launch_args(&b, n, ", rb");
        kf_buf_printf(&b, "        return (int)cudaGetLastError();\n    }\n");
        long_launch(&b, n);
    }
    kf_buf_printf(&b, "    int64_t blocks = (n + threads - 1) / threads;\n"
                      "    if (blocks > 65535 * 8)\n        blocks = 65535 * 8;\n"
                      "    kf_bcast<<<(unsigned)blocks, threads, 0, 0>>>(");
    launch_args(&b, n, "");
    kf_buf_printf(&b, "    return (int)cudaGetLastError();\n}\n");
    return b.data;
}

char *kfw_bcast_kernel(const char *backend, const char *fn, const char *body, int n_inputs, int v) {
    return strcmp(backend, "cuda") == 0 ? cuda(fn, body, n_inputs, v) : cpu(fn, body, n_inputs, v);
}
