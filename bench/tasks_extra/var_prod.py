"""Row variance (torch.var, biased) times a row product of values near 1 (torch.prod)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.var(x, dim=1, unbiased=False) * torch.prod(1 + 0.001 * x, dim=1)


def get_inputs():
    if CPU:
        return [torch.randn(64, 256)]
    return [torch.randn(16384, 2048)]


def get_init_inputs():
    return []
