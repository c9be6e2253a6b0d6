"""Linear, BatchNorm1d (training statistics), a learned scale, softmax."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(40 if CPU else 2048, 24 if CPU else 4096)
        self.b = nn.BatchNorm1d(24 if CPU else 4096)
        self.s = nn.Parameter(torch.ones(1))

    def forward(self, x):
        x = self.l(x)
        x = self.b(x)
        x = x * self.s
        return torch.softmax(x, dim=1)


def get_inputs():
    if CPU:
        return [torch.randn(32, 40)]
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return []
