"""Conv3d (kernel 3, same padding) with bias, ReLU, then 2x2x2 max pooling (NCDHW)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(4 if CPU else 16, 8 if CPU else 32, 3, padding=1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    if CPU:
        return [torch.randn(2, 4, 8, 8, 8)]
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return []
