"""Elementwise relu(x) * 2 on a 256 MiB fp32 matrix (GPU hack tests; about 0.1 ms on an H200)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
