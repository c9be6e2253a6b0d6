"""nn.MultiheadAttention as self-attention: sequence-first with the weights unpacked and unread,
batch_first without biases and need_weights=False"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4)
        self.attn_bf = nn.MultiheadAttention(32, 8, bias=False, batch_first=True)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        B, C, H, W = x.shape
        s = x.view(B, C, H * W).permute(2, 0, 1)
        a, _ = self.attn(s, s, s)
        y = self.norm(a + s)
        t = y.transpose(0, 1)
        b = self.attn_bf(t, t, t, need_weights=False)[0]
        return torch.cat([y.flatten(), b.flatten()])


def get_inputs():
    return [torch.randn(2, 32, 4, 5)]


def get_init_inputs():
    return []
