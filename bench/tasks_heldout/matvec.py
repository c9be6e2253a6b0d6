"""A matrix times a column vector (cuBLAS gemv territory; 256 MiB of matrix)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    if CPU:
        return [torch.randn(64, 96), torch.randn(96, 1)]
    return [torch.randn(4096, 16384), torch.randn(16384, 1)]


def get_init_inputs():
    return []
