"""Native candidate for tasks/mean_dim_tanh.py: one kernel reduces each row and applies tanh."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = x.shape[-1]
        y = x.new_empty(x.shape[:-1])
        self.k.mean_tanh_f32(x, y, y.numel(), cols)
        return y
