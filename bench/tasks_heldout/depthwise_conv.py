"""A depthwise 3x3 convolution."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(
            8 if CPU else 64, 8 if CPU else 64, 3, padding=1, groups=8 if CPU else 64, bias=False
        )

    def forward(self, x):
        return self.c(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 8, 20, 20)]
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return []
