"""Native candidate for tasks/layer_norm.py: one fused kernel (statistics, normalisation, affine) per row."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)  # same parameter names as the task; values come from its state_dict
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = self.ln.normalized_shape[-1]
        y = torch.empty_like(x)
        self.k.layer_norm_f32(x, self.ln.weight, self.ln.bias, y, x.numel() // cols, cols, float(self.ln.eps))
        return y
