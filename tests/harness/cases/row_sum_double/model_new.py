import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], device=x.device)
        self.k.row_sum(x, y, x.shape[0], x.shape[1])
        return y
