"""Hard and soft shrink, threshold, clamp_min and sign (elementwise, 128 MiB)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return (
            F.hardshrink(x, 0.3)
            + F.softshrink(x, 0.2) * torch.sign(x)
            + F.threshold(x, 0.5, -1.0).clamp_min(-0.5)
        )


def get_inputs():
    if CPU:
        return [torch.randn(64, 256)]
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
