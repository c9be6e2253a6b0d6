"""3x3 Conv2d (stride 1, same padding) then BatchNorm2d in training mode (batch statistics) then ReLU, NCHW."""

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
        self.bn = nn.BatchNorm2d(out_channels)
        # Perturb BatchNorm's default affine (ones, zeros) so that a kernel ignoring it is caught.
        with torch.no_grad():
            self.bn.weight.add_(0.5 * torch.randn(out_channels))
            self.bn.bias.add_(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CH, OUT_CH, KERNEL_SIZE]
