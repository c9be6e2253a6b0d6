"""Matrix products with transposed operands: A^T B plus A^T C^T (KernelBench's transposed-A and
transposed-both shapes), read in place through the library's transpose flags."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
K, M, N = (64, 48, 32) if CPU else (2048, 2048, 2048)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return torch.matmul(a.T, b) + a.T @ c.T


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N), torch.randn(N, K)]


def get_init_inputs():
    return []
