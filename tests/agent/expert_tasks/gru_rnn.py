"""GRU and RNN layers: a bidirectional two-layer GRU over a sequence-first input with an initial
state drawn in __init__ (moved to the input's device), a batch-first GRU without biases or a state over a transposed view of
its output, and a two-layer RNN with relu over an unbatched input (a strided slice)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h0 = torch.randn((4, 3, 12))
        self.gru = nn.GRU(10, 12, 2, bidirectional=True)
        self.plain = nn.GRU(24, 8, bias=False, batch_first=True)
        self.rnn = nn.RNN(10, 6, 2, nonlinearity="relu")

    def forward(self, x):
        out, hn = self.gru(x, self.h0.to(x.device))
        p, _ = self.plain(out.transpose(0, 1))
        r, rh = self.rnn(x[:, 0])
        return torch.cat([out.flatten(), hn.flatten(), p.flatten(), r.flatten(), rh.flatten()])


def get_inputs():
    return [torch.randn(7, 3, 10)]


def get_init_inputs():
    return []
