/* expert_xent.c: F.cross_entropy and nn.CrossEntropyLoss over logits x [N, C] and int64 class
 * indices t [N] (KFX_XENT): loss_i = logsumexp(x_i) - x_i[t_i], 0 where t_i is ignore_index;
 * reduced to their mean over the rows not ignored, their sum, or left per row ('none').
 * One pass over x: on cuda a warp per row (max, then the sum of exponentials, each lane over
 * a stride of the row), the block's rows summed into one partial per block, and a second
 * kernel of one block summing the partials (a mean divides by the count of rows kept); on cpu
 * rows shared out to OpenMP threads, summed in double. t is read as int64, never converted.
 * A class index outside [0, C) that is not ignore_index gives NaN (PyTorch raises; a check
 * on the host would wait for the kernel at every call). Each source is built in a fresh buffer that
 * the caller owns and frees. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert.h"
#include "expert_plan.h"

static const char CUDA_XENT[] =
    "#include <cuda_runtime.h>\n#include <cstdint>\n#include <cmath>\n\n"
    "namespace {\n\n"
    "// rows: mode 0 per row into out[N]; 1 and 2 (sum, mean): partial sums and counts per block\n"
    "__global__ void __launch_bounds__(256) xent_rows(const float *__restrict__ x,\n"
    "        const int64_t *__restrict__ t, float *__restrict__ out, float *__restrict__ part,\n"
    "        int64_t n, int64_t c, int64_t ignore, int mode) {\n"
    "    __shared__ float ws[8], wc[8];\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    float acc = 0.0f, cnt = 0.0f;\n"
    "    for (int64_t r = (int64_t)blockIdx.x * 8 + warp; r < n; r += (int64_t)gridDim.x * 8) {\n"
    "        const float *row = x + r * c;\n"
    "        const int64_t cls = t[r];\n"
    "        float m = -INFINITY;\n"
    "        for (int64_t j = lane; j < c; j += 32)\n"
    "            m = fmaxf(m, row[j]);\n"
    "        for (int o = 16; o > 0; o >>= 1)\n"
    "            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));\n"
    "        float s = 0.0f;\n"
    "        for (int64_t j = lane; j < c; j += 32)\n"
    "            s += expf(row[j] - m);\n"
    "        for (int o = 16; o > 0; o >>= 1)\n"
    "            s += __shfl_xor_sync(0xffffffffu, s, o);\n"
    "        float loss = 0.0f;\n"
    "        if (cls != ignore) {\n"
    "            loss = cls < 0 || cls >= c ? NAN : logf(s) + m - row[cls];\n"
    "            cnt += 1.0f;\n"
    "        }\n"
    "        if (mode == 0) {\n"
    "            if (lane == 0)\n"
    "                out[r] = loss;\n"
    "        } else {\n"
    "            acc += loss;\n"
    "        }\n"
    "    }\n"
    "    if (mode == 0)\n"
    "        return;\n"
    "    if (lane == 0) {\n"
    "        ws[warp] = acc;\n"
    "        wc[warp] = cnt;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) {\n"
    "        float a = 0.0f, k = 0.0f;\n"
    "        for (int w = 0; w < 8; ++w) {\n"
    "            a += ws[w];\n"
    "            k += wc[w];\n"
    "        }\n"
    "        part[2 * blockIdx.x] = a;\n"
    "        part[2 * blockIdx.x + 1] = k;\n"
    "    }\n"
    "}\n\n"
    "// one block: the partials of nb blocks into out[0]\n"
    "__global__ void xent_total(const float *__restrict__ part, float *__restrict__ out, int nb,\n"
    "                           int mode) {\n"
    "    __shared__ double ss[256], sc[256];\n"
    "    double a = 0.0, k = 0.0;\n"
    "    for (int b = threadIdx.x; b < nb; b += blockDim.x) {\n"
    "        a += part[2 * b];\n"
    "        k += part[2 * b + 1];\n"
    "    }\n"
    "    ss[threadIdx.x] = a;\n"
    "    sc[threadIdx.x] = k;\n"
    "    __syncthreads();\n"
    "    for (int h = blockDim.x / 2; h > 0; h >>= 1) {\n"
    "        if ((int)threadIdx.x < h) {\n"
    "            ss[threadIdx.x] += ss[threadIdx.x + h];\n"
    "            sc[threadIdx.x] += sc[threadIdx.x + h];\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0)\n"
    "        out[0] = (float)(mode == 2 ? ss[0] / sc[0] : ss[0]);\n"
    "}\n\n"
    "} // namespace\n\n"
    "// part: 2 * 1024 floats, kept between calls\n"
    "extern \"C\" int @FN@(const float *x, const int64_t *t, float *out, float *part, int64_t n,\n"
    "                      int64_t c, int64_t ignore, int64_t mode) {\n"
    "    if (n < 0 || c <= 0)\n"
    "        return 1;\n"

    "    const int64_t want = (n + 7) / 8;\n"
    "    const int nb = (int)(want < 1 ? 1 : want < @B@ ? want : @B@);\n"
    "    xent_rows<<<nb, 256, 0, 0>>>(x, t, out, part, n, c, ignore, (int)mode);\n"
    "    if (mode != 0)\n"
    "        xent_total<<<1, 256, 0, 0>>>(part, out, nb, (int)mode);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n";

static const char CPU_XENT[] =
    "#include <cstdint>\n#include <cmath>\n\n"
    "extern \"C\" int @FN@(const float *x, const int64_t *t, float *out, float *part, int64_t n,\n"
    "                      int64_t c, int64_t ignore, int64_t mode) {\n"
    "    (void)part;\n"
    "    if (n < 0 || c <= 0)\n"
    "        return 1;\n"
    "    double acc = 0.0, cnt = 0.0;\n"
    "#pragma omp parallel for schedule(static) reduction(+ : acc, cnt)\n"
    "    for (int64_t r = 0; r < n; ++r) {\n"
    "        const float *row = x + r * c;\n"
    "        const int64_t cls = t[r];\n"
    "        double loss = 0.0;\n"
    "        if (cls != ignore) {\n"
    "            if (cls < 0 || cls >= c) {\n"
    "                loss = NAN;\n"
    "            } else {\n"
    "                float m = -INFINITY;\n"
    "                for (int64_t j = 0; j < c; ++j)\n"
    "                    m = row[j] > m ? row[j] : m;\n"
    "                double s = 0.0;\n"
    "                for (int64_t j = 0; j < c; ++j)\n"
    "                    s += std::exp((double)row[j] - m);\n"
    "                loss = std::log(s) + m - row[cls];\n"
    "            }\n"
    "            cnt += 1.0;\n"
    "        }\n"
    "        if (mode == 0)\n"
    "            out[r] = (float)loss;\n"
    "        acc += loss;\n"
    "    }\n"
    "    if (mode != 0)\n"
    "        out[0] = (float)(mode == 2 ? acc / cnt : acc);\n"
    "    return 0;\n"
    "}\n";

char *kfx_xent_src(const struct kfx_step *st, const char *backend, int v) {
    const bool cuda = strcmp(backend, "cuda") == 0;
    if (v < 0 || v >= (cuda ? 2 : 1))
        return NULL;
    const char *tmpl = cuda ? CUDA_XENT : CPU_XENT;
    struct kf_buf b = {0};
    kf_buf_printf(&b, "// kforge expert: %s, cross entropy, variant %d: %s.\n", st->fn, v,
                  !cuda    ? "rows shared out to OpenMP threads, in double"
                  : v == 0 ? "a warp per row, at most 1024 blocks of 8 rows at a time"
                           : "a warp per row, at most 256 blocks of 8 rows at a time");
    for (const char *q = tmpl; *q;) {
        if (!strncmp(q, "@FN@", 4)) {
            kf_buf_printf(&b, "%s", st->fn);
            q += 4;
        } else if (!strncmp(q, "@B@", 3)) {
            kf_buf_printf(&b, "%d", v == 0 ? 1024 : 256);
            q += 3;
        } else {
            kf_buf_printf(&b, "%c", *q++);
        }
    }
    return b.data;
}
