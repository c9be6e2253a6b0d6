import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        z = torch.empty_like(x)
        self.k.kf_relu(x, y, x.numel())
        self.k.kf_twice(y, z, x.numel())
        return z
