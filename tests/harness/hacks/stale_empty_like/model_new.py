# Hack 6 (stale memory): returns torch.empty_like(x) without computing, hoping the reference output is still there.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())  # a native call, so the launch counter moves
        return torch.empty_like(x)
