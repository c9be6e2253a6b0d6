"""Mish activation, y = x * tanh(softplus(x)), applied elementwise to a 2D tensor."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    ROWS, COLS = 1024, 2048  # 8 MiB in
else:
    ROWS, COLS = 32768, 16384  # 2 GiB in + 2 GiB out (eager makes 3 passes, 14 GiB of traffic)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
