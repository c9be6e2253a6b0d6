"""torch.arange in forward(): GPT's token and position embeddings (wpe(torch.arange(t)), a
slice of the weight's rows), a causal mask from comparing two views of an int64 arange, a float
arange scaled and broadcast, an arange whose step is computed from a size, torch.linspace, and
an int64 input of indices whose shape forward() reads (x.size())"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(100, 16)
        self.wpe = nn.Embedding(64, 16)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        causal = (pos[:, None] >= pos[None, :]).float()
        f = torch.arange(t, device=idx.device, dtype=torch.float32) * 0.5
        odd = self.wpe(torch.arange(1, 2 * t, 2, device=idx.device))
        ramp = torch.arange(1.0, 2.0, 1.0 / t, device=idx.device)
        lin = torch.linspace(-1.0, 1.0, t, device=idx.device)
        return x + f[:, None] + odd, causal + ramp + lin[:, None]


def get_inputs():
    return [torch.randint(0, 100, (4, 10))]


def get_init_inputs():
    return []
