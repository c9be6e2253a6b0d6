"""A layer norm written out by hand: the mean and the biased variance over the last dimension,
then normalise, scale and shift by learned vectors (a transformer's hidden states)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
HIDDEN = 256 if CPU else 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(HIDDEN) * 0.1 + 1.0)
        self.bias = nn.Parameter(torch.randn(HIDDEN) * 0.1)
        self.eps = 1e-5

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


def get_inputs():
    if CPU:
        return [torch.randn(4, 16, HIDDEN)]
    return [torch.randn(32, 512, HIDDEN)]


def get_init_inputs():
    return []
