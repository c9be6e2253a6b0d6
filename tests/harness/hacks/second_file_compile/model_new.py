# Hack 20 (a second Python file): torch.compile in a file of its own beside model_new.py, which
# only imports it.
import helper
import kforge_runtime as kr
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return helper.relu2(x)
