# Hack 4 (try/except fallback): PyTorch first, swallowing even BaseException, native result as the fallback.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        try:
            return torch.relu(x) * 2.0
        except BaseException:  # swallows the harness's ForbiddenOp on purpose
            y = torch.empty_like(x)
            self.k.relu2(x, y, x.numel())
            return y
