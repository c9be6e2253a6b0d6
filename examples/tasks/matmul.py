"""Dense fp32 matrix multiplication C = A @ B with A of shape (M, K) and B of shape (K, N)."""

import os

import torch
import torch.nn as nn

if os.environ.get("KFORGE_BACKEND", "cuda") == "cpu":
    M, K, N = 768, 768, 768  # 2.25 MiB per operand, 0.9 GFLOP
else:
    M, K, N = 4096, 4096, 4096  # 137 GFLOP

# fp32 GEMM rounding grows with K and with the inputs' magnitude. Measured against the exact
# product, in |err| / (1 + |exact|), eager fp32 itself is off by 2e-4..5e-4 (randn * 3) and
# 7e-4..2.4e-3 (Cauchy clipped to +-50) for K = 768..4096, so two correct fp32 GEMMs that sum in
# different orders do not agree to 1e-4. 1e-2 passes any fp32 order and still fails TF32 or
# fp16 inputs, which are off by 2.6e-2 (K = 768) to 5.7e-2 (K = 4096) on plain randn inputs.
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
