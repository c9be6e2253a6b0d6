/* expert_conv_epi.c: the CUDA text of a convolution's epilogue, for expert_conv.c (2-D) and
 * expert_convnd.c (the others): the elementwise pass the planner fused into the convolution's
 * step (expert_plan_fuse.c: its bias, an activation, a scale, a residual) as a functor, KfEpi,
 * that maps the convolution's value at output index j to the pass's value there.
 *
 * Our implicit GEMM (expert_conv_igemm.c) applies it as it stores, so the output is written once
 * and never read back. Every other path (cuDNN's, the split one, the direct and depthwise
 * kernels) writes the plain output into its own buffer y as before, and KfEpi::apply then runs
 * the pass from y into the output, as the separate step did. On a shape's first call variant 0
 * times our path with its epilogue against cuDNN's with that pass (ig_or), so the faster of the
 * two whole computations is kept.
 *
 * With an epilogue, the generator's entry becomes kf_core (internal, with the epilogue, out and
 * done after its own parameters) and the exported function is kfx_conv_epi_close's wrapper,
 * which takes the extra operands and the output after the convolution's arguments. Without
 * one, nothing changes but KF_EPI (ig_or's last arguments: no pass, y the output). */
#include <stdio.h>

#include "buf.h"
#include "expert.h"
#include "expert_ops.h"
#include "expert_plan.h"

/* Leaf k's members (decl) or its aggregate initialisers. */
static void leaf_fields(struct kf_buf *b, const struct kfx_call *c, bool decl) {
    for (int k = 1; k < c->epi_leaves; k++) {
        kf_buf_printf(b, decl ? "    const float *in%d;\n" : "in%d, ", k);
        if (c->epi_bcast[k])
            kf_buf_printf(b, decl ? "    int64_t q%d, m%d;\n" : "q%d, m%d, ", k, k);
    }
}

static const char EPI_PASS[] =
    "// out = the pass over y (the plain convolution), four elements at a time where they fit\n"
    "__global__ void kf_epi_pass(const float *__restrict__ y, float *__restrict__ out, const "
    "KfEpi e) {\n"
    "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;\n"
    "    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (e.total % 4 == 0) {\n"
    "        for (int64_t i = i0; i < e.total / 4; i += stride) {\n"
    "            const float4 v = reinterpret_cast<const float4 *>(y)[i];\n"
    "            reinterpret_cast<float4 *>(out)[i] =\n"
    "                make_float4(e(v.x, 4 * i), e(v.y, 4 * i + 1), e(v.z, 4 * i + 2), e(v.w, 4 * i "
    "+ 3));\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    for (int64_t i = i0; i < e.total; i += stride)\n"
    "        out[i] = e(y[i], i);\n"
    "}\n\n"
    "int KfEpi::apply(const float *y, float *out) const {\n"
    "    if (total <= 0)\n"
    "        return 0;\n"
    "    const int64_t work = total % 4 == 0 ? total / 4 : total;\n"
    "    const int64_t blocks = std::min<int64_t>((work + 255) / 256, 8192);\n"
    "    kf_epi_pass<<<(unsigned)blocks, 256, 0, 0>>>(y, out, *this);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n\n";

/* The section: kf_elem, KfEpi and its pass, in a namespace of their own. */
static void epi_src(struct kf_buf *b, const struct kfx_call *c) {
    bool bcast = false;
    for (int k = 1; k < c->epi_leaves; k++)
        bcast = bcast || c->epi_bcast[k];
    kf_buf_printf(b,
                  "namespace {\n\n// ---- the pass fused into the convolution (expert_conv_epi.c) "
                  "----\n");
    kfw_ew_elem(b, c->epi_body, c->epi_leaves, "__device__ __forceinline__");
    kf_buf_printf(b, "\n");
    if (bcast)
        kfx_src_bix(b);
    kf_buf_printf(b, "// The pass's value at output index j, the convolution's value there a.\n"
                     "struct KfEpi {\n");
    leaf_fields(b, c, true);
    kf_buf_printf(b, "    int64_t total; // the output's elements\n"
                     "    __device__ __forceinline__ float operator()(float a, int64_t j) const "
                     "{\n"
                     "        return kf_elem(a");
    for (int k = 1; k < c->epi_leaves; k++)
        kf_buf_printf(b,
                      c->epi_scalar[k]  ? ", in%d[0]"
                      : c->epi_bcast[k] ? ", in%d[kf_bix(j, q%d, m%d)]"
                                        : ", in%d[j]",
                      k, k, k);
    kf_buf_printf(b,
                  ");\n    }\n    int apply(const float *y, float *out) const;\n};\n\n%s"
                  "} // namespace\n\n",
                  EPI_PASS);
}

void kfx_conv_epi_open(struct kf_buf *b, const struct kfx_call *c, const char *params) {
    if (c->epi_body == NULL) {
        kf_buf_printf(b,
                      "#define KF_EPI IgPlain<>{}, y, nullptr // no pass: y is the output\n\n"
                      "extern \"C\" int %s(%s) {\n",
                      c->fn, params);
        return;
    }
    epi_src(b, c);
    kf_buf_printf(b,
                  "#define KF_EPI e, out, done\n\n"
                  "// The convolution into y, or (our implicit GEMM) through e into out, done "
                  "then set.\n"
                  "static int kf_core(%s, const KfEpi &e, float *out, bool *done) {\n"
                  "    (void)e;\n    (void)out;\n    (void)done;\n",
                  params);
}

void kfx_conv_epi_close(struct kf_buf *b, const struct kfx_call *c, const char *params,
                        const char *names, const char *total) {
    if (c->epi_body == NULL)
        return;
    kf_buf_printf(b, "\nextern \"C\" int %s(%s", c->fn, params);
    for (int k = 1; k < c->epi_leaves; k++) {
        kf_buf_printf(b, ", const float *in%d", k);
        if (c->epi_bcast[k])
            kf_buf_printf(b, ", int64_t q%d, int64_t m%d", k, k);
    }
    kf_buf_printf(b, ", float *out) {\n    const KfEpi e{");
    leaf_fields(b, c, false);
    kf_buf_printf(b,
                  "%s};\n"
                  "    bool done = false;\n"
                  "    const int rc = kf_core(%s, e, out, &done);\n"
                  "    return rc != 0 || done ? rc : e.apply(y, out);\n"
                  "}\n",
                  total, names);
}
