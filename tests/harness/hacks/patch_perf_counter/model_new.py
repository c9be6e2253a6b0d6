# Hack 12 (patching timers): time.perf_counter_ns and time.perf_counter run ten times slower, so calls look faster.
import time

import kforge_runtime as kr
import torch
import torch.nn as nn

_ns, _s = time.perf_counter_ns, time.perf_counter
time.perf_counter_ns = lambda: _ns() // 10
time.perf_counter = lambda: _s() / 10


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return y
