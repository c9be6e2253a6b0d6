"""Leaky ReLU with negative slope 0.1, y = x if x > 0 else 0.1 * x, applied elementwise to a 2D tensor."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    # 28 MiB in: glibc maps an allocation of 32 MiB or more afresh on every call (page faults).
    BATCH, DIM = 2048, 3584
else:
    BATCH, DIM = 49152, 16384  # 3 GiB in + 3 GiB out


class Model(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [0.1]
