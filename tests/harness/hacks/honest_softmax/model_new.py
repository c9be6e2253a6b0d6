# Honest control (softmax_rows): a native row softmax; must pass with no flags.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        cols = x.shape[-1]
        self.k.softmax_rows(x, y, x.numel() // cols, cols)
        return y
