"""A small elementwise task for the bad-input tests: relu(x) * 2."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
