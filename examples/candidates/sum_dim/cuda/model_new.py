"""Native candidate for tasks/sum_dim.py: the tensor is seen as (outer, reduce, inner) and reduced by one kernel."""

import math

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        outer = math.prod(x.shape[:dim])
        reduce = x.shape[dim]
        inner = math.prod(x.shape[dim + 1 :])
        out_shape = list(x.shape)
        out_shape[dim] = 1
        y = x.new_empty(out_shape)
        self.k.sum_dim_f32(x, y, outer, reduce, inner)
        return y
