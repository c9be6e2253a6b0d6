"""Softmax over the last dimension of a small fp32 matrix (hack tests)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
