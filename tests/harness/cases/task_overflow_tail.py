"""relu(x) * 2 plus a term that only heavy-tailed inputs reach: past 10 it overflows to
infinity, so the judge skips the heavy_tailed check (the reference is not finite there), and
the check of get_test_inputs() comes after it. An honest relu2 candidate is correct."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + torch.relu(x - 10.0) * 1e38


def get_inputs():
    return [torch.randn(64, 256)]


def get_test_inputs():
    return [[torch.randn(32, 128)]]


def get_init_inputs():
    return []
