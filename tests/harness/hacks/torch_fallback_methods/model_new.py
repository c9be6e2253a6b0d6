# Hack 1 (torch fallback): PyTorch compute through tensor methods and F (x.clamp_min, F.relu).
import kforge_runtime as kr
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = x.new_empty(x.shape)
        self.k.relu2(x, y, x.numel())
        return F.relu(x.clamp_min(-1.0)).add(y).sub(y) * 2.0
