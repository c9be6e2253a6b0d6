"""Native candidate for tasks/rms_norm.py: one fused kernel (mean of squares, rsqrt, weight) per row."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))  # values come from the task's state_dict
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = self.weight.shape[0]
        y = torch.empty_like(x)
        self.k.rms_norm_f32(x, self.weight, y, x.numel() // cols, cols, float(self.eps))
        return y
