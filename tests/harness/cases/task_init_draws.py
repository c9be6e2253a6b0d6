"""Tensors __init__ makes without owning them: drawn (randn, rand) or constant (zeros) before
the module's parameters, in the order a candidate can replay from the judge's seed, and one
drawn after them, which no replay reaches. forward() assigns c0 = h0, as KernelBench does."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h0 = torch.randn(2, 4, 12)
        self.mask = torch.zeros(4, 12)
        self.scale = torch.rand(12)
        self.c0 = torch.randn(2, 4, 12)
        self.lstm = nn.LSTM(6, 12, 2, batch_first=True)
        self.late = torch.randn(3)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return out * self.scale + self.mask[0] + self.late.sum()


def get_inputs():
    return [torch.randn(4, 5, 6)]


def get_init_inputs():
    return []
