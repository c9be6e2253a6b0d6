"""LayerNorm over the last dimension of a (batch, seq, hidden) tensor, learned weight and bias, then exact GELU."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, SEQ, HIDDEN = 16, 128, 2048  # 16 MiB in
else:
    BATCH, SEQ, HIDDEN = 64, 2048, 4096  # 2 GiB in + 2 GiB out (eager makes 2 passes)


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        # Perturb the default affine (ones, zeros) so that a kernel ignoring it is caught.
        with torch.no_grad():
            self.ln.weight.add_(0.5 * torch.randn(hidden))
            self.ln.bias.add_(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.ln(x))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
