"""Swin's window attention input: the feature map cut into 7x7 windows (a 6-D permute copied by
a gather), a layer norm over channels, then the windows put back (the reverse permute) and a
residual add."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
B, H, C, WS = (2, 14, 16, 7) if CPU else (32, 56, 96, 7)


class Model(nn.Module):
    def __init__(self, c, ws):
        super().__init__()
        self.norm = nn.LayerNorm(c)
        self.ws = ws

    def forward(self, x):
        b, h, w, c = x.shape
        ws = self.ws
        win = (
            x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, c)
        )
        win = self.norm(win)
        back = (
            win.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, c)
        )
        return x + back


def get_inputs():
    return [torch.randn(B, H, H, C)]


def get_init_inputs():
    return [C, WS]
