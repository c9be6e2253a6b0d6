"""An unfit task: the output is the input (x + 0), so returning the input passes it."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
