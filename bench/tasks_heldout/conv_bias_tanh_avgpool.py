"""Conv2d, minus a per-channel parameter, tanh, AvgPool2d."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3 if CPU else 32, 8 if CPU else 64, 3)
        self.b = nn.Parameter(torch.randn(8 if CPU else 64, 1, 1))
        self.p = nn.AvgPool2d(2)

    def forward(self, x):
        x = self.c(x)
        x = x - self.b
        x = torch.tanh(x)
        return self.p(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 3, 16, 16)]
    return [torch.randn(64, 32, 128, 128)]


def get_init_inputs():
    return []
