"""A SwiGLU feed-forward block: one projection to twice the hidden width, chunked into a gate
and a value, silu(gate) * value, and the projection back (4096 tokens, 1024 -> 2 x 2816 ->
1024)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CPU = os.environ.get("KFORGE_BACKEND", "cuda") == "cpu"
TOKENS, DIM, HIDDEN = (64, 32, 48) if CPU else (4096, 1024, 2816)
# Two fp32 GEMMs with K = 1024 and 2816 in sequence: as examples/tasks/matmul.py, sums in
# different orders differ by more than 1e-4.
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        gate, value = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * value)


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
