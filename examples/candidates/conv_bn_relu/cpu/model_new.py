"""Native candidate for tasks/conv_bn_relu.py: convolution, batch statistics, then a fused normalise+affine+ReLU.

BatchNorm runs in training mode (batch statistics), as in the task; the running statistics are
not updated (only the output is compared).
"""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Same modules and parameter names as the task; values come from its state_dict.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        if self.conv.stride != (1, 1) or self.conv.dilation != (1, 1) or self.conv.groups != 1:
            raise ValueError("this candidate handles stride 1, dilation 1, groups 1 only")
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        oc, _, kh, kw = self.conv.weight.shape
        ph, pw = self.conv.padding
        y = x.new_empty((n, oc, h + 2 * ph - kh + 1, w + 2 * pw - kw + 1))
        stats = x.new_empty((2 * oc,), dtype=torch.float64)  # per-channel sum and sum of squares
        self.k.conv_bn_relu_f32(
            x,
            self.conv.weight,
            self.bn.weight,
            self.bn.bias,
            y,
            stats,
            n,
            c,
            h,
            w,
            oc,
            kh,
            kw,
            ph,
            pw,
            float(self.bn.eps),
        )
        return y
