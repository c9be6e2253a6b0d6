"""A 3x3 fp32 convolution, no bias (GPU hack tests)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return [32, 64]
