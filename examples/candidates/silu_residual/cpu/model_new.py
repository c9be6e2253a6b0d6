"""Native candidate for tasks/silu_residual.py: x * sigmoid(x) + r in one fused elementwise kernel."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        if x.shape != r.shape:
            raise ValueError("silu_residual: x and r must have the same shape")
        y = torch.empty_like(x)
        self.k.silu_residual_f32(x, r, y, x.numel())
        return y
