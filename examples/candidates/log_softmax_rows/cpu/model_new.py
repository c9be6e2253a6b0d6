"""Native candidate for tasks/log_softmax_rows.py: one kernel computes the log-softmax of every row."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = x.shape[-1]
        y = torch.empty_like(x)
        self.k.log_softmax_rows_f32(x, y, x.numel() // cols if cols else 0, cols)
        return y
