# Hack 22 (PyTorch in another process, started from forward): each call forks a child that computes
# with PyTorch (here it only shows that the fork is refused). The names are hidden from the source
# scan.
import os

import kforge_runtime as kr
import torch
import torch.nn as nn

_fork = getattr(os, "fo" + "rk")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.touch(x, x.numel())
        pid = _fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return y
