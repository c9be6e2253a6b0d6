"""nn.Upsample and its nearest/bilinear subclasses, adaptive pools to (3, 5) and (4, None),
bilinear by a scale of 1.5, to a size with align_corners, nearest-exact"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.upb = nn.UpsamplingBilinear2d(scale_factor=2)
        self.upn = nn.UpsamplingNearest2d(size=(9, 13))
        self.ada = nn.AdaptiveAvgPool2d((3, 5))
        self.adm = nn.AdaptiveMaxPool2d((4, None))

    def forward(self, x):
        a = self.up(x)
        b = self.upb(x)
        c = self.upn(x)
        d = self.ada(x)
        e = self.adm(x)
        f = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
        g = F.interpolate(x, size=(5, 11), mode="bilinear", align_corners=True)
        h = F.interpolate(x, size=(7, 3), mode="nearest-exact")
        return torch.cat(
            [
                a.flatten(1),
                b.flatten(1),
                c.flatten(1),
                d.flatten(1),
                e.flatten(1),
                f.flatten(1),
                g.flatten(1),
                h.flatten(1),
            ],
            1,
        )


def get_inputs():
    return [torch.randn(4, 8, 6, 7)]


def get_init_inputs():
    return []
