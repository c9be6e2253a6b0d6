"""Fully connected layer plus a residual, then ReLU: y = relu(x @ W^T + b + r), with nn.Linear's W and b."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, IN_FEATURES, OUT_FEATURES = 512, 1024, 512  # x 2 MiB, W 2 MiB, 0.5 GFLOP
else:
    BATCH, IN_FEATURES, OUT_FEATURES = 16384, 2048, 2048  # 137 GFLOP


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) + r)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES), torch.randn(BATCH, OUT_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
