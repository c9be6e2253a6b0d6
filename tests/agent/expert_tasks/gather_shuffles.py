"""circular pad, pixel shuffle and unshuffle (modules and functions), flips over several dims"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = nn.PixelShuffle(2)
        self.pu = nn.PixelUnshuffle(2)

    def forward(self, x):
        i = F.pad(x, (2, 2, 1, 1), mode="circular")
        j = self.ps(x)
        k = F.pixel_shuffle(x, 2)
        l2 = self.pu(x)
        m = F.pixel_unshuffle(x * 2.0, 3)
        n = torch.flip(x, [1, 3])
        o = x.flip(-1)
        return torch.cat(
            [
                i.flatten(1),
                j.flatten(1),
                k.flatten(1),
                l2.flatten(1),
                m.flatten(1),
                n.flatten(1),
                o.flatten(1),
            ],
            1,
        )


def get_inputs():
    return [torch.randn(4, 8, 6, 6)]


def get_init_inputs():
    return []
