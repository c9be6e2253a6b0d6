"""MaxPool3d, kernel 3, stride 2, padding 1."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.MaxPool3d(3, stride=2, padding=1)

    def forward(self, x):
        return self.p(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 4, 16, 16, 16)]
    return [torch.randn(16, 32, 64, 64, 64)]


def get_init_inputs():
    return []
