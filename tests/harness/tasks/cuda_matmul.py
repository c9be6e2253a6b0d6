"""fp32 matrix multiplication C = A @ B of size 2048 (GPU hack tests). TF32 is not allowed."""

import torch
import torch.nn as nn

N = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
