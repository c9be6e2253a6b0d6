# Hack 17 (lower precision): on an fp32 task the kernel rounds every input to bfloat16 before computing.
import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2_bf16(x, y, x.numel())
        return y
