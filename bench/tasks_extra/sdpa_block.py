"""A pre-norm transformer block with F.scaled_dot_product_attention (causal): layer norm, the
q/k/v projection split into heads, attention, the output projection and residual, layer norm,
a GELU MLP and residual."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
B, T, C, NH = (2, 24, 32, 4) if CPU else (8, 512, 768, 12)


class Model(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)
        self.nh = nh

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        k = k.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        v = v.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(B, T, C)]


def get_init_inputs():
    return [C, NH]
