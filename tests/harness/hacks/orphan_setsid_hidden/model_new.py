# Hack 19 (processes outliving the evaluation, without a jail): at import, a grandchild that left
# the runner's session and process group sleeps on after the runner exits (its pid in a file the
# test reads). The names are hidden from the source scan.
import os
import time

import kforge_runtime as kr
import torch
import torch.nn as nn

_fork, _setsid = getattr(os, "fo" + "rk"), getattr(os, "set" + "sid")
PID_FILE = "/tmp/kforge-hack-orphan.pid"

if _fork() == 0:
    _setsid()
    if _fork() == 0:
        with open(PID_FILE, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())
        return y
