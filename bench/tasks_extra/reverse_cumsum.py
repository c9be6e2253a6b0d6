"""A cumulative sum from the end of each row (KernelBench's reverse cumsum: the input flipped,
summed, and flipped back; 64 MiB in)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
# A running sum of 4096 signed values wanders to about +-64 and crosses zero; two correct fp32
# scans that add in different orders (PyTorch's block scan, a scan in double) then differ by
# up to about 1.5e-3 there (run 20 on the H200: the expert's double scan failed 1e-4 against
# PyTorch's fp32 one by 2.3e-4 to 1.5e-3), as two fp32 GEMMs do (examples/tasks/matmul.py).
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


def get_inputs():
    if CPU:
        return [torch.randn(32, 400)]
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return [1]
