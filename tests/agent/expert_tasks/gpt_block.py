"""A GPT-2-style pre-norm block in small, written as minGPT writes it (KernelBench level 3, 43 and
44): q, k and v split from one projection and moved head-first by view and transpose, scores
masked by a slice of a registered lower-triangular buffer (masked_fill where it is 0), softmax,
heads put back by transpose, contiguous and view; the feed-forward part a lambda over a
ModuleDict with the tanh form of GELU (x ** 3 written as torch.pow)"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, width, heads, longest):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.heads, self.width = heads, width
        self.register_buffer("causal", torch.tril(torch.ones(longest, longest)).view(1, 1, longest, longest))

    def forward(self, x):
        n, t, w = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        q = q.view(n, t, self.heads, w // self.heads).transpose(1, 2)
        k = k.view(n, t, self.heads, w // self.heads).transpose(1, 2)
        v = v.view(n, t, self.heads, w // self.heads).transpose(1, 2)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        s = s.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.out(y.transpose(1, 2).contiguous().view(n, t, w))


class Model(nn.Module):
    def __init__(self, width, heads, longest):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads, longest)
        self.mlp = nn.ModuleDict({"fc": nn.Linear(width, 4 * width), "proj": nn.Linear(4 * width, width)})
        mlp = self.mlp

        def gelu_tanh(u):
            return 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * torch.pow(u, 3.0))))

        self.feed = lambda u: mlp["proj"](gelu_tanh(mlp["fc"](u)))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.feed(self.ln2(x))


def get_inputs():
    return [torch.rand(2, 16, 64)]


def get_init_inputs():
    return [64, 4, 32]
