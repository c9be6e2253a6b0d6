"""erf, log1p and expm1 (elementwise, 128 MiB)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.erf(x) * torch.log1p(x.abs()) + torch.expm1(-x.abs())


def get_inputs():
    if CPU:
        return [torch.randn(64, 256)]
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
