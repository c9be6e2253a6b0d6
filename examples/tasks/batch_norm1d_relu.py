"""BatchNorm1d in training mode (batch statistics) over a (batch, features) tensor, then ReLU."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    BATCH, FEATURES = 4096, 256  # 4 MiB in
else:
    # 2 GiB in + 2 GiB out. The batch (the reduced axis) is kept at 65536: fp32 rounding in the
    # batch statistics grows with its length, and heavy-tailed inputs bring it near 1e-4 beyond that.
    BATCH, FEATURES = 65536, 8192


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)
        # Perturb BatchNorm's default affine (ones, zeros) so that a kernel ignoring it is caught.
        with torch.no_grad():
            self.bn.weight.add_(0.5 * torch.randn(features))
            self.bn.bias.add_(0.5 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [FEATURES]
