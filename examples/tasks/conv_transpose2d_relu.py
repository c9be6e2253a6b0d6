"""4x4 ConvTranspose2d with stride 2 and padding 1 (a decoder's 2x upsampling), with bias, then ReLU, NCHW."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 4, 32, 16, 16, 16  # 128 KiB in, 0.07 GFLOP
else:
    BATCH, IN_CH, OUT_CH, HEIGHT, WIDTH = 16, 128, 64, 64, 64  # 32 MiB in, 64 MiB out, 17 GFLOP
KERNEL_SIZE, STRIDE = 4, 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.up(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE, STRIDE]
