# Hack 18 (null candidate): returns zeros of the right shape (with a no-op native call).
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return torch.zeros_like(x)
