"""Convolutions with padding_mode reflect (2-D), circular (1-D, no bias) and replicate (3-D, a
padding per dim, stride 2): the input padded by a gather in that mode (the elementwise chain
before it read as its prologue), then the convolution with no padding"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1, padding_mode="reflect")
        self.b = nn.Conv1d(4, 6, 3, padding=2, padding_mode="circular", bias=False)
        self.c = nn.Conv3d(4, 5, 3, padding=(1, 0, 2), padding_mode="replicate", stride=2)

    def forward(self, x, y, z):
        return torch.cat([torch.relu(self.a(x)).flatten(), self.b(y * 2).flatten(), self.c(z).flatten()])


def get_inputs():
    return [torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16), torch.randn(2, 4, 8, 8, 8)]


def get_init_inputs():
    return []
