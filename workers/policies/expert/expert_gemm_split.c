/* expert_gemm_split.c: the CUDA text of an fp32 matrix product done on TF32 tensor cores as
 * accurately as cuBLAS's fp32 SGEMM, for expert_gemm.c's variant 0 (large products only).
 *
 * Each operand is split exactly, x = head + tail: head is x rounded to TF32 (10 mantissa bits,
 * its 13 low bits zero, so any TF32 path reads it unchanged) and tail = x - head (exact in fp32,
 * at most 2^-11 of x). Then
 *     a op(b) = ah op(bh) + [ah | at] op([bt ; bh]) + at op(bt),
 * the last term (2^-22 of the product) dropped. The middle term is one TF32 product over 2k
 * (the split writes each operand's two halves side by side along k for it); its own rounding
 * is 2^-11 of an already small term. The heads' product carries the result: the tensor cores'
 * accumulation error grows with the length of the sum (measured on the H200, bench/README.md),
 * so it is summed over k in chunks of kSplitChunk, each chunk's product added to c in fp32 by
 * cuBLAS's beta = 1. Measured against float64 (bench/split_tf32_probe.py on the H200), the
 * result's largest error is 0.44 to 0.98 times SGEMM's at the shapes that take this path, at
 * some 2x its speed; the judge's fp32 tolerances and its float64 check decide each task's
 * outputs as for any candidate.
 *
 * Small products (less than kSplitWork multiply-adds, or small sides) keep the SGEMM: the split
 * passes and the chunks' extra passes over c cost more than the tensor cores save there.
 * Nothing here is global in the generator; the generated library keeps one workspace (grown to
 * the largest call's operands, never freed) as the cuBLASLt variant keeps its own. */
#include "expert_ops.h"

#include "buf.h"

/* The split itself, shared with expert_conv_split.c: split_one, the split_tf32 kernel and the
 * split_space workspace. */
static const char SPLIT_KERNEL[] =
    "// x = h + t exactly, h rounded to TF32 (nearest, ties away); non-finite x: h = x, t = 0.\n"
    "__device__ __forceinline__ void split_one(float x, float &h, float &t) {\n"
    "    if (!isfinite(x)) {\n"
    "        h = x;\n"
    "        t = 0.0f;\n"
    "        return;\n"
    "    }\n"
    "    const unsigned u = __float_as_uint(x);\n"
    "    float r = __uint_as_float((u + 0x1000u) & 0xffffe000u);\n"
    "    if (!isfinite(r)) // rounding up overflowed: truncate instead\n"
    "        r = __uint_as_float(u & 0xffffe000u);\n"
    "    h = r;\n"
    "    t = x - r;\n"
    "}\n\n"
    "// count matrices of rows x cols at x (row-major, matrix stride sx) into y (matrix stride\n"
    "// 2 * rows * cols): each matrix's halves stacked (along_rows: [first ; second], 2 rows x\n"
    "// cols) or side by side ([first | second], rows x 2 cols); first is the head when\n"
    "// head_first, the tail otherwise. A block per row, float4 where the row allows.\n"
    "__global__ void split_tf32(const float *__restrict__ x, float *__restrict__ y, int64_t "
    "count,\n"
    "                           int64_t rows, int64_t cols, int64_t sx, bool along_rows,\n"
    "                           bool head_first) {\n"
    "    const int64_t per = rows * cols;\n"
    "    for (int64_t row = blockIdx.x; row < count * rows; row += gridDim.x) {\n"
    "        const int64_t q = row / rows, r = row % rows;\n"
    "        const float *src = x + q * sx + r * cols;\n"
    "        float *first = y + q * 2 * per + (along_rows ? r * cols : r * 2 * cols);\n"
    "        float *second = first + (along_rows ? per : cols);\n"
    "        float *hp = head_first ? first : second, *tp = head_first ? second : first;\n"
    "        const bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(src) |\n"
    "                                          reinterpret_cast<uintptr_t>(hp) |\n"
    "                                          reinterpret_cast<uintptr_t>(tp)) % 16 == 0;\n"
    "        if (vec) {\n"
    "            for (int64_t c = threadIdx.x; c < cols / 4; c += blockDim.x) {\n"
    "                const float4 v = reinterpret_cast<const float4 *>(src)[c];\n"
    "                float4 h, t;\n"
    "                split_one(v.x, h.x, t.x);\n"
    "                split_one(v.y, h.y, t.y);\n"
    "                split_one(v.z, h.z, t.z);\n"
    "                split_one(v.w, h.w, t.w);\n"
    "                reinterpret_cast<float4 *>(hp)[c] = h;\n"
    "                reinterpret_cast<float4 *>(tp)[c] = t;\n"
    "            }\n"
    "        } else {\n"
    "            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)\n"
    "                split_one(src[c], hp[c], tp[c]);\n"
    "        }\n"
    "    }\n"
    "}\n\n"
    "// The split operands' workspace: at least n floats, kept and grown; nullptr when out of\n"
    "// memory.\n"
    "float *split_space(size_t n) {\n"
    "    static float *buf = nullptr;\n"
    "    static size_t size = 0;\n"
    "    if (n > size) {\n"
    "        if (buf != nullptr)\n"
    "            cudaFree(buf);\n"
    "        buf = nullptr;\n"
    "        size = 0;\n"
    "        if (cudaMalloc(&buf, n * sizeof(float)) != cudaSuccess) {\n"
    "            buf = nullptr;\n"
    "            return nullptr;\n"
    "        }\n"
    "        size = n;\n"
    "    }\n"
    "    return buf;\n"
    "}\n\n";

static const char SPLIT_HEAD[] =
    "// ---- large products on TF32 tensor cores with split operands (expert_gemm_split.c) ----\n"
    "constexpr int64_t kSplitChunk = 512;         // the heads' product: k summed in these\n"
    "constexpr double kSplitWork = 17179869184.0; // 2^34 multiply-adds at least\n\n";

static const char SPLIT[] =
    "bool use_split(int64_t batch, int64_t m, int64_t k, int64_t n, int64_t sa, int64_t sb) {\n"
    "    return (double)batch * m * n * k >= kSplitWork && m >= 256 && n >= 256 &&\n"
    "           k >= kSplitChunk && batch * m * n >= (int64_t{1} << 22) &&\n"
    "           (sa == 0 || sa == m * k) && (sb == 0 || sb == k * n);\n"
    "}\n\n"
    "// One TF32 product (strided batched when batch > 1) in the column-major view of\n"
    "// CUBLAS_ENTRY: c^T (n x m) = beta c^T + op(B)^T (n x kk) A^T (kk x m).\n"
    "cublasStatus_t tf32_gemm(cublasHandle_t h, const float *a, int64_t lda, int64_t sa,\n"
    "                         const float *b, int64_t ldb, int64_t sb, float *c, int64_t batch,\n"
    "                         int64_t m, int64_t kk, int64_t n, float beta) {\n"
    "    const float one = 1.0f;\n"
    "    const cublasOperation_t opb = kTransB ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    const cublasOperation_t opa = kTransA ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    if (batch == 1)\n"
    "        return cublasGemmEx_64(h, opb, opa, n, m, kk, &one, b, CUDA_R_32F, ldb, a, "
    "CUDA_R_32F,\n"
    "                               lda, &beta, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32,\n"
    "                               CUBLAS_GEMM_DEFAULT);\n"
    "    return cublasGemmStridedBatchedEx_64(h, opb, opa, n, m, kk, &one, b, CUDA_R_32F, ldb, "
    "sb,\n"
    "                                         a, CUDA_R_32F, lda, sa, &beta, c, CUDA_R_32F, n,\n"
    "                                         m * n, batch, CUBLAS_COMPUTE_32F_FAST_TF32,\n"
    "                                         CUBLAS_GEMM_DEFAULT);\n"
    "}\n\n"
    "// c[i] = a[i] op(b[i]) as the top of this section says; a shared operand (stride 0) is\n"
    "// split once.\n"
    "int split_gemm(cublasHandle_t h, const float *a, const float *b, float *c, int64_t batch,\n"
    "               int64_t m, int64_t k, int64_t n, int64_t sa, int64_t sb) {\n"
    "    const int64_t na = sa != 0 ? batch : 1, nb = sb != 0 ? batch : 1;\n"
    "    float *a2 = split_space((size_t)(2 * (na * m * k + nb * k * n)));\n"
    "    if (a2 == nullptr)\n"
    "        return (int)cudaErrorMemoryAllocation;\n"
    "    float *b2 = a2 + 2 * na * m * k;\n"
    "    // a2 = [ah | at] along k, b2 = [bt ; bh] along k; k runs along a's rows when kTransA\n"
    "    // (a is k x m) and along b's rows unless kTransB (b is k x n)\n"
    "    const int64_t ra = kTransA ? k : m, rb = kTransB ? n : k;\n"
    "    split_tf32<<<(unsigned)std::min<int64_t>(na * ra, 65535), 256, 0, 0>>>(\n"
    "        a, a2, na, ra, kTransA ? m : k, sa, kTransA, true);\n"
    "    split_tf32<<<(unsigned)std::min<int64_t>(nb * rb, 65535), 256, 0, 0>>>(\n"
    "        b, b2, nb, rb, kTransB ? k : n, sb, !kTransB, false);\n"
    "    cudaError_t e = cudaGetLastError();\n"
    "    if (e != cudaSuccess)\n"
    "        return (int)e;\n"
    "    const int64_t lda = kTransA ? m : 2 * k, ldb = kTransB ? 2 * k : n;\n"
    "    const int64_t sa2 = na > 1 ? 2 * m * k : 0, sb2 = nb > 1 ? 2 * k * n : 0;\n"
    "    // the cross terms: ah op(bt) + at op(bh), one product over 2k\n"
    "    cublasStatus_t st = tf32_gemm(h, a2, lda, sa2, b2, ldb, sb2, c, batch, m, 2 * k, n, "
    "0.0f);\n"
    "    // the heads: a's at k offset 0, b's at k offset k\n"
    "    for (int64_t j = 0; j < k && st == CUBLAS_STATUS_SUCCESS; j += kSplitChunk) {\n"
    "        const int64_t len = std::min(kSplitChunk, k - j);\n"
    "        const float *ah = a2 + (kTransA ? j * m : j);\n"
    "        const float *bh = b2 + (kTransB ? k + j : (k + j) * n);\n"
    "        st = tf32_gemm(h, ah, lda, sa2, bh, ldb, sb2, c, batch, m, len, n, 1.0f);\n"
    "    }\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return kCublasError + (int)st;\n"
    "    return (int)cudaGetLastError();\n"
    "}\n\n";

void kfx_src_split_kernel(struct kf_buf *b) {
    kf_buf_printf(b, "%s", SPLIT_KERNEL);
}

void kfx_gemm_split_src(struct kf_buf *b) {
    kf_buf_printf(b, "%s%s%s", SPLIT_HEAD, SPLIT_KERNEL, SPLIT);
}
