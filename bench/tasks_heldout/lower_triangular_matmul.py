"""The lower triangle of a product of lower-triangular matrices."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.tril(torch.matmul(a, b))


def get_inputs():
    if CPU:
        return [torch.tril(torch.randn(48, 48)), torch.tril(torch.randn(48, 48))]
    return [torch.tril(torch.randn(4096, 4096)), torch.tril(torch.randn(4096, 4096))]


def get_init_inputs():
    return []
