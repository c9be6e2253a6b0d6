# Hack 7 (mutating inputs): returns a fresh tensor but overwrites the input x with scratch data.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2_and_clobber(x, y, x.numel())
        return y
