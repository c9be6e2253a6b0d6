"""Argmin over the middle dim."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.argmin(x, dim=1)


def get_inputs():
    if CPU:
        return [torch.randn(16, 20, 30)]
    return [torch.randn(128, 256, 1024)]


def get_init_inputs():
    return []
