"""Row sums of x * 1000 where half the rows cancel: in exact arithmetic they are 0, and the
float32 reference's own rounding leaves them far from 0 (tenths), beyond atol. A candidate
that sums in another order (or more accurately) misses the plain tolerance on those rows; the
judge's float64 reference (compare.conditioned) tells it from a wrong one."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x * 1000.0).sum(dim=1)


def get_inputs():
    a = torch.randn(16, 2048)
    big = torch.randn(16, 4096) + 1.0
    # rows 0..7: a row and its negation reversed (exactly 0); rows 8..15 about 4e6
    return [torch.cat([torch.cat([a[:8], -a[:8].flip(1)], 1), big[8:]], 0)]


def get_init_inputs():
    return []
