"""Cumulative products along rows of 4000 values near 1: finite as drawn, infinite once the
inputs are doubled, as the judge's timed calls used to scale them (judge.SCALE_RANGES)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


def get_inputs():
    return [torch.rand(8, 4000) * 0.02 + 0.99]


def get_init_inputs():
    return []
