"""The tanh GELU written out with torch.pow, as GPT code has it (128 MiB)."""

import math
import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    if CPU:
        return [torch.randn(32, 200)]
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
