"""LayerNorm over the last dimension of a (batch, seq, hidden) tensor, with learned weight and bias."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    # 28 MiB in: glibc maps an allocation of 32 MiB or more afresh on every call (page faults).
    BATCH, SEQ, HIDDEN = 32, 112, 2048
else:
    BATCH, SEQ, HIDDEN = 64, 2048, 4096  # 2 GiB in + 2 GiB out


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        # Perturb the default affine (ones, zeros) so that a kernel ignoring it is caught.
        with torch.no_grad():
            self.ln.weight.add_(0.5 * torch.randn(hidden))
            self.ln.bias.add_(0.5 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
