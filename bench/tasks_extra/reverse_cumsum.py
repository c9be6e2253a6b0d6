"""A cumulative sum from the end of each row (KernelBench's reverse cumsum: the input flipped,
summed, and flipped back; 64 MiB in)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


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
