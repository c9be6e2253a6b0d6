# Hack 5 (inheriting the reference): a copy of the task's Model defined here, and ModelNew(Model).
import kforge_runtime as kr
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self.k = kr.load()
