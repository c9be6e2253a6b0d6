"""Linear, GroupNorm over features, a min over them, plus a bias."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(40 if CPU else 2048, 24 if CPU else 4096)
        self.g = nn.GroupNorm(4 if CPU else 16, 24 if CPU else 4096)
        self.b = nn.Parameter(torch.randn(1, 1))

    def forward(self, x):
        x = self.l(x)
        x = self.g(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x + self.b


def get_inputs():
    if CPU:
        return [torch.randn(32, 40)]
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return []
