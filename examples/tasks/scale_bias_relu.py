"""Per-feature scale and bias then ReLU: y = relu(x * scale + bias), scale and bias learned rows of shape (D,)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    ROWS, DIM = 2048, 2048  # 16 MiB in
else:
    ROWS, DIM = 32768, 8192  # 1 GiB in + 1 GiB out (eager makes 3 passes, 6 GiB of traffic)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        # Not ones and zeros, so that a kernel ignoring either is caught.
        self.scale = nn.Parameter(torch.ones(dim) + 0.5 * torch.randn(dim))
        self.bias = nn.Parameter(0.5 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + self.bias)


def get_inputs():
    return [torch.randn(ROWS, DIM)]


def get_init_inputs():
    return [DIM]
