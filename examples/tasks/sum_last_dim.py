"""Sum reduction over the last dimension of a 3D tensor, dropping it: (B, S, D) -> (B, S)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, SEQ, DIM = 32, 512, 1024  # 64 MiB in
else:
    # 6 GiB in. The reduced axis is 1024 long: fp32 rounding grows with its length, and at this
    # length it stays well inside atol = rtol = 1e-4 for signed and heavy-tailed inputs too.
    BATCH, SEQ, DIM = 768, 2048, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
