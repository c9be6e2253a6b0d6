"""A classifier's cross-entropy loss over a batch of logits (nn.CrossEntropyLoss: log-softmax
and the target's term per row, averaged; 32 MiB of logits, int64 class indices)."""

import os

import torch
import torch.nn as nn

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss()

    def forward(self, logits, targets):
        return self.loss(logits, targets)


def get_inputs():
    n, c = (64, 100) if CPU else (8192, 1000)
    return [torch.randn(n, c), torch.randint(0, c, (n,))]


def get_init_inputs():
    return []
