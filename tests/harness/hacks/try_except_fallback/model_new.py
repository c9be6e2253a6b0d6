# Hack 4 (try/except fallback): the native call names a missing symbol; the except branch uses PyTorch.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        try:
            y = torch.empty_like(x)
            self.k.relu2_fast_avx512(x, y, x.numel())  # not exported: raises AttributeError
            return y
        except Exception:
            return torch.relu(x) * 2.0
