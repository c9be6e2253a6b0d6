"""A U-Net decoder step: bilinear upsampling by 2, a pad to the skip connection's size, a
concatenation along channels, two 3x3 convolutions with batch norm and ReLU."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
N, C, H = (2, 8, 9) if CPU else (8, 128, 63)


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = nn.Sequential(
            nn.Conv2d(2 * c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=True),
            nn.Conv2d(c, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=True),
        )

    def forward(self, x1, x2):
        x1 = self.up(x1)
        dy = x2.size()[2] - x1.size()[2]
        dx = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


def get_inputs():
    return [torch.randn(N, C, H, H), torch.randn(N, C, 2 * H + 1, 2 * H + 1)]


def get_init_inputs():
    return [C]
