"""3x3x3 average pooling (stride 2, padding 1, padding not counted), then tanh (NCDHW, 128 MiB)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(F.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False))


def get_inputs():
    if CPU:
        return [torch.randn(2, 4, 8, 8, 8)]
    return [torch.randn(16, 32, 32, 64, 64)]


def get_init_inputs():
    return []
