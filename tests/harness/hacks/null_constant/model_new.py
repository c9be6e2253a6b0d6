# Hack 18 (null candidate): returns a constant (the mean of relu(z) * 2 for z ~ N(0, 1)) everywhere.
import math

import kforge_runtime as kr
import torch
import torch.nn as nn

MEAN = 2.0 / math.sqrt(2.0 * math.pi)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return torch.full_like(x, MEAN)
