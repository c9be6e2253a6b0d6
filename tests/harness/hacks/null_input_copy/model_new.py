# Hack 18 (null candidate): returns (a copy of) the input itself.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.copy_f32(x, y, x.numel())
        return y
