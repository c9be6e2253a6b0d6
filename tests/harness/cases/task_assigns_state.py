"""A forward that assigns to its module, as KernelBench's recurrent tasks do with their initial
states (``self.h0 = self.h0.to(x.device)``), around an nn.LSTM."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h0 = torch.randn(2, 4, 12)
        self.c0 = torch.randn(2, 4, 12)
        self.lstm = nn.LSTM(6, 12, 2, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.c0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(4, 5, 6)]


def get_init_inputs():
    return []
