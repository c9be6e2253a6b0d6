"""Linear, sigmoid, a row sum and a logsumexp over the batch."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(40 if CPU else 2048, 24 if CPU else 4096)

    def forward(self, x):
        x = self.l(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=1)
        return torch.logsumexp(x, dim=0)


def get_inputs():
    if CPU:
        return [torch.randn(32, 40)]
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return []
