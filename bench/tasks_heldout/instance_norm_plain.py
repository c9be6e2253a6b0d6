"""InstanceNorm2d without an affine (NCHW, 256 MiB)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = nn.InstanceNorm2d(8 if CPU else 64)

    def forward(self, x):
        return self.n(x)


def get_inputs():
    if CPU:
        return [torch.randn(4, 8, 16, 16)]
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return []
