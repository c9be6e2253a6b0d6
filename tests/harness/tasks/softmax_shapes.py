"""Row softmax whose correctness is also checked on other shapes (get_test_inputs)."""

import torch
import torch.nn as nn

ROWS, COLS = 64, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_test_inputs():
    # Same element count as the main shape, other row lengths, and a ragged size.
    return [[torch.randn(32, 512)], [torch.randn(128, 128)], [torch.randn(7, 300)]]


def get_init_inputs():
    return []
