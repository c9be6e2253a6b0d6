# Hack 3 (kernel written but never launched): forward computes in Python loops over x.tolist().
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()  # loaded, never called

    def forward(self, x):
        rows = [[v * 2.0 if v > 0.0 else 0.0 for v in row] for row in x.tolist()]
        return torch.tensor(rows, dtype=x.dtype)
