"""A strided 1-D transposed convolution with a bias."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.ConvTranspose1d(
            8 if CPU else 64, 6 if CPU else 32, 3, stride=2, padding=1, output_padding=1
        )

    def forward(self, x):
        return self.c(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 8, 30)]
    return [torch.randn(64, 64, 8192)]


def get_init_inputs():
    return []
