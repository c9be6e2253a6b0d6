"""SELU then hardsigmoid (elementwise, 128 MiB)."""

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
        return F.hardsigmoid(torch.selu(x))


def get_inputs():
    if CPU:
        return [torch.randn(32, 200)]
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
