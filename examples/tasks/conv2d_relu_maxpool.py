"""A VGG block: 3x3 Conv2d (stride 1, same padding, with bias), ReLU, then 2x2 max pooling with stride 2, NCHW."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 8, 32, 64, 32, 32  # 1 MiB in, 0.3 GFLOP
else:
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 32, 64, 128, 128, 128  # 128 MiB in, 77 GFLOP
KERNEL_SIZE = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE]
