"""3x3x3 Conv3d (stride 1, same padding) with bias, then GELU, on volumes (NCDHW)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_CH, OUT_CH, DEPTH, HEIGHT, WIDTH = 2, 8, 16, 8, 16, 16  # 0.25 MiB in, 0.06 GFLOP
else:
    BATCH, IN_CH, OUT_CH, DEPTH, HEIGHT, WIDTH = 8, 16, 32, 32, 64, 64  # 64 MiB in, 29 GFLOP
KERNEL_SIZE = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE]
