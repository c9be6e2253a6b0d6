"""A forward() that keeps state between calls, as KernelBench's VanillaRNN does: its hidden state,
drawn in __init__, moved to the input's device, then replaced by a value computed from the input
that the next call reads."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return [16, 32, 4]
