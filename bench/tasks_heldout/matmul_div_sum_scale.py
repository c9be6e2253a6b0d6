"""A matmul by a transposed weight, halved, summed over features, scaled."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(24 if CPU else 4096, 40 if CPU else 4096))

    def forward(self, x):
        x = torch.matmul(x, self.w.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        return x * 1.5


def get_inputs():
    if CPU:
        return [torch.randn(32, 40)]
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
