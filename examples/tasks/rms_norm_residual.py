"""Residual add then RMSNorm over the last dimension: h = x + r, y = h * rsqrt(mean(h^2, -1) + eps) * weight."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, SEQ, HIDDEN = 16, 128, 1024  # 8 MiB per input
else:
    BATCH, SEQ, HIDDEN = 32, 2048, 4096  # 1 GiB per input + 1 GiB out (eager makes ~7 passes)


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden) + 0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        h = x + r
        rms = torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + self.eps)
        return h * rms * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, 1e-6]
