# Hack 7 (output aliases the input): computes in place and returns a reshaped view of x (a new Tensor object).
import kforge_runtime as kr
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.relu2_inplace(x, x.numel())
        return x.view(-1).view(x.shape)
