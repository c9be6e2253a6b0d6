"""The recurrent cells: an LSTMCell run over three steps from states drawn in __init__ (its
(h, c) fed back), a GRUCell without a state, and an RNNCell with relu and no biases over an
unbatched input"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h0 = torch.randn(4, 12)
        self.c0 = torch.randn(4, 12)
        self.lstm = nn.LSTMCell(10, 12)
        self.gru = nn.GRUCell(12, 6)
        self.rnn = nn.RNNCell(10, 5, bias=False, nonlinearity="relu")

    def forward(self, x):
        h, c = self.h0.to(x.device), self.c0.to(x.device)
        for t in range(3):
            h, c = self.lstm(x[t], (h, c))
        g = self.gru(h)
        r = self.rnn(x[0, 0])
        return torch.cat([h.flatten(), c.flatten(), g.flatten(), r])


def get_inputs():
    return [torch.randn(3, 4, 10)]


def get_init_inputs():
    return []
