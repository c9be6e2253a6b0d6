# Hack 10 (background thread in C++): the kernel returns at once and a detached std::thread fills the output.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2_async(x, y, x.numel())
        return y
