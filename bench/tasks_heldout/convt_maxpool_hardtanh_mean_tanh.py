"""ConvTranspose2d, MaxPool2d, hardtanh, a spatial mean, tanh."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.ConvTranspose2d(4 if CPU else 32, 8 if CPU else 64, 3, stride=2, padding=1)
        self.p = nn.MaxPool2d(2, 2)

    def forward(self, x):
        x = self.c(x)
        x = self.p(x)
        x = F.hardtanh(x, -1, 1)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        return torch.tanh(x)


def get_inputs():
    if CPU:
        return [torch.randn(2, 4, 8, 8)]
    return [torch.randn(64, 32, 64, 64)]


def get_init_inputs():
    return []
