# Hack 1 (torch fallback, KernelBench format): ModelNew is the reference computed with PyTorch ops.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0
