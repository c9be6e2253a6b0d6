/* expert_rnn.c: the kernel file of a KFX_RNN step (nn.LSTM, GRU, RNN; planned by
 * expert_plan_rnn.c). One entry point runs every layer and direction: the input projections of
 * all steps as one product (rows in the input's memory order), then the steps in order (reversed
 * for the second direction), each the recurrent product of the previous hidden state and the
 * cell, which writes the step's hidden state into the layer's output (the next layer's input;
 * two scratch layers alternate) and, at the last step, into h_n. An LSTM's cell state is kept in
 * c_n's slice of its layer and direction. cuda: cuBLAS SGEMMs (full fp32) and a cell kernel per
 * step; cpu: OpenMP loops, the recurrent product inside the cell. The gate order is PyTorch's
 * (LSTM i, f, g, o; GRU r, z, n, with b_hn inside r * (..)). Each source is built in a fresh
 * buffer that the caller owns and frees. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "expert_args.h"
#include "expert_plan.h"
#include "expert_rnn.h"

int kfx_rnn_spec_of(const json_t *node, struct kfx_rnn_spec *r) {
    const json_t *at = json_object_get(node, "attrs");
    const char *mode = json_string_value(json_object_get(at, "mode"));
    const char *type = json_string_value(json_object_get(node, "module_type"));
    static const char *const cells[] = {"LSTMCell", "GRUCell", "RNNCell"};
    for (int m = 0; type && m < 3; m++)
        if (!strcmp(type, cells[m])) { /* one step of one layer, its options as attributes */
            const char *nl = json_string_value(json_object_get(at, "nonlinearity"));
            r->cell = true;
            r->L = r->D = 1;
            r->bf = false;
            r->H = json_integer_value(json_object_get(at, "hidden_size"));
            r->I = json_integer_value(json_object_get(at, "input_size"));
            r->bias = json_is_true(json_object_get(at, "bias"));
            r->mode = m < 2 ? m : nl && !strcmp(nl, "relu") ? 3 : 2;
            r->G = m == 0 ? 4 : m == 1 ? 3 : 1;
            return r->H > 0 && r->I > 0 && (m < 2 || nl) ? 0 : -1;
        }
    r->cell = false;
    r->L = json_integer_value(json_object_get(at, "num_layers"));
    r->H = json_integer_value(json_object_get(at, "hidden_size"));
    r->I = json_integer_value(json_object_get(at, "input_size"));
    r->D = json_is_true(json_object_get(at, "bidirectional")) ? 2 : 1;
    r->bf = json_is_true(json_object_get(at, "batch_first"));
    r->bias = json_is_true(json_object_get(at, "bias"));
    static const char *const modes[] = {"LSTM", "GRU", "RNN_TANH", "RNN_RELU"};
    static const int gates[] = {4, 3, 1, 1};
    for (int m = 0; mode && m < 4; m++)
        if (!strcmp(mode, modes[m])) {
            r->mode = m;
            r->G = gates[m];
            return r->L > 0 && r->H > 0 && r->I > 0 ? 0 : -1;
        }
    return -1;
}

/* The combination of a step's gates xa[q] (input part, b_ih included) and ra[q] (recurrent part,
 * b_hh included) into h, per mode; an LSTM also updates its cell state. */
static const char *const CELL[] = {
    "    const float ig = sig(xa[0] + ra[0]), fg = sig(xa[1] + ra[1]);\n"
    "    const float gg = tanhf(xa[2] + ra[2]), og = sig(xa[3] + ra[3]);\n"
    "    const float cv = fg * (cp ? cp[n * kH + j] : 0.0f) + ig * gg;\n"
    "    c[n * kH + j] = cv;\n"
    "    const float h = og * tanhf(cv);\n",
    "    const float rg = sig(xa[0] + ra[0]), zg = sig(xa[1] + ra[1]);\n"
    "    const float ng = tanhf(xa[2] + rg * ra[2]);\n"
    "    const float h = (1.0f - zg) * ng + zg * (hp ? hp[n * hs + j] : 0.0f);\n",
    "    const float h = tanhf(xa[0] + ra[0]);\n",
    "    const float h = fmaxf(xa[0] + ra[0], 0.0f);\n"};

/* The head: what the step is, the includes, the sizes as constants, sig. */
static void head(struct kf_buf *b, const char *fn, const json_t *node, const struct kfx_rnn_spec *r,
                 bool cuda) {
    static const char *const what[] = {"LSTM", "GRU", "RNN (tanh)", "RNN (relu)"};
    kf_buf_printf(b,
                  "// kforge expert: %s, %s %s: %lld layer%s, %lld direction%s, hidden %lld, "
                  "input %lld%s%s.\n"
                  "// Per layer and direction: the input projections of every step in one "
                  "product, then the\n// steps in order, each the recurrent product and the "
                  "cell (%s).\n",
                  fn, what[r->mode], json_string_value(json_object_get(node, "target")), r->L,
                  r->L == 1 ? "" : "s", r->D, r->D == 1 ? "" : "s", r->H, r->I,
                  r->bf ? ", batch first" : "", r->bias ? "" : ", no bias",
                  cuda ? "cuBLAS SGEMMs in full fp32 and a cell kernel"
                       : "OpenMP; the recurrent product inside the cell");
    kf_buf_printf(b, "%s#include <cstdint>\n#include <math.h>\n\nnamespace {\n\n",
                  cuda ? "#include <cublas_v2.h>\n#include <cuda_runtime.h>\n"
                       : "#include <cmath>\n");
    kf_buf_printf(b,
                  "constexpr int64_t kL = %lld, kD = %lld, kH = %lld, kI = %lld, kG = %lld, "
                  "kNW = %d;\n"
                  "constexpr bool kBatchFirst = %s, kBias = %s;\n\n",
                  r->L, r->D, r->H, r->I, r->G, r->bias ? 4 : 2, r->bf ? "true" : "false",
                  r->bias ? "true" : "false");
    if (cuda)
        kfx_src_cublas_handle(b);
    if (r->mode < 2) /* an RNN's cell has no gate */
        kf_buf_printf(b, "%s float sig(float a) {\n    return 1.0f / (1.0f + expf(-a));\n}\n\n",
                      cuda ? "__device__ __forceinline__" : "inline");
}

/* The cell's parameters, shared by the cuda kernel and the cpu step: g the step's input
 * projections (batch entry n at g + n * gs), bi and bh the biases, hp the previous hidden state
 * (entry n at hp + n * hs; null at a first step without a state), cp the previous cell state and c
 * the new one (LSTM), y the step's output (entry n at y + n * ys), hn h_n's slice at the last
 * step (else null). */
static const char CELL_PARAMS[] =
    "const float *__restrict__ g, int64_t gs, const float *__restrict__ bi,\n"
    "        const float *__restrict__ bh, const float *hp, int64_t hs, const float *cp, float "
    "*c,\n"
    "        float *y, int64_t ys, float *hn, int64_t N";

/* The cell's end: the hidden state stored. */
static const char CELL_STORE[] = "    y[n * ys + j] = h;\n"
                                 "    if (hn != nullptr)\n"
                                 "        hn[n * kH + j] = h;\n";

static void cuda_cell(struct kf_buf *b, int mode) {
    kf_buf_printf(b,
                  "// One step of one layer and direction, a thread per (batch entry n, hidden "
                  "unit j); rh the\n// recurrent product hp W_hh^T (N x kG * kH; unread when hp "
                  "is null).\n"
                  "__global__ void __launch_bounds__(256) cell(%s,\n        const float "
                  "*__restrict__ rh) {\n"
                  "    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (e >= N * kH)\n        return;\n"
                  "    const int64_t n = e / kH, j = e %% kH;\n"
                  "    (void)cp; // an LSTM's\n    (void)c;\n"
                  "    float xa[kG], ra[kG];\n#pragma unroll\n"
                  "    for (int q = 0; q < kG; ++q) {\n"
                  "        xa[q] = g[n * gs + q * kH + j] + (kBias ? bi[q * kH + j] : 0.0f);\n"
                  "        ra[q] = (hp ? rh[n * kG * kH + q * kH + j] : 0.0f) + (kBias ? bh[q * "
                  "kH + j] : 0.0f);\n    }\n%s%s}\n\n",
                  CELL_PARAMS, CELL[mode], CELL_STORE);
}

/* Variant 1's step kernel: the recurrent product inside the cell, one launch per step. A block
 * takes kJB hidden units (kG * kJB rows of W_hh), a warp a row at a time: its lanes split the
 * row, four batch entries at a time, into the block's shared dots (N x kRows); then a thread per
 * (batch entry, unit) runs the cell. Used while the dots fit in 48 KB. */
static void cuda_fused(struct kf_buf *b, int mode, long long H) {
    const int jb = H >= 1024 ? 8 : H >= 512 ? 4 : H >= 256 ? 2 : 1;
    kf_buf_printf(
        b,
        "constexpr int kJB = %d, kRows = kG * kJB; // hidden units and W_hh rows per block\n\n"
        "// The dots of W_hh row wr with the N hidden states h (entry n at h + n * hs), a warp's "
        "lanes\n// splitting the row, four entries at a time: lane 0 stores entry n's at "
        "out[n * os].\n"
        "__device__ __forceinline__ void row_dots(const float *wr, const float *h, int64_t hs, "
        "int64_t N,\n                                         float *out, int64_t os, int lane) "
        "{\n"
        "    for (int64_t n0 = 0; n0 < N; n0 += 4) {\n"
        "        float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
        "        for (int64_t k = lane; k < kH; k += 32) {\n"
        "            const float wv = wr[k];\n#pragma unroll\n"
        "            for (int i = 0; i < 4; ++i)\n"
        "                if (n0 + i < N)\n"
        "                    a[i] += wv * h[(n0 + i) * hs + k];\n        }\n"
        "#pragma unroll\n        for (int i = 0; i < 4; ++i) {\n"
        "            for (int o = 16; o > 0; o >>= 1)\n"
        "                a[i] += __shfl_xor_sync(0xffffffffu, a[i], o);\n"
        "            if (lane == 0 && n0 + i < N)\n"
        "                out[(n0 + i) * os] = a[i];\n        }\n    }\n}\n\n"
        "__global__ void __launch_bounds__(256) fused(%s,\n        const float *__restrict__ "
        "whh) {\n"
        "    extern __shared__ float dots[]; // N x kRows: hp W_hh^T at this block's rows\n"
        "    const int warp = threadIdx.x / 32, lane = threadIdx.x %% 32;\n"
        "    const int64_t j0 = (int64_t)blockIdx.x * kJB;\n"
        "    (void)cp; // an LSTM's\n    (void)c;\n"
        "    for (int r = warp; hp != nullptr && r < kRows; r += 8)\n"
        "        if (j0 + r %% kJB < kH)\n"
        "            row_dots(whh + ((r / kJB) * kH + j0 + r %% kJB) * kH, hp, hs, N, dots + r, "
        "kRows, lane);\n"
        "    __syncthreads();\n"
        "    for (int64_t e = threadIdx.x; e < N * kJB; e += blockDim.x) {\n"
        "        const int64_t n = e / kJB, j = j0 + e %% kJB;\n"
        "        if (j >= kH)\n            continue;\n"
        "        float xa[kG], ra[kG];\n#pragma unroll\n"
        "        for (int q = 0; q < kG; ++q) {\n"
        "            xa[q] = g[n * gs + q * kH + j] + (kBias ? bi[q * kH + j] : 0.0f);\n"
        "            ra[q] = (hp ? dots[n * kRows + q * kJB + (j - j0)] : 0.0f) + (kBias ? bh[q * "
        "kH + j] : 0.0f);\n        }\n"
        "    %s    %s    }\n}\n\n",
        jb, CELL_PARAMS, CELL[mode], CELL_STORE);
}

static void cpu_cell(struct kf_buf *b, int mode) {
    kf_buf_printf(
        b,
        "// The input projections of rows rows of in (iw wide): g = in W_ih^T.\n"
        "void project(const float *__restrict__ in, const float *__restrict__ w, float "
        "*__restrict__ g,\n             int64_t rows, int64_t iw) {\n"
        "#pragma omp parallel for schedule(static)\n"
        "    for (int64_t r = 0; r < rows; ++r)\n"
        "        for (int64_t q = 0; q < kG * kH; ++q) {\n"
        "            const float *a = in + r * iw, *v = w + q * iw;\n"
        "            float s = 0.0f;\n#pragma omp simd reduction(+ : s)\n"
        "            for (int64_t k = 0; k < iw; ++k)\n                s += a[k] * v[k];\n"
        "            g[r * kG * kH + q] = s;\n        }\n}\n\n"
        "// One step of one layer and direction, (batch entry n, hidden unit j) shared "
        "out; the\n// recurrent product with W_hh (whh) computed here.\n"
        "void step(%s,\n          const float *__restrict__ whh) {\n"
        "    (void)cp; // an LSTM's\n    (void)c;\n"
        "#pragma omp parallel for schedule(static)\n"
        "    for (int64_t e = 0; e < N * kH; ++e) {\n"
        "        const int64_t n = e / kH, j = e %% kH;\n"
        "        float xa[kG], ra[kG];\n"
        "        for (int q = 0; q < kG; ++q) {\n"
        "            float s = 0.0f;\n"
        "            if (hp != nullptr) {\n"
        "                const float *a = hp + n * hs, *v = whh + (q * kH + j) * kH;\n"
        "#pragma omp simd reduction(+ : s)\n"
        "                for (int64_t k = 0; k < kH; ++k)\n"
        "                    s += a[k] * v[k];\n            }\n"
        "            xa[q] = g[n * gs + q * kH + j] + (kBias ? bi[q * kH + j] : 0.0f);\n"
        "            ra[q] = s + (kBias ? bh[q * kH + j] : 0.0f);\n        }\n"
        "    %s    %s    }\n}\n\n",
        CELL_PARAMS, CELL[mode], CELL_STORE);
}

/* The entry point's signature: the input, the initial states, the weights (kNW per layer and
 * direction), the outputs, the scratch, the sizes. */
static void signature(struct kf_buf *b, const char *fn, const struct kfx_rnn_spec *r) {
    long long nw = r->L * r->D * (r->bias ? 4 : 2);
    kf_buf_printf(b,
                  "} // namespace\n\nextern \"C\" int %s(const float *x, const float *h0, "
                  "const float *c0,\n",
                  fn);
    for (long long i = 0; i < nw; i++)
        kf_buf_printf(b, "%sconst float *w%lld,%s", i % 4 == 0 ? "        " : " ", i,
                      i % 4 == 3 || i == nw - 1 ? "\n" : "");
    kf_buf_printf(b, "        float *out, float *hn, float *cn, float *g, float *hg, float *y, "
                     "int64_t T, int64_t N,\n        int64_t has_state) {\n"
                     "    const float *const w[] = {");
    for (long long i = 0; i < nw; i++)
        kf_buf_printf(b, "%sw%lld", i ? ", " : "", i);
    kf_buf_printf(b, "};\n");
}

/* The loops over layers, directions and steps; @CHECK@-free text with the backend's calls. */
static const char LOOP_HEAD[] =
    "    const int64_t DH = kD * kH, rows = T * N, GH = kG * kH;\n"
    "    // rows (of the input, the outputs, g) between batch entries and between steps\n"
    "    const int64_t rn = kBatchFirst ? T : 1, rt = kBatchFirst ? 1 : N;\n"
    "    for (int64_t l = 0; l < kL; ++l) {\n"
    "        const float *in = l == 0 ? x : y + ((l - 1) % 2) * rows * DH;\n"
    "        const int64_t iw = l == 0 ? kI : DH;\n"
    "        float *dst = l == kL - 1 ? out : y + (l % 2) * rows * DH;\n"
    "        for (int64_t d = 0; d < kD; ++d) {\n"
    "            const int64_t ld = l * kD + d;\n"
    "            const float *const *p = w + ld * kNW;\n"
    "            const float *bi = kBias ? p[2] : nullptr, *bh = kBias ? p[3] : nullptr;\n";

static const char LOOP_STEPS[] =
    "            const float *hp = has_state ? h0 + ld * N * kH : nullptr;\n"
    "            int64_t hs = kH;\n"
    "            const float *cp = has_state ? c0 + ld * N * kH : nullptr;\n"
    "            float *c = cn + ld * N * kH;\n"
    "            for (int64_t s = 0; s < T; ++s) {\n"
    "                const int64_t t = d == 0 ? s : T - 1 - s;\n"
    "                float *yt = dst + t * rt * DH + d * kH;\n"
    "                float *last = s == T - 1 ? hn + ld * N * kH : nullptr;\n";

static const char LOOP_TAIL[] = "                hp = yt;\n"
                                "                hs = rn * DH;\n"
                                "                cp = c;\n"
                                "            }\n"
                                "        }\n"
                                "    }\n";

/* fused: variant 1, the step kernel with the recurrent product inside while its dots fit;
 * persist: variant 2, the persistent kernel where it fits, else variant 1. */
static void cuda_entry(struct kf_buf *b, bool fused, bool persist) {
    kf_buf_printf(
        b,
        "    if (T <= 0 || N <= 0)\n        return (int)cudaErrorInvalidValue;\n"
        "    cublasHandle_t hd = handle();\n"
        "    if (hd == nullptr)\n        return kCublasError + "
        "(int)CUBLAS_STATUS_NOT_INITIALIZED;\n"
        "    cublasStatus_t st = cublasSetStream(hd, 0);\n"
        "    if (st != CUBLAS_STATUS_SUCCESS)\n        return kCublasError + (int)st;\n"
        "    const float one = 1.0f, zero = 0.0f;\n"
        "    const unsigned blocks = (unsigned)((N * kH + 255) / 256);\n%s%s%s"
        "            // row-major g = in W_ih^T is column-major g^T = W_ih^T^T in^T; each "
        "direction's own\n"
        "            float *const gl = g + d * rows * GH;\n"
        "            st = cublasSgemm_64(hd, CUBLAS_OP_T, CUBLAS_OP_N, GH, rows, iw, &one, p[0], "
        "iw, in, iw,\n                                &zero, gl, GH);\n"
        "            if (st != CUBLAS_STATUS_SUCCESS)\n                return kCublasError + "
        "(int)st;\n%s%s"
        "%s"
        "                if (hp != nullptr) {\n"
        "                    st = cublasSgemm_64(hd, CUBLAS_OP_T, CUBLAS_OP_N, GH, N, kH, &one, "
        "p[1], kH, hp,\n                                        hs, &zero, hg, GH);\n"
        "                    if (st != CUBLAS_STATUS_SUCCESS)\n"
        "                        return kCublasError + (int)st;\n                }\n"
        "                cell<<<blocks, 256, 0, 0>>>(gl + t * rt * GH, rn * GH, bi, bh, hp, hs, "
        "cp, c, yt,\n                                            rn * DH, last, N, hg);\n"
        "                const cudaError_t e = cudaGetLastError();\n"
        "                if (e != cudaSuccess)\n                    return (int)e;\n%s"
        "    return (int)cudaGetLastError();\n}\n",
        fused ? "    const size_t smem = sizeof(float) * N * kRows;\n"
                "    const bool fits = smem <= 48 * 1024; // the step kernel's dots fit\n"
              : "",
        persist ? "    unsigned pblocks = 0;\n    size_t psmem = 0;\n"
                  "    const bool pok = persist_fits(N, &pblocks, &psmem);\n"
                : "",
        LOOP_HEAD, persist ? kfx_rnn_persist_launch() : "", LOOP_STEPS,
        fused
            ? "                if (fits) {\n"
              "                    fused<<<(unsigned)((kH + kJB - 1) / kJB), 256, smem, 0>>>(\n"
              "                        gl + t * rt * GH, rn * GH, bi, bh, hp, hs, cp, c, yt, rn * "
              "DH, last, N, p[1]);\n"
              "                    const cudaError_t fe = cudaGetLastError();\n"
              "                    if (fe != cudaSuccess)\n                        return "
              "(int)fe;\n"
              "                    hp = yt;\n                    hs = rn * DH;\n"
              "                    cp = c;\n                    continue;\n                }\n"
            : "",
        LOOP_TAIL);
}

static void cpu_entry(struct kf_buf *b) {
    kf_buf_printf(b,
                  "    (void)hg;\n"
                  "    if (T <= 0 || N <= 0)\n        return 1;\n%s"
                  "            project(in, p[0], g, rows, iw);\n%s"
                  "                step(g + t * rt * GH, rn * GH, bi, bh, hp, hs, cp, c, yt, rn "
                  "* DH, last, N, p[1]);\n%s"
                  "    return 0;\n}\n",
                  LOOP_HEAD, LOOP_STEPS, LOOP_TAIL);
}

char *kfx_rnn_src(const struct kfx_step *st, const char *backend, int v) {
    struct kfx_rnn_spec r;
    const bool cuda = strcmp(backend, "cuda") == 0;
    if (v < 0 || v > (cuda ? 2 : 0) || kfx_rnn_spec_of(st->node, &r) != 0)
        return NULL;
    struct kf_buf b = {0};
    head(&b, st->fn, st->node, &r, cuda);
    if (cuda)
        cuda_cell(&b, r.mode);
    if (cuda && v >= 1)
        cuda_fused(&b, r.mode, r.H);
    if (cuda && v == 2)
        kfx_rnn_persist_kernel(&b, r.H, r.mode == 0, CELL[r.mode], CELL_STORE);
    if (!cuda)
        cpu_cell(&b, r.mode);
    signature(&b, st->fn, &r);
    if (cuda)
        cuda_entry(&b, v >= 1, v == 2);
    else
        cpu_entry(&b);
    return b.data;
}
