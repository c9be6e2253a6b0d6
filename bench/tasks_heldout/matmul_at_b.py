"""A transposed matrix times a matrix (the transpose read in place)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.matmul(a.T, b)


def get_inputs():
    if CPU:
        return [torch.randn(96, 64), torch.randn(96, 80)]
    return [torch.randn(4096, 2048), torch.randn(4096, 4096)]


def get_init_inputs():
    return []
