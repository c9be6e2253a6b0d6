"""Native candidate for tasks/matmul.py: C = A @ B by one native SGEMM call."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        k2, n = b.shape
        if k != k2:
            raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match")
        c = a.new_empty((m, n))
        self.k.matmul_f32(a, b, c, m, k, n)
        return c
