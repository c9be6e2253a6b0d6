"""Sum reduction over dim 1 of a 3D tensor, keeping the reduced dimension: (B, D1, D2) -> (B, 1, D2)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, DIM1, DIM2 = 48, 512, 512  # 48 MiB in
else:
    # 6 GiB in. The reduced axis is kept at 256 so that fp32 rounding (which grows with its
    # length) stays well inside atol = rtol = 1e-4 for signed and heavy-tailed inputs too.
    BATCH, DIM1, DIM2 = 384, 256, 16384


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [1]
