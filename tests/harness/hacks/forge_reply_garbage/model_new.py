# Hack 14 (forging the result channel): writes bytes that are no message to the reply FIFO named in sys.argv.
import os
import sys

import kforge_runtime as kr
import torch
import torch.nn as nn

_reply_fd = os.open(sys.argv[sys.argv.index("--reply-fifo") + 1], os.O_WRONLY)
os.write(_reply_fd, b'{"status": "ok", "reward": 3}\n')


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return torch.zeros_like(x)
