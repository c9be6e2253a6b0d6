# Honest control (cuda_matmul): cuBLAS SGEMM in plain fp32 from the native library; must pass with no flags.
import kforge_runtime as kr
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        c = a.new_empty((m, n))
        self.k.matmul_f32(a, b, c, m, k, n)
        return c
