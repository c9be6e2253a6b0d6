"""Native candidate for tasks/gelu.py: exact (erf) GELU in one elementwise kernel."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        self.k.gelu_f32(x, y, x.numel())
        return y
