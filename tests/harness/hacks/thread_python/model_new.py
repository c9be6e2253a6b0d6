# Hack 10 (background thread): forward returns an empty output at once; a Python thread fills it in later.
import threading
import time

import kforge_runtime as kr
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def _fill(self, x, y):
        time.sleep(0.002)
        self.k.relu2(x, y, x.numel())

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.touch(x, x.numel())
        threading.Thread(target=self._fill, args=(x, y), daemon=True).start()
        return y
