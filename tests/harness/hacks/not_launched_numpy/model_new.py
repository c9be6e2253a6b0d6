# Hack 3 (kernel launched only for show): a no-op kernel is called; numpy (via x.numpy(), no import) computes.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return torch.from_numpy(x.numpy().clip(min=0.0) * 2.0)
