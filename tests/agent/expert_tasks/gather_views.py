"""6-D permutes copied by a gather (Swin's window partition and its reverse, a pixel shuffle
written out), x.repeat, torch.tile, repeat_interleave with and without a dim"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        B, C, H, W = x.shape
        win = x.view(B, C, H // 2, 2, W // 2, 2).permute(0, 2, 4, 3, 5, 1).contiguous().view(-1, 4, C)
        back = win.view(B, H // 2, W // 2, 2, 2, C).permute(0, 5, 1, 3, 2, 4).reshape(B, C, H, W)
        ps = torch.relu(
            x.view(B, C // 4, 2, 2, H, W).permute(0, 1, 4, 2, 5, 3).reshape(B, C // 4, H * 2, W * 2)
        )
        a = x.repeat(2, 1, 1, 3)
        b = x[0].repeat(2, 1, 1, 1)
        c = torch.tile(x, (2,))
        d = x.repeat_interleave(3, dim=2)
        e = torch.repeat_interleave(x[0, 0], 2)
        return torch.cat(
            [
                win.reshape(-1),
                (back - x).reshape(-1),
                ps.reshape(-1),
                a.reshape(-1),
                b.reshape(-1),
                c.reshape(-1),
                d.reshape(-1),
                e.reshape(-1),
            ],
            0,
        )


def get_inputs():
    return [torch.randn(2, 8, 6, 4)]


def get_init_inputs():
    return []
