"""Fully connected layer followed by exact GELU (a transformer MLP's up-projection): y = gelu(x @ W^T + b)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_FEATURES, OUT_FEATURES = 512, 512, 1024  # x 1 MiB, W 2 MiB, 0.5 GFLOP
else:
    BATCH, IN_FEATURES, OUT_FEATURES = 8192, 2048, 8192  # 275 GFLOP


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
