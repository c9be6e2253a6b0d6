"""Native candidate for tasks/linear_bias_relu.py: GEMM with the bias and ReLU fused into its epilogue."""

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # values come from the task's state_dict
        self.k = kr.load()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, k = self.linear.weight.shape
        m = x.numel() // k
        y = x.new_empty((*x.shape[:-1], n))
        self.k.linear_bias_relu_f32(x, self.linear.weight, self.linear.bias, y, m, k, n)
        return y
