/* expert_gemm.c: the expert's generator for the matmul family (torch.matmul, mm, bmm, `@`) and
 * linear layers (nn.Linear, F.linear), see expert_ops.h. Every node becomes one call of one
 * kernel that computes c[i] = a[i] op(b[i]) for i < batch (row-major, op(b) = b for matmul and
 * b^T for linear), with the batch, the sizes and the batch strides worked out by the Python
 * lines at run time:
 *   [.., M, K] x [K, N]       one GEMM over every row of a (batch 1);
 *   [M, K] x [.., K, N]       a shared by every matrix of b (a's batch stride 0);
 *   [B.., M, K] x [B.., K, N] the same batch dims on both sides;
 *   1-D operands              as torch.matmul: a [K] is [1, K], b [K] is [K, 1], dims dropped;
 *   linear x [.., K], w [N, K] one GEMM over every row of x.
 * Batch dims that broadcast (e.g. [2, 1, M, K] x [3, K, N]) raise ValueError at run time: the
 * operands' shapes are not part of the node, so that cannot be told here.
 * Kernels on cuda: cuBLAS (cublasSgemm_64 / cublasSgemmStridedBatched_64; large products as
 * three TF32 products of split operands, as accurate as the SGEMM: expert_gemm_split.c) or
 * cuBLASLt, never plain TF32; a cache-blocked OpenMP SGEMM (B packed in panels, a register-blocked
 * micro-kernel) in three block sizes on cpu. Nothing is kept between calls: the node is only read,
 * py is the caller's (appended to), and each source is built in a fresh buffer that the caller owns
 * and frees. */
#include "expert_ops.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"

enum gemm_kind { GEMM_NONE, GEMM_MATMUL, GEMM_LINEAR };

static enum gemm_kind kind_of(const json_t *node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    if (!op || !target)
        return GEMM_NONE;
    if (!strcmp(op, "call_module")) {
        const char *type = json_string_value(json_object_get(node, "module_type"));
        return type && !strcmp(type, "Linear") ? GEMM_LINEAR : GEMM_NONE;
    }
    if (strcmp(op, "call_function") != 0 && strcmp(op, "call_method") != 0)
        return GEMM_NONE;
    const char *s = kfx_arg_short_name(target);
    if (!strcmp(s, "matmul") || !strcmp(s, "mm") || !strcmp(s, "bmm"))
        return GEMM_MATMUL;
    return !strcmp(s, "linear") && !strcmp(op, "call_function") ? GEMM_LINEAR : GEMM_NONE;
}

/* torch.matmul's cases as (batch, rows, k, n, batch strides); see the top of this file. The
 * lines before it name the operands a and b, and at (trans_a) or bt (trans_b): the contiguous
 * tensor whose last two dims swapped are a or b, which the kernel reads instead. */
static const char PY_MATMUL[] =
    "        if @_a.dim() == 0 or @_b.dim() == 0:\n"
    "            raise ValueError(\"$: matmul of a 0-d tensor\")\n"
    "        @_a2 = @_a.unsqueeze(0) if @_a.dim() == 1 else @_a\n"
    "        @_b2 = @_b.unsqueeze(-1) if @_b.dim() == 1 else @_b\n"
    "        @_m, @_k, @_n = @_a2.shape[-2], @_a2.shape[-1], @_b2.shape[-1]\n"
    "        if @_b2.shape[-2] != @_k:\n"
    "            raise ValueError(f\"$: matmul of {tuple(@_a.shape)} and {tuple(@_b.shape)}: the "
    "inner sizes differ\")\n"
    "        if @_b2.dim() == 2:  # every row of a times one matrix\n"
    "            @_lead, @_batch, @_rows, @_sa, @_sb = @_a2.shape[:-2], 1, "
    "@_a2.shape[:-1].numel(), 0, 0\n"
    "        elif @_a2.dim() == 2:  # one matrix times every matrix of b\n"
    "            @_lead, @_rows, @_sa, @_sb = @_b2.shape[:-2], @_m, 0, @_k * @_n\n"
    "            @_batch = @_lead.numel()\n"
    "        elif @_a2.shape[:-2] == @_b2.shape[:-2]:  # the same batch dims\n"
    "            @_lead, @_rows, @_sa, @_sb = @_a2.shape[:-2], @_m, @_m * @_k, @_k * @_n\n"
    "            @_batch = @_lead.numel()\n"
    "        else:\n"
    "            raise ValueError(f\"$: matmul of {tuple(@_a.shape)} and {tuple(@_b.shape)}: batch "
    "dims that broadcast (not supported)\")\n"
    "        @ = @_a.new_empty((*@_lead, @_m, @_n))\n"
    "        self.k.$(@_a%s, @_b%s, @, @_batch, @_rows, @_k, @_n, @_sa, @_sb)\n"
    "        if @_a.dim() == 1 or @_b.dim() == 1:\n"
    "            @ = @.view((*@_lead, *@_a.shape[-2:-1], *(@_b.shape[-1:] if @_b.dim() > 1 else "
    "())))\n";

static const char PY_LINEAR[] =
    "        @_x, @_w = `0, `1\n"
    "        if @_x.dim() == 0 or @_w.dim() != 2 or @_x.shape[-1] != @_w.shape[1]:\n"
    "            raise ValueError(f\"$: linear of {tuple(@_x.shape)} with a weight "
    "{tuple(@_w.shape)}: the sizes differ\")\n"
    "        @ = @_x.new_empty((*@_x.shape[:-1], @_w.shape[0]))\n"
    "        self.k.$(@_x, @_w, @, 1, @_x.shape[:-1].numel(), @_w.shape[1], @_w.shape[0], 0, 0)\n";

int kfx_gemm_py(const struct kfx_call *c, struct kf_buf *py, char *detail, size_t dlen) {
    const char *name = kfx_arg_name(c->node);
    const char *target = json_string_value(json_object_get(c->node, "target"));
    enum gemm_kind kind = kind_of(c->node);
    if (kind == GEMM_NONE) {
        snprintf(detail, dlen, "node %s (%s) is not a matmul or a linear layer", name,
                 target ? target : "?");
        return -1;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s %s", kind == GEMM_LINEAR ? "linear" : "matmul", name);
    if (kfx_arg_operands(c, 2, what, "", detail, dlen) != 0)
        return -1;
    if (kind == GEMM_LINEAR) {
        kfx_arg_expand(py, PY_LINEAR, c);
        return 0;
    }
    /* b's pointer: b2 (b, or b as a column), or bt, whose strides a transpose of b's are (b is
     * at least 2-D there: b2 is b) */
    char text[sizeof(PY_MATMUL) + 8];
    snprintf(text, sizeof(text), PY_MATMUL, c->trans_a ? "t" : "2", c->trans_b ? "t" : "2");
    const char *o = c->out;
    kf_buf_printf(py, "        %s_a, %s_b = %s, %s\n", o, o, c->trans_a ? c->a_view : c->in[0],
                  c->trans_b ? c->b_view : c->in[1]);
    if (c->trans_a)
        kf_buf_printf(py, "        %s_at = %s\n", o, c->in[0]);
    if (c->trans_b)
        kf_buf_printf(py, "        %s_bt = %s\n", o, c->in[1]);
    kfx_arg_expand(py, text, c);
    return 0;
}

/* ---- the generated sources ---- */

/* The comment and the constant every variant opens with. */
static void head(struct kf_buf *b, const struct kfx_call *c, bool trans, const char *what) {
    kf_buf_printf(b,
                  "// kforge expert: %s, %s, %s.\n"
                  "// c[i] = a[i] op(b[i]) for i < batch, row-major: a[i] = a + i * sa is m x k, "
                  "b[i] = b + i * sb is\n"
                  "// %s, c[i] = c + i * m * n is m x n.\n",
                  c->fn, trans ? "linear (x times weight^T)" : "matmul", what,
                  trans ? "n x k (a linear layer's weight; op = transpose)" : "k x n (op = none)");
}

static const char CUBLAS_HANDLE[] =
    "constexpr int kCublasError = 1000; // + cublasStatus_t, to tell them from CUDA errors\n\n"
    "// Created once, lazily, with CUBLAS_DEFAULT_MATH (full fp32: never TF32); kept for the\n"
    "// library's lifetime.\n"
    "cublasHandle_t handle() {\n"
    "    static cublasHandle_t h = nullptr;\n"
    "    if (h == nullptr) {\n"
    "        cublasHandle_t created = nullptr;\n"
    "        if (cublasCreate(&created) != CUBLAS_STATUS_SUCCESS)\n"
    "            return nullptr;\n"
    "        if (cublasSetMathMode(created, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {\n"
    "            cublasDestroy(created);\n"
    "            return nullptr;\n"
    "        }\n"
    "        h = created;\n"
    "    }\n"
    "    return h;\n"
    "}\n\n";

void kfx_src_cublas_handle(struct kf_buf *b) {
    kf_buf_printf(b, "%s", CUBLAS_HANDLE);
}

/* A product with one column (n == 1: a matrix times a vector, a linear layer of one output) is
 * a dot product per row of a, which cuBLAS's SGEMM runs at some 45% of the copy bandwidth (a
 * 4096 x 16384 matvec on the H200, bench/tasks_heldout): warps per row instead, four float4
 * loads in flight per lane, the vector (read by every warp) from cache. A warp per row left a
 * 4096-row matvec with half the warps an SM holds and four loads in flight each (0.136 ms
 * against eager's 0.090 on the H200): rows of few are split over up to 8 warps of a block,
 * combined through shared memory. */
static const char GEMV[] =
    "// c[i][r] = a[i][r] . b[i] for a's rows r (k long, contiguous) and b[i]'s k values: wpr\n"
    "// warps per row (1, 2, 4 or 8: a block's 8 warps hold whole rows); vec: k % 4 == 0 and\n"
    "// every row and vector 16-byte aligned.\n"
    "__global__ void gemv_rows(const float *__restrict__ a, const float *__restrict__ b,\n"
    "                          float *__restrict__ c, int64_t rows, int64_t m, int64_t k,\n"
    "                          int64_t sa, int64_t sb, bool vec, int wpr) {\n"
    "    __shared__ float part[8];\n"
    "    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
    "    const int64_t w = gw / wpr;\n"
    "    const int lane = threadIdx.x & 31, piece = (int)(gw % wpr), wib = threadIdx.x >> 5;\n"
    "    const int64_t step = 32 * (int64_t)wpr;\n"
    "    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n"
    "    if (w < rows) {\n"
    "        const float *x = a + (w / m) * sa + (w % m) * k, *y = b + (w / m) * sb;\n"
    "        int64_t j = 32 * (int64_t)piece + lane;\n"
    "        if (vec) {\n"
    "            const float4 *x4 = reinterpret_cast<const float4 *>(x);\n"
    "            const float4 *y4 = reinterpret_cast<const float4 *>(y);\n"
    "            const int64_t k4 = k / 4;\n"
    "            for (; j + 3 * step < k4; j += 4 * step) {\n"
    "                const float4 p0 = x4[j], p1 = x4[j + step], p2 = x4[j + 2 * step];\n"
    "                const float4 p3 = x4[j + 3 * step];\n"
    "                const float4 q0 = y4[j], q1 = y4[j + step], q2 = y4[j + 2 * step];\n"
    "                const float4 q3 = y4[j + 3 * step];\n"
    "                s0 += p0.x * q0.x + p0.y * q0.y + p0.z * q0.z + p0.w * q0.w;\n"
    "                s1 += p1.x * q1.x + p1.y * q1.y + p1.z * q1.z + p1.w * q1.w;\n"
    "                s2 += p2.x * q2.x + p2.y * q2.y + p2.z * q2.z + p2.w * q2.w;\n"
    "                s3 += p3.x * q3.x + p3.y * q3.y + p3.z * q3.z + p3.w * q3.w;\n"
    "            }\n"
    "            for (; j < k4; j += step) {\n"
    "                const float4 p = x4[j], q = y4[j];\n"
    "                s0 += p.x * q.x + p.y * q.y + p.z * q.z + p.w * q.w;\n"
    "            }\n"
    "        } else {\n"
    "            for (; j < k; j += step)\n"
    "                s0 += x[j] * y[j];\n"
    "        }\n"
    "    }\n"
    "    float s = (s0 + s1) + (s2 + s3);\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "        s += __shfl_xor_sync(0xffffffffu, s, o);\n"
    "    if (wpr == 1) {\n"
    "        if (lane == 0 && w < rows)\n"
    "            c[w] = s;\n"
    "        return;\n"
    "    }\n"
    "    if (lane == 0)\n"
    "        part[wib] = s;\n"
    "    __syncthreads();\n"
    "    if (lane == 0 && piece == 0 && w < rows) {\n"
    "        float t = part[wib];\n"
    "        for (int q = 1; q < wpr; ++q)\n"
    "            t += part[wib + q];\n"
    "        c[w] = t;\n"
    "    }\n"
    "}\n\n"
    "int gemv(const float *a, const float *b, float *c, int64_t batch, int64_t m, int64_t k,\n"
    "         int64_t sa, int64_t sb) {\n"
    "    const bool vec = k % 4 == 0 && sa % 4 == 0 && sb % 4 == 0 &&\n"
    "                     ((uintptr_t)a % 16) == 0 && ((uintptr_t)b % 16) == 0;\n"
    "    const int64_t rows = batch * m, per = vec ? k / 4 : k;\n"
    "    // more warps per row while the GPU would hold fewer than 16 Ki warps (an H200 holds\n"
    "    // 8448) and each lane keeps at least 16 loads of its row\n"
    "    int wpr = 1;\n"
    "    while (wpr < 8 && rows * wpr < 16384 && per >= 32 * 16 * 2 * (int64_t)wpr)\n"
    "        wpr *= 2;\n"
    "    const int64_t blocks = (rows * wpr + 7) / 8;\n"
    "    gemv_rows<<<(unsigned)blocks, 256, 0, 0>>>(a, b, c, rows, m, k, sa, sb, vec, wpr);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n\n";

/* The checks every entry point starts with (CUDA flavour), after the signature. */
static const char CUDA_ENTRY_CHECKS[] =
    "    if (batch < 0 || m < 0 || k < 0 || n < 0 || sa < 0 || sb < 0)\n"
    "        return (int)cudaErrorInvalidValue;\n"
    "    if (batch == 0 || m == 0 || n == 0)\n"
    "        return (int)cudaGetLastError();\n"
    "    if (k == 0) // an empty sum: zeros\n"
    "        return (int)cudaMemsetAsync(c, 0, sizeof(float) * batch * m * n, 0);\n"
    "    // dot products by rows, in blocks of 8 warps (up to 8 per row): at most 2^31 - 1 blocks\n"
    "    if (n == 1 && !kTransA && batch * m <= (int64_t)0x7fffffff)\n"
    "        return gemv(a, b, c, batch, m, k, sa, sb);\n";

static void signature(struct kf_buf *b, const struct kfx_call *c) {
    kf_buf_printf(b,
                  "extern \"C\" int %s(const float *a, const float *b, float *c, int64_t batch, "
                  "int64_t m,\n        int64_t k, int64_t n, int64_t sa, int64_t sb) {\n",
                  c->fn);
}

/* Variant 0's entry point after its checks: cuBLAS, operands swapped (row-major C = A op(B) is
 * column-major C^T = op(B)^T A^T). */
static const char CUBLAS_ENTRY_HEAD[] =
    "    cublasHandle_t h = handle();\n"
    "    if (h == nullptr)\n"
    "        return kCublasError + (int)CUBLAS_STATUS_NOT_INITIALIZED;\n"
    "    cublasStatus_t st = cublasSetStream(h, 0);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return kCublasError + (int)st;\n";

/* Variant 0 only, after CUBLAS_ENTRY_HEAD: large products to split_gemm. */
static const char SPLIT_DISPATCH[] =
    "    if (kSplit && use_split(batch, m, k, n, sa, sb))\n"
    "        return split_gemm(h, a, b, c, batch, m, k, n, sa, sb);\n";

static const char CUBLAS_ENTRY[] =
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    const cublasOperation_t opb = kTransB ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    const int64_t ldb = kTransB ? k : n;\n"
    "    // kTransA: a is k x m (row-major), m x k column-major: op(A^T) = transpose\n"
    "    const cublasOperation_t opa = kTransA ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    const int64_t lda = kTransA ? m : k;\n"
    "    if (batch == 1)\n"
    "        st = cublasSgemm_64(h, opb, opa, n, m, k, &one, b, ldb, a, lda, &zero, c, n);\n"
    "    else\n"
    "        st = cublasSgemmStridedBatched_64(h, opb, opa, n, m, k, &one, b, ldb, sb, a, lda, "
    "sa,\n"
    "                                          &zero, c, n, m * n, batch);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return kCublasError + (int)st;\n"
    "    return (int)cudaGetLastError();\n"
    "}\n";

/* Variant 1: cuBLASLt with CUBLAS_COMPUTE_32F, the heuristic's first algorithm, plans cached per
 * shape and alignment. */
static const char LT_BODY_HEAD[] =
    "constexpr int kCublasError = 1000; // + cublasStatus_t, to tell them from CUDA errors\n"
    "constexpr size_t kWorkspace = size_t{32} << 20;\n"
    "constexpr int kPlans = 8;\n\n"
    "#define KF_LT(call)                                                                     \\\n"
    "    do {                                                                                \\\n"
    "        const cublasStatus_t st_ = (call);                                              \\\n"
    "        if (st_ != CUBLAS_STATUS_SUCCESS)                                               \\\n"
    "            return kCublasError + (int)st_;                                             \\\n"
    "    } while (0)\n\n"
    "// One shape's descriptors and algorithm. In cuBLASLt's column-major view the product is\n"
    "// C^T (n x m) = op(B)^T (n x k) A^T (k x m): Lt's A is our b, Lt's B our a.\n"
    "struct Plan {\n"
    "    bool ready = false;\n"
    "    int64_t key[9] = {};\n"
    "    cublasLtMatmulDesc_t op = nullptr;\n"
    "    cublasLtMatrixLayout_t lb = nullptr, la = nullptr, lc = nullptr;\n"
    "    cublasLtMatmulAlgo_t algo = {};\n"
    "};\n\n"
    "// The library's state, kept for its lifetime: the handle, one workspace, a few plans.\n"
    "struct State {\n"
    "    cublasLtHandle_t lt = nullptr;\n"
    "    void *ws = nullptr;\n"
    "    Plan plans[kPlans];\n"
    "    int next = 0;\n"
    "};\n\n"
    "State &state() {\n"
    "    static State s;\n"
    "    return s;\n"
    "}\n\n"
    "// The alignment (up to 256 bytes) of a matrix and of every matrix after it in the batch.\n"
    "int64_t alignment(const void *p, int64_t stride, int64_t batch) {\n"
    "    uint64_t v = reinterpret_cast<uintptr_t>(p) | 256u;\n"
    "    if (batch > 1)\n"
    "        v |= static_cast<uint64_t>(stride) * sizeof(float);\n"
    "    return static_cast<int64_t>(v & (~v + 1));\n"
    "}\n\n"
    "void release(Plan &p) {\n"
    "    if (p.op != nullptr)\n"
    "        cublasLtMatmulDescDestroy(p.op);\n"
    "    if (p.la != nullptr)\n"
    "        cublasLtMatrixLayoutDestroy(p.la);\n"
    "    if (p.lb != nullptr)\n"
    "        cublasLtMatrixLayoutDestroy(p.lb);\n"
    "    if (p.lc != nullptr)\n"
    "        cublasLtMatrixLayoutDestroy(p.lc);\n"
    "    p = Plan();\n"
    "}\n\n"
    "int set_batch(cublasLtMatrixLayout_t l, int32_t batch, int64_t stride) {\n"
    "    KF_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,\n"
    "                                           sizeof(batch)));\n"
    "    KF_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, "
    "&stride,\n"
    "                                           sizeof(stride)));\n"
    "    return 0;\n"
    "}\n\n"
    "// The heuristic's first algorithm for p's descriptors, for buffers aligned to al[0..2].\n"
    "int pick(State &s, Plan &p, const int64_t al[3]) {\n"
    "    cublasLtMatmulPreference_t pref = nullptr;\n"
    "    KF_LT(cublasLtMatmulPreferenceCreate(&pref));\n"
    "    const uint64_t ws = kWorkspace;\n"
    "    const uint32_t aa = (uint32_t)al[1], ab = (uint32_t)al[0], ac = (uint32_t)al[2];\n"
    "    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(\n"
    "        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulPreferenceSetAttribute(\n"
    "            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof(aa));\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulPreferenceSetAttribute(\n"
    "            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof(ab));\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulPreferenceSetAttribute(\n"
    "            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof(ac));\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulPreferenceSetAttribute(\n"
    "            pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof(ac));\n"
    "    cublasLtMatmulHeuristicResult_t res = {};\n"
    "    int returned = 0;\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulAlgoGetHeuristic(s.lt, p.op, p.lb, p.la, p.lc, p.lc, pref, 1, "
    "&res,\n"
    "                                            &returned);\n"
    "    cublasLtMatmulPreferenceDestroy(pref);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return kCublasError + (int)st;\n"
    "    if (returned < 1 || res.state != CUBLAS_STATUS_SUCCESS)\n"
    "        return kCublasError + (int)CUBLAS_STATUS_NOT_SUPPORTED;\n"
    "    p.algo = res.algo;\n"
    "    return 0;\n"
    "}\n\n"
    "// Descriptors and algorithm for one shape (key: batch m k n sa sb and the alignments).\n"
    "int build(State &s, Plan &p, const int64_t key[9]) {\n"
    "    release(p);\n"
    "    const int64_t batch = key[0], m = key[1], k = key[2], n = key[3];\n"
    "    KF_LT(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));\n"
    "    const cublasOperation_t ta = kTransB ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    KF_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, "
    "sizeof(ta)));\n"
    "    KF_LT(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_32F, kTransB ? k : n, kTransB ? n : k,\n"
    "                                     kTransB ? k : n));\n"
    "    const cublasOperation_t tb = kTransA ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLASLt's B is a\n"
    "    KF_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, "
    "sizeof(tb)));\n"
    "    KF_LT(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_32F, kTransA ? m : k, kTransA ? k : m,\n"
    "                                     kTransA ? m : k));\n"
    "    KF_LT(cublasLtMatrixLayoutCreate(&p.lc, CUDA_R_32F, n, m, n));\n"
    "    if (batch > 1) {\n"
    "        int rc = set_batch(p.lb, (int32_t)batch, key[5]);\n"
    "        if (rc == 0)\n"
    "            rc = set_batch(p.la, (int32_t)batch, key[4]);\n"
    "        if (rc == 0)\n"
    "            rc = set_batch(p.lc, (int32_t)batch, m * n);\n"
    "        if (rc != 0)\n"
    "            return rc;\n"
    "    }\n"
    "    const int rc = pick(s, p, key + 6);\n"
    "    if (rc != 0)\n"
    "        return rc;\n"
    "    for (int i = 0; i < 9; ++i)\n"
    "        p.key[i] = key[i];\n"
    "    p.ready = true;\n"
    "    return 0;\n"
    "}\n\n"
    "// The plan of key: a cached one, or a new one in the oldest slot.\n"
    "int plan_for(const int64_t key[9], Plan **out) {\n"
    "    State &s = state();\n"
    "    if (s.lt == nullptr)\n"
    "        KF_LT(cublasLtCreate(&s.lt));\n"
    "    if (s.ws == nullptr) {\n"
    "        const cudaError_t e = cudaMalloc(&s.ws, kWorkspace);\n"
    "        if (e != cudaSuccess) {\n"
    "            s.ws = nullptr;\n"
    "            return (int)e;\n"
    "        }\n"
    "    }\n";

/* LT_BODY_HEAD, a cached plan's lookup, then this. */
static const char LT_BODY_TAIL[] =
    "    const int rc = build(s, p, key);\n"
    "    *out = &p;\n"
    "    return rc;\n"
    "}\n\n"
    "// c[i] = a[i] op(b[i]) for i < batch through one cublasLtMatmul; al: the alignments of a,\n"
    "// b and c that hold for every matrix of the call's batch.\n"
    "int lt_gemm(const float *a, const float *b, float *c, int64_t batch, int64_t m, int64_t k,\n"
    "            int64_t n, int64_t sa, int64_t sb, const int64_t al[3]) {\n"
    "    const int64_t key[9] = {batch, m, k, n, sa, sb, al[0], al[1], al[2]};\n"
    "    Plan *p = nullptr;\n"
    "    const int rc = plan_for(key, &p);\n"
    "    if (rc != 0)\n"
    "        return rc;\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    KF_LT(cublasLtMatmul(state().lt, p->op, &one, b, p->lb, a, p->la, &zero, c, p->lc, c, "
    "p->lc,\n"
    "                         &p->algo, state().ws, kWorkspace, 0));\n"
    "    return 0;\n"
    "}\n\n"
    "} // namespace\n\n";

/* Variant 1's entry point after its checks. */
static const char LT_ENTRY[] =
    "    if (batch > 0x7fffffff)\n"
    "        return (int)cudaErrorInvalidValue;\n"
    "    const int64_t al[3] = {alignment(a, sa, batch), alignment(b, sb, batch),\n"
    "                           alignment(c, m * n, batch)};\n"
    "    if (batch > 1 && (sa == 0 || sb == 0)) { // a shared operand: one product per matrix\n"
    "        for (int64_t i = 0; i < batch; ++i) {\n"
    "            const int rc = lt_gemm(a + i * sa, b + i * sb, c + i * m * n, 1, m, k, n, 0, "
    "0, "
    "al);\n"
    "            if (rc != 0)\n"
    "                return rc;\n"
    "        }\n"
    "        return (int)cudaGetLastError();\n"
    "    }\n"
    "    const int rc = lt_gemm(a, b, c, batch, m, k, n, sa, sb, al);\n"
    "    return rc != 0 ? rc : (int)cudaGetLastError();\n"
    "}\n";

/* Variant 0 (cuBLAS; large products on TF32 tensor cores with split operands,
 * expert_gemm_split.c), 1 (cuBLASLt) or 2 (cuBLAS's SGEMM for every size). */
static char *cuda_src(const struct kfx_call *c, bool trans, int v) {
    if (v < 0 || v > 2)
        return NULL;
    struct kf_buf b = {0};
    head(&b, c, trans,
         v == 0   ? "cuBLAS: SGEMM, or for large products three TF32 products of split operands "
                    "as accurate as SGEMM (strided batched when batch > 1), stream 0"
         : v == 1 ? "cuBLASLt matmul with CUBLAS_COMPUTE_32F (never TF32), stream 0"
                  : "cuBLAS SGEMM at every size (strided batched when batch > 1), stream 0");
    kf_buf_printf(
        &b,
        "%s#include <cuda_runtime.h>\n\n#include <algorithm>\n#include <cstdint>\n\n"
        "namespace {\n\nconstexpr bool kTransB = %s;\nconstexpr bool kTransA = %s;\n%s\n%s",
        v != 1 ? "// Row-major C = A op(B) is column-major C^T = op(B)^T A^T: the "
                 "operands go to cuBLAS swapped.\n#include <cublas_v2.h>\n"
               : "// The algorithm is the heuristic's first for each shape and "
                 "alignment, cached (a few plans).\n#include <cublasLt.h>\n",
        trans ? "true" : "false", c->trans_a ? "true" : "false",
        v == 0 ? "constexpr bool kSplit = true; // large products: split_gemm\n" : "", GEMV);
    if (v != 1) {
        kf_buf_printf(&b, "%s", CUBLAS_HANDLE);
        if (v == 0)
            kfx_gemm_split_src(&b);
        kf_buf_printf(&b, "} // namespace\n\n");
    } else {
        kf_buf_printf(&b, "%s", LT_BODY_HEAD);
        kfx_src_plan_lookup(&b, "9");
        kf_buf_printf(&b, "%s", LT_BODY_TAIL);
    }
    signature(&b, c);
    if (v == 1)
        kf_buf_printf(&b, "%s%s", CUDA_ENTRY_CHECKS, LT_ENTRY);
    else
        kf_buf_printf(&b, "%s%s%s%s", CUDA_ENTRY_CHECKS, CUBLAS_ENTRY_HEAD,
                      v == 0 ? SPLIT_DISPATCH : "", CUBLAS_ENTRY);
    return b.data;
}

/* The cpu SGEMM after its block sizes: kfx_src_tiles's pack, then the micro-kernel's start. */
static const char CPU_PACK[] =
    "// op(B)[pc.., jc..] (kc x nc) into NR-wide panels, zero-padded: row p of panel q is at\n"
    "// pb + (q * kc + p) * NR.\n"
    "void pack_b(const float *b, int64_t k, int64_t n, int64_t pc, int64_t jc, int64_t kc, "
    "int64_t nc,\n"
    "            float *pb) {\n"
    "    for (int64_t q = 0; q * NR < nc; ++q) {\n"
    "        float *dst = pb + q * kc * NR;\n"
    "        const int64_t j0 = jc + q * NR, cols = std::min<int64_t>(NR, nc - q * NR);\n"
    "        if (kTransB) { // b is n x k: column j of op(B) is row j of b\n"
    "            for (int64_t j = 0; j < NR; ++j) {\n"
    "                const float *src = b + (j0 + j) * k + pc;\n"
    "                for (int64_t p = 0; p < kc; ++p)\n"
    "                    dst[p * NR + j] = j < cols ? src[p] : 0.0f;\n"
    "            }\n"
    "        } else {\n"
    "            for (int64_t p = 0; p < kc; ++p) {\n"
    "                const float *src = b + (pc + p) * n + j0;\n"
    "                for (int64_t j = 0; j < NR; ++j)\n"
    "                    dst[p * NR + j] = j < cols ? src[j] : 0.0f;\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "// The mr x nr tile at c (row stride ldc) = (first ? 0 : c) + rows(kc) x panel; rows holds "
    "MR\n"
    "// row pointers of a (those past mr repeat a valid row; their results are dropped).\n"
    "void micro(int64_t kc, const float *const *rows, const float *pb, float *c, int64_t ldc,\n"
    "           int64_t mr, int64_t nr, bool first) {\n";

/* kfx_src_tiles's store: the full tile's row i added to c unless first. */
static const char CPU_STORE[] = "            float *ci = c + i * ldc;\n"
                                "            if (!first) {\n"
                                "                acc[i][0] += load(ci);\n"
                                "                acc[i][1] += load(ci + VW);\n"
                                "            }\n"
                                "            store(ci, acc[i][0]);\n"
                                "            store(ci + VW, acc[i][1]);\n";

/* kfx_src_tiles's after: the element (i, j), then the driver of one block. */
static const char CPU_BLOCK[] =
    "            c[i * ldc + j] = first ? tile[i][j] : c[i * ldc + j] + tile[i][j];\n"
    "    }\n"
    "}\n\n"
    "// The block of c at rows ic.., columns jc.. (at most kMC x kNC) of one product, over all "
    "of k.\n"
    "void block(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n, "
    "int64_t ic,\n"
    "           int64_t jc, float *pb) {\n"
    "    const int64_t mc = std::min(kMC, m - ic), nc = std::min(kNC, n - jc);\n"
    "    for (int64_t pc = 0; pc < k; pc += kKC) {\n"
    "        const int64_t kc = std::min(kKC, k - pc);\n"
    "        pack_b(b, k, n, pc, jc, kc, nc, pb);\n"
    "        // kTransA: the block's rows of op(A), mc x kc, packed after the panels\n"
    "        float *pa = pb + kKC * ((kNC + NR - 1) / NR * NR);\n"
    "        if (kTransA)\n"
    "            for (int64_t p = 0; p < kc; ++p)\n"
    "                for (int64_t i = 0; i < mc; ++i)\n"
    "                    pa[i * kc + p] = a[(pc + p) * m + ic + i];\n"
    "        for (int64_t ir = 0; ir < mc; ir += MR) {\n"
    "            const int64_t mr = std::min<int64_t>(MR, mc - ir);\n"
    "            const float *rows[MR];\n"
    "            for (int64_t i = 0; i < MR; ++i) {\n"
    "                const int64_t row = ir + std::min<int64_t>(i, mr - 1);\n"
    "                rows[i] = kTransA ? pa + row * kc : a + (ic + row) * k + pc;\n"
    "            }\n"
    "            for (int64_t jr = 0; jr < nc; jr += NR)\n"
    "                micro(kc, rows, pb + jr * kc, c + (ic + ir) * n + jc + jr, n, mr,\n"
    "                      std::min<int64_t>(NR, nc - jr), pc == 0);\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "} // namespace\n\n";

/* The cpu entry point after its signature: blocks of c shared out to the OpenMP threads, each
 * with its own packed panel of b. */
static const char CPU_ENTRY[] =
    "    if (batch < 0 || m < 0 || k < 0 || n < 0 || sa < 0 || sb < 0)\n"
    "        return 1;\n"
    "    if (batch == 0 || m == 0 || n == 0)\n"
    "        return 0;\n"
    "    if (k == 0) { // an empty sum: zeros\n"
    "        std::memset(c, 0, sizeof(float) * batch * m * n);\n"
    "        return 0;\n"
    "    }\n"
    "    const int64_t mb = (m + kMC - 1) / kMC, nb = (n + kNC - 1) / kNC, items = batch * nb * "
    "mb;\n"
    "    const size_t panel = sizeof(float) * kKC * ((kNC + NR - 1) / NR * NR);\n";

/* The work item's body, for kfx_src_omp_items. */
static const char CPU_ITEM[] =
    "            const int64_t bi = it / (nb * mb), r = it % (nb * mb);\n"
    "            block(a + bi * sa, b + bi * sb, c + bi * m * n, m, k, n, (r % mb) * kMC, (r / mb) "
    "* kNC,\n"
    "                  pb);\n";

static char *cpu_sgemm(const struct kfx_call *c, bool trans, int v) {
    static const int mc[] = {96, 48, 192}, nc[] = {256, 512, 128}, kc[] = {256, 128, 384};
    if (v < 0 || v > 2)
        return NULL;
    struct kf_buf b = {0};
    char what[160];
    snprintf(what, sizeof(what),
             "cache-blocked OpenMP SGEMM, variant %d: blocks of %d rows x %d columns x %d deep", v,
             mc[v], nc[v], kc[v]);
    head(&b, c, trans, what);
    kf_buf_printf(&b,
                  "// Work items (matrix, column block, row block) go to the OpenMP threads; each "
                  "packs its\n"
                  "// block of op(B) into NR-wide panels and runs a register-blocked MR x NR "
                  "micro-kernel.\n"
                  "#include <algorithm>\n#include <cstdint>\n#include <cstdlib>\n"
                  "#include <cstring>\n\nnamespace {\n\n"
                  "constexpr bool kTransB = %s;\n"
                  "constexpr bool kTransA = %s; // a is k x m: its blocks are packed too\n"
                  "constexpr int64_t kMC = %d, kNC = %d, kKC = %d;\n",
                  trans ? "true" : "false", c->trans_a ? "true" : "false", mc[v], nc[v], kc[v]);
    kfx_src_tiles(&b, "c", CPU_PACK, CPU_STORE, CPU_BLOCK);
    kf_buf_printf(&b,
                  "extern \"C\" int %s(const float *__restrict a, const float *__restrict b, "
                  "float *__restrict c,\n        int64_t batch, int64_t m, int64_t k, int64_t n, "
                  "int64_t sa, int64_t sb) {\n",
                  c->fn);
    kf_buf_printf(&b, "%s", CPU_ENTRY);
    kfx_src_omp_items(&b,
                      "        float *pb = static_cast<float *>(std::malloc(\n"
                      "            panel + (kTransA ? sizeof(float) * kMC * kKC : 0))); // this "
                      "thread's, for this call\n",
                      "pb == nullptr", CPU_ITEM, "        std::free(pb);\n");
    return b.data;
}

char *kfx_gemm_src(const struct kfx_call *c, int v) {
    enum gemm_kind kind = kind_of(c->node);
    if (kind == GEMM_NONE || v < 0)
        return NULL;
    bool trans = kind == GEMM_LINEAR || c->trans_b;
    if (strcmp(c->backend, "cuda") == 0)
        return cuda_src(c, trans, v);
    return cpu_sgemm(c, trans, v);
}
