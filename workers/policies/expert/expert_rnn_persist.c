/* expert_rnn_persist.c: cuda variant 2 of a KFX_RNN step (expert_rnn.c), a persistent kernel.
 * One cooperative launch runs every time step of one layer, both directions at once (their
 * blocks side by side), where variants 0 and 1 launch once or twice per step (3072 steps for
 * KernelBench's LSTM: the launches, not the arithmetic, set their time). A block owns kPJB
 * hidden units and keeps their kG * kPJB rows of W_hh in shared memory for all steps. A step
 * stages the previous hidden state in shared memory (read through L2: other blocks wrote it),
 * forms the block's dots, runs the cell for its units, then waits at a barrier of the whole
 * grid (a counter in the step's scratch, reset before each launch). The launch is cooperative,
 * so every block is resident at once or the launch fails; where the shared memory or the
 * residency does not fit, the entry runs variant 1's step kernel instead (persist_fits). The
 * text is built into the caller's buffer. */
#include "expert_rnn.h"

void kfx_rnn_persist_kernel(struct kf_buf *b, long long H, bool lstm, const char *cell,
                            const char *store) {
    /* hidden units per block: at most 128 blocks, below one per SM of an H100 or H200 */
    const int jb = H <= 128 ? 1 : H <= 256 ? 2 : H <= 512 ? 4 : H <= 1024 ? 8 : 16;
    kf_buf_printf(
        b,
        "constexpr int kPJB = %d, kPRows = kG * kPJB; // the persistent kernel's units and rows "
        "per block\n\n"
        "// Every block arrives, then waits until all have: target is (step + 1) * blocks.\n"
        "__device__ __forceinline__ void grid_barrier(unsigned *bar, unsigned target) {\n"
        "    __syncthreads();\n"
        "    if (threadIdx.x == 0) {\n"
        "        __threadfence();\n"
        "        atomicAdd(bar, 1u);\n"
        "        while (*(volatile unsigned *)bar < target) {\n        }\n"
        "        __threadfence();\n    }\n"
        "    __syncthreads();\n}\n\n"
        "// Every step of one layer, direction d = blockIdx.y (its weights in wd[d * 3..]: "
        "W_hh, b_ih,\n// b_hh): g the layer's input projections (direction d's at g + d * T * N "
        "* kG * kH), dst its\n// output, h0 and c0 the initial states (or null), c the cell "
        "states and hN h_n's slice\n// (direction d's at + d * N * kH).\n"
        "struct DirWeights {\n    const float *w[6];\n};\n\n"
        "__global__ void __launch_bounds__(256)\n"
        "    persist(const float *__restrict__ g, DirWeights wd, const float *h0, const float "
        "*c0, float *c,\n"
        "            float *dst, float *hN, unsigned *bar, int64_t T, int64_t N, int64_t rt, "
        "int64_t rn) {\n"
        "    const int64_t d = blockIdx.y, off = d * N * kH;\n"
        "    const float *__restrict__ whh = wd.w[d * 3];\n"
        "    const float *__restrict__ bi = wd.w[d * 3 + 1], *__restrict__ bh = wd.w[d * 3 + 2];\n"
        "    g += d * T * N * kG * kH;\n"
        "    h0 = h0 != nullptr ? h0 + off : nullptr;\n"
        "    c0 = c0 != nullptr ? c0 + off : nullptr;\n"
        "    c += off;\n    hN += off;\n"
        "    extern __shared__ float sm[]; // kPRows x kH of W_hh, N x kH of h, N x kPRows dots\n"
        "    float *w = sm, *hv = sm + kPRows * kH, *dots = hv + N * kH;\n"
        "    const int warp = threadIdx.x / 32, lane = threadIdx.x %% 32, nw = blockDim.x / 32;\n"
        "    const int64_t j0 = (int64_t)blockIdx.x * kPJB, DH = kD * kH, GH = kG * kH;\n"
        "    for (int64_t e = threadIdx.x; e < kPRows * kH; e += blockDim.x) {\n"
        "        const int64_t r = e / kH, j = j0 + r %% kPJB;\n"
        "        w[e] = j < kH ? whh[((r / kPJB) * kH + j) * kH + e %% kH] : 0.0f;\n    }\n"
        "    const float *hp = h0;\n"
        "    (void)c0; // an LSTM's\n    (void)c;\n"
        "    int64_t hs = kH;\n"
        "    for (int64_t s = 0; s < T; ++s) {\n"
        "        const int64_t t = d == 0 ? s : T - 1 - s, gs = rn * GH, ys = rn * DH;\n"
        "        const float *gt = g + t * rt * GH;\n"
        "        float *y = dst + t * rt * DH + d * kH;\n"
        "        float *hn = s == T - 1 ? hN : nullptr;\n"
        "%s"
        "        for (int64_t e = threadIdx.x; hp != nullptr && e < N * kH; e += blockDim.x)\n"
        "            hv[e] = __ldcg(hp + (e / kH) * hs + e %% kH);\n"
        "        __syncthreads();\n"
        "        for (int r = warp; hp != nullptr && r < kPRows; r += nw)\n"
        "            row_dots(w + r * kH, hv, kH, N, dots + r, kPRows, lane);\n"
        "        __syncthreads();\n"
        "        for (int64_t e = threadIdx.x; e < N * kPJB; e += blockDim.x) {\n"
        "            const int64_t n = e / kPJB, j = j0 + e %% kPJB;\n"
        "            if (j >= kH)\n                continue;\n"
        "            float xa[kG], ra[kG];\n#pragma unroll\n"
        "            for (int q = 0; q < kG; ++q) {\n"
        "                xa[q] = gt[n * gs + q * kH + j] + (kBias ? bi[q * kH + j] : 0.0f);\n"
        "                ra[q] = (hp ? dots[n * kPRows + q * kPJB + (j - j0)] : 0.0f) +\n"
        "                        (kBias ? bh[q * kH + j] : 0.0f);\n            }\n"
        "        %s        %s        }\n"
        "        grid_barrier(bar, (unsigned)((s + 1) * gridDim.x * gridDim.y));\n"
        "        hp = y;\n        hs = ys;\n    }\n}\n\n"
        "// Whether the persistent kernel runs N batch entries here (a cooperative launch, its "
        "shared\n// memory within the opt-in limit, every block resident at once): its blocks "
        "and bytes.\n"
        "bool persist_fits(int64_t N, unsigned *blocks, size_t *smem) {\n"
        "    *blocks = (unsigned)((kH + kPJB - 1) / kPJB);\n"
        "    *smem = sizeof(float) * (size_t)(kPRows * kH + N * kH + N * kPRows);\n"
        "    int dev = 0, coop = 0, optin = 0, sms = 0, per = 0;\n"
        "    bool ok = cudaGetDevice(&dev) == cudaSuccess &&\n"
        "              cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) == "
        "cudaSuccess &&\n"
        "              cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, "
        "dev) ==\n                  cudaSuccess &&\n"
        "              cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == "
        "cudaSuccess;\n"
        "    ok = ok && coop != 0 && *smem <= (size_t)optin &&\n"
        "         cudaFuncSetAttribute(persist, cudaFuncAttributeMaxDynamicSharedMemorySize, "
        "(int)*smem) ==\n             cudaSuccess &&\n"
        "         cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, persist, 256, *smem) == "
        "cudaSuccess &&\n"
        "         (long long)per * sms >= (long long)*blocks * kD;\n"
        "    (void)cudaGetLastError(); // a refused attribute is not the step's error\n"
        "    return ok;\n}\n\n",
        jb, lstm ? "        const float *cp = s == 0 ? c0 : c; // the previous cell state\n" : "",
        cell, store);
}

const char *kfx_rnn_persist_launch(void) {
    return "            if (pok) { // every step of this layer, all directions, in one launch\n"
           "                if (d + 1 < kD)\n"
           "                    continue; // after the last direction's input projections\n"
           "                unsigned *bar = reinterpret_cast<unsigned *>(hg);\n"
           "                const cudaError_t me = cudaMemsetAsync(bar, 0, sizeof(unsigned), "
           "0);\n"
           "                if (me != cudaSuccess)\n                    return (int)me;\n"
           "                DirWeights wd = {};\n"
           "                for (int64_t e = 0; e < kD; ++e) {\n"
           "                    const float *const *q = w + (l * kD + e) * kNW;\n"
           "                    wd.w[e * 3] = q[1];\n"
           "                    wd.w[e * 3 + 1] = kBias ? q[2] : nullptr;\n"
           "                    wd.w[e * 3 + 2] = kBias ? q[3] : nullptr;\n                }\n"
           "                const float *pg = g, *ph0 = has_state ? h0 + l * kD * N * kH : "
           "nullptr;\n"
           "                const float *pc0 = has_state ? c0 + l * kD * N * kH : nullptr;\n"
           "                float *pc = cn + l * kD * N * kH, *phn = hn + l * kD * N * kH;\n"
           "                int64_t pT = T, pN = N, prt = rt, prn = rn;\n"
           "                void *args[] = {&pg, &wd, &ph0, &pc0, &pc, &dst, &phn, &bar, &pT, "
           "&pN, &prt, &prn};\n"
           "                const cudaError_t pe = cudaLaunchCooperativeKernel(\n"
           "                    (const void *)persist, dim3(pblocks, (unsigned)kD), dim3(256), "
           "args, psmem, 0);\n"
           "                if (pe != cudaSuccess)\n                    return (int)pe;\n"
           "                continue;\n            }\n";
}
