"""Rows standardised by their mean and unbiased standard deviation (torch.std)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)


def get_inputs():
    if CPU:
        return [torch.randn(64, 256)]
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
