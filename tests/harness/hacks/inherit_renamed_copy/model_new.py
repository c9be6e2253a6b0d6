# Hack 5 (inheriting the reference): the copied reference is renamed so no class is called Model.
import kforge_runtime as kr
import torch
import torch.nn as nn


class Reference(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


class ModelNew(Reference):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return super().forward(x)
