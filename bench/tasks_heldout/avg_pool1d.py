"""AvgPool1d, kernel 4, stride 2, padding 1."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.AvgPool1d(4, stride=2, padding=1)

    def forward(self, x):
        return self.p(x)


def get_inputs():
    if CPU:
        return [torch.randn(4, 8, 64)]
    return [torch.randn(64, 128, 8192)]


def get_init_inputs():
    return []
