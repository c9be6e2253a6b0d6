# Hack 10 (background thread in C++, hidden from the native scan): honest during the checks, then a detached thread.
import kforge_runtime as kr
import torch
import torch.nn as nn

CHECK_CALLS = 6  # the correctness trials of a task without extra shapes


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()
        self.calls = 0
        self.in_flight = None  # the previous call's tensors stay alive until its worker is done

    def forward(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        # The native function first waits for the previous call's worker thread.
        self.k.relu2_maybe_async(x, y, x.numel(), int(self.calls <= CHECK_CALLS))
        self.in_flight = (x, y)
        return y
