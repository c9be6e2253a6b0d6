"""F.scaled_dot_product_attention: causal (a tril mask), a bool and a float mask, a scale,
keys longer than the queries, q, k, v transposed views of one projection"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x, kv, bmask, fmask):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(32, dim=2)
        q = q.view(B, T, 4, 8).transpose(1, 2)
        k = k.view(B, T, 4, 8).transpose(1, 2)
        v = v.view(B, T, 4, 8).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        kk = kv.view(B, 4, 12, 8)
        b = F.scaled_dot_product_attention(q, kk, kk * 2.0, attn_mask=bmask)
        c = F.scaled_dot_product_attention(q, kk, kk, attn_mask=fmask, scale=0.3)
        y = a.transpose(1, 2).contiguous().view(B, T, C)
        return torch.cat([y.flatten(), b.flatten(), c.flatten()])


def get_inputs():
    return [
        torch.randn(2, 10, 32),
        torch.randn(2, 48, 8),
        torch.rand(10, 12) > 0.3,
        torch.randn(2, 1, 10, 12),
    ]


def get_init_inputs():
    return []
