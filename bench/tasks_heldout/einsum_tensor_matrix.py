"""A 4-D tensor times a matrix over its last dim, written as einsum."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.einsum("bijl,lk->bijk", a, b)


def get_inputs():
    if CPU:
        return [torch.randn(2, 8, 6, 16), torch.randn(16, 12)]
    return [torch.randn(8, 64, 64, 256), torch.randn(256, 512)]


def get_init_inputs():
    return []
