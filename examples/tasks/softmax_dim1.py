"""Softmax over dim 1 (the middle, strided dimension) of a 3D tensor: (B, C, L), one softmax per (b, l)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, CHANNELS, LENGTH = 16, 256, 1024  # 16 MiB in
else:
    BATCH, CHANNELS, LENGTH = 32, 1024, 16384  # 2 GiB in + 2 GiB out


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return []
