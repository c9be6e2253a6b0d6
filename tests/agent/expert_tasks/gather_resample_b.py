"""nearest by two scales, linear, trilinear, area, adaptive pools 1-d/2-d/3-d, a recomputed scale"""

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
        i = F.interpolate(x, scale_factor=(0.5, 1.25), mode="nearest")
        j = F.interpolate(x.view(4, 8, 42), scale_factor=3, mode="linear")
        k = F.interpolate(x.view(4, 2, 4, 6, 7), scale_factor=2, mode="trilinear")
        l2 = F.interpolate(x, size=(4, 3), mode="area")
        m = F.adaptive_avg_pool1d(x.view(4, 8, 42), 5)
        n = F.adaptive_max_pool2d(torch.tanh(x), (2, 3))
        o = F.adaptive_avg_pool3d(x.view(4, 2, 4, 6, 7), (3, 4, 5))
        p = F.interpolate(x, scale_factor=2.0, mode="bilinear", recompute_scale_factor=True)
        return torch.cat(
            [
                i.flatten(1),
                j.flatten(1),
                k.flatten(1),
                l2.flatten(1),
                m.flatten(1),
                n.flatten(1),
                o.flatten(1),
                p.flatten(1),
            ],
            1,
        )


def get_inputs():
    return [torch.randn(4, 8, 6, 7)]


def get_init_inputs():
    return []
