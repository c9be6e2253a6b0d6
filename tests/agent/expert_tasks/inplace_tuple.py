"""In-place elementwise ops on tensors forward() made (a chain of them updates one tensor: what
read it before keeps the old value, what reads it after the new), addcmul, addcdiv and lerp,
atan2, hypot, copysign, logaddexp, frac, logit and expit, torch.linalg.norm as a vector norm and
as Frobenius's; returned as a tuple of tensors"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a = x * 2
        b = a + 1
        a.mul_(y).relu_()
        a.clamp_(min=-0.5, max=0.5)
        c = torch.sigmoid_(y * 1.0)
        d = (
            torch.addcmul(x, x, y, value=0.5)
            + torch.lerp(x, y, 0.3)
            + torch.addcdiv(x, y, x.abs() + 1, value=2)
        )
        d = d + x.lerp(y, torch.sigmoid(y)) + torch.atan2(x, y) + torch.hypot(x, y)
        d = d + torch.copysign(x, y) + torch.logaddexp(x, y) + torch.frac(x * 3)
        e = torch.logit(c, eps=1e-6) + torch.special.expit(y) + x / torch.linalg.norm(x, dim=-1, keepdim=True)
        return a, b + c, d, e * torch.linalg.norm(y)


def get_inputs():
    return [torch.randn(64, 48), torch.randn(64, 48)]


def get_init_inputs():
    return []
