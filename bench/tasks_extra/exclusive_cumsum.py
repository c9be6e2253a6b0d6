"""An exclusive cumulative sum along rows (KernelBench's: a zero column concatenated before x,
the last column dropped, then cumsum; torch.zeros_like, torch.cat and a slice; 64 MiB in)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
# As bench/tasks_extra/reverse_cumsum.py: two correct fp32 scans of 4096 signed values differ
# by up to about 1.5e-3 where the running sum crosses zero.
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        shifted = torch.cat((zeros, x), dim=self.dim)[:, :-1]
        return torch.cumsum(shifted, dim=self.dim)


def get_inputs():
    return [torch.randn(32, 400) if CPU else torch.randn(4096, 4096)]


def get_init_inputs():
    return [1]
