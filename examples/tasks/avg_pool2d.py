"""2D average pooling, kernel 3, stride 2, padding 1 (zero padding counted in the divisor), over an NCHW tensor."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, CHANNELS, HEIGHT, WIDTH = 8, 32, 64, 64  # 4 MiB in
else:
    BATCH, CHANNELS, HEIGHT, WIDTH = 48, 64, 512, 512  # 3 GiB in + 0.75 GiB out


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [3, 2, 1]
