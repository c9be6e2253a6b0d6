"""A diagonal matrix times a matrix (KernelBench's diag(A) @ B: eager builds the N x N matrix
and multiplies it; the product only scales B's rows; 64 MiB in)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.diag(a) @ b


def get_inputs():
    n, m = (64, 48) if CPU else (4096, 4096)
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
