"""3x3 Conv2d with stride 2 and padding 1 (a downsampling layer), with bias, then ReLU, NCHW."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 8, 32, 64, 64, 64  # 4 MiB in, 0.3 GFLOP
else:
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 32, 64, 128, 256, 256  # 512 MiB in, 77 GFLOP
KERNEL_SIZE, STRIDE = 3, 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE, STRIDE]
