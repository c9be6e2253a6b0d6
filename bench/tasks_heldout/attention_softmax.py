"""Scaled dot-product attention written out: QK^T, scale, softmax, times V."""

import math
import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        p = torch.softmax(s, dim=-1)
        return torch.matmul(p, v)


def get_inputs():
    if CPU:
        return [torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8)]
    return [torch.randn(16, 16, 1024, 64), torch.randn(16, 16, 1024, 64), torch.randn(16, 16, 1024, 64)]


def get_init_inputs():
    return []
