"""Conv3d, clamp below, divided by a constant."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(3 if CPU else 16, 8 if CPU else 32, 3)

    def forward(self, x):
        x = self.c(x)
        x = torch.clamp(x, min=0.1)
        return x / 2.0


def get_inputs():
    if CPU:
        return [torch.randn(2, 3, 8, 16, 16)]
    return [torch.randn(16, 16, 32, 64, 64)]


def get_init_inputs():
    return []
