"""KernelBench's LSTM tasks in small: initial states drawn in __init__ (not owned by the module:
the candidate draws them again from the judge's seed), moved in forward() (c0 is h0 there, as
in KernelBench), a batch-first stacked LSTM, a linear layer on the last step, and both states;
a second LSTM started from the first's (h_n, c_n) passed whole"""

import torch
import torch.nn as nn

batch_size = 3


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super().__init__()
        self.h0 = torch.randn((num_layers, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers, batch_size, hidden_size))
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=0.0)
        self.fc = nn.Linear(hidden_size, output_size)
        self.dec = nn.LSTM(output_size, hidden_size, num_layers)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0.to(x.device)
        out, state = self.lstm(x, (self.h0, self.c0))
        y = self.fc(out[:, -1, :])
        d, _ = self.dec(y.unsqueeze(0), state)
        return torch.cat([y.flatten(), state[0].flatten(), state[1].flatten(), d.flatten()])


def get_inputs():
    return [torch.randn(batch_size, 7, 10)]


def get_init_inputs():
    return [10, 16, 3, 5]
