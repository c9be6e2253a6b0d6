"""Linear, a max over features, minus its mean, GELU."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(40 if CPU else 4096, 24 if CPU else 4096)

    def forward(self, x):
        x = self.l(x)
        x = torch.max(x, dim=1, keepdim=True).values
        x = x - x.mean(dim=1, keepdim=True)
        return F.gelu(x)


def get_inputs():
    if CPU:
        return [torch.randn(32, 40)]
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
