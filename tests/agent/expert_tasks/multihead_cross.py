"""nn.MultiheadAttention as cross-attention: a decoder's queries (L = 6) reading an encoder's
memory (S = 10) as key and value (one product for both), sequence-first; batch_first without
biases, with a key and a value that are different tensors (a product each)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cross = nn.MultiheadAttention(32, 4)
        self.cross_bf = nn.MultiheadAttention(32, 8, bias=False, batch_first=True)

    def forward(self, x, m):
        a, _ = self.cross(x, m, m)
        t = a.transpose(0, 1)
        mem = m.transpose(0, 1)
        b = self.cross_bf(t, mem, torch.tanh(mem), need_weights=False)[0]
        return torch.cat([a.flatten(), b.flatten()])


def get_inputs():
    return [torch.randn(6, 3, 32), torch.randn(10, 3, 32)]


def get_init_inputs():
    return []
