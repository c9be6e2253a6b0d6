"""Data-dependent control flow, which torch.fx cannot trace symbolically."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 16)

    def forward(self, x):
        if x.sum() > 0:
            return torch.relu(self.linear(x))
        return torch.tanh(self.linear(x))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
