# Hack 11 (tensor subclass): the correct values, but returned as a torch.Tensor subclass with __torch_function__.
import kforge_runtime as kr
import torch
import torch.nn as nn


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return y.as_subclass(Tagged)
