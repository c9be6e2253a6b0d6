"""Maximum over dim 1 of a 3D tensor (the sequence axis), dropping it: (B, S, D) -> (B, D)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, SEQ, DIM = 16, 512, 1024  # 32 MiB in
else:
    BATCH, SEQ, DIM = 48, 4096, 8192  # 6 GiB in


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [1]
