"""gathers that read the elementwise chain before them as their prologue, evaluated at each
element they read (no pass of its own): a reflect pad of a ReLU, a bilinear upsample of a
sigmoid plus a per-channel bias (a broadcast leaf), a flip of a product, an adaptive pool of a
GELU, a roll of a sum with a 0-d parameter (a scalar leaf), a pixel shuffle of a tanh; every
element compared (a cat of the outputs)"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(8, 1, 1))
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x, y):
        a = F.pad(torch.relu(x) * 2.0, (1, 2, 2, 1), mode="reflect")
        b = F.interpolate(torch.sigmoid(x) + self.bias, scale_factor=2, mode="bilinear")
        c = torch.flip(x * y, [1, 3])
        d = F.adaptive_avg_pool2d(F.gelu(x - y), (4, 5))
        e = torch.roll(x + self.scale, (1, -2), (2, 3))
        f = F.pixel_shuffle(torch.tanh(x), 2)
        return torch.cat(
            [a.flatten(1), b.flatten(1), c.flatten(1), d.flatten(1), e.flatten(1), f.flatten(1)], 1
        )


def get_inputs():
    return [torch.randn(4, 8, 6, 6), torch.randn(4, 8, 6, 6)]


def get_init_inputs():
    return []
