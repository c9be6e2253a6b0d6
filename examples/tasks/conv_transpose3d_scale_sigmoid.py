"""3x3x3 ConvTranspose3d with stride 2, padding 1 and output padding 1 (2x upsampling of volumes),
with bias, then a learned per-channel scale and a sigmoid, NCDHW."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_CH, OUT_CH, DEPTH, HEIGHT, WIDTH = 2, 8, 4, 4, 8, 8  # 32 KiB in, 0.01 GFLOP
else:
    BATCH, IN_CH, OUT_CH, DEPTH, HEIGHT, WIDTH = 8, 32, 16, 16, 32, 32  # 16 MiB in, 64 MiB out, 3.6 GFLOP
KERNEL_SIZE, STRIDE = 3, 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.up = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=1, output_padding=1
        )
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.up(x) * self.scale)


def get_inputs():
    return [torch.randn(BATCH, IN_CH, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE, STRIDE]
