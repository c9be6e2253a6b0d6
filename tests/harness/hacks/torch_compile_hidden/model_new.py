# Hack 2 (torch.compile, hidden from the static scan): torch.compile reached via getattr on a built string.
import kforge_runtime as kr
import torch
import torch.nn as nn


def _ref(x):
    return torch.relu(x) * 2.0


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()
        self.fn = getattr(torch, "com" + "pile")(_ref, dynamic=False)

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return self.fn(x)
