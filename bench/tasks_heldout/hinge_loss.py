"""The mean hinge loss of scores against +-1 labels."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, p, q):
        return torch.mean(torch.clamp(1 - p * q, min=0))


def get_inputs():
    if CPU:
        return [torch.randn(16, 1), torch.randint(0, 2, (16, 1)).float() * 2 - 1]
    return [torch.randn(32768, 1024), torch.randint(0, 2, (32768, 1)).float() * 2 - 1]


def get_init_inputs():
    return []
