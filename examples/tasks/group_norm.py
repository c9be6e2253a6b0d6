"""GroupNorm with 32 groups over an NCHW tensor, learned per-channel weight and bias."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, CHANNELS, HEIGHT, WIDTH = 8, 64, 64, 64  # 8 MiB in
else:
    BATCH, CHANNELS, HEIGHT, WIDTH = 32, 256, 256, 256  # 2 GiB in + 2 GiB out
GROUPS = 32


class Model(nn.Module):
    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels)
        # Perturb the default affine (ones, zeros) so that a kernel ignoring it is caught.
        with torch.no_grad():
            self.gn.weight.add_(0.5 * torch.randn(num_channels))
            self.gn.bias.add_(0.5 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [GROUPS, CHANNELS]
