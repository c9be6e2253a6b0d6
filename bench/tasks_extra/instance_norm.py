"""InstanceNorm2d with an affine, then ReLU (NCHW, 128 MiB)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.InstanceNorm2d(64 if not CPU else 8, affine=True)

    def forward(self, x):
        return torch.relu(self.norm(x))


def get_inputs():
    if CPU:
        return [torch.randn(2, 8, 16, 16)]
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return []
