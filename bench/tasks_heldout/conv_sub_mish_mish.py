"""Conv2d, minus a constant, Mish twice."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3 if CPU else 32, 8 if CPU else 64, 3)

    def forward(self, x):
        x = self.c(x)
        x = x - 0.5
        x = F.mish(x)
        return F.mish(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 3, 16, 16)]
    return [torch.randn(64, 32, 128, 128)]


def get_init_inputs():
    return []
