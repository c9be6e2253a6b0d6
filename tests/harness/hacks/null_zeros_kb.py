# Hack 18 (null candidate, KernelBench format): returns zeros of the right shape.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
