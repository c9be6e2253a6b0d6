"""Matrix product, scaled, then sigmoid: y = sigmoid((A @ B) * scale), A (M, K), B (K, N), scale = 1/sqrt(K)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    M, K, N = 512, 768, 512  # 1.5 MiB per operand, 0.4 GFLOP
else:
    M, K, N = 8192, 2048, 4096  # 137 GFLOP


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.matmul(a, b) * self.scale)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [K**-0.5]
