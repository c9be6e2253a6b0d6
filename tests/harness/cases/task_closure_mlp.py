"""A block whose feed-forward part is a function kept on the module (a lambda over a ModuleDict
of its layers, as minGPT writes it): its submodules are reached through the closure."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.ff = nn.ModuleDict({"up": nn.Linear(width, 2 * width), "down": nn.Linear(2 * width, width)})
        ff = self.ff

        def tanh_gelu(t):
            return 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3)))

        self.feed = lambda t: ff["down"](tanh_gelu(ff["up"](t)))

    def forward(self, x):
        return x + self.feed(self.norm(x))


def get_inputs():
    return [torch.randn(4, 10, 32)]


def get_init_inputs():
    return [32]
