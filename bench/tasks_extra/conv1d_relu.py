"""Conv1d (kernel 5, same padding) with bias, then ReLU, over long sequences (NCL)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(64 if not CPU else 16, 128 if not CPU else 32, 5, padding=2)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    if CPU:
        return [torch.randn(2, 16, 64)]
    return [torch.randn(32, 64, 4096)]


def get_init_inputs():
    return []
