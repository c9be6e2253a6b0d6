# Hack 1d (torch fallback, past the C++ guard): gc finds the guard, which is turned off, then on again.
import gc

import kforge_runtime as kr
import torch
import torch.nn as nn


def _live_guard():
    for obj in gc.get_objects():
        if type(obj).__name__ == "NativeGuard" and getattr(obj, "_token", 0) > 0:
            return obj
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        g = _live_guard()
        if g is None:
            return torch.relu(x) * 2.0
        g._lib.leave(g._token)
        try:
            return torch.relu(x) * 2.0
        finally:
            g._token = g._lib.enter()  # on again, with a fresh token the guard's own leave will not match
