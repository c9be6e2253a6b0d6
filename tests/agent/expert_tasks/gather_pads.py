"""padding: the modules (zero, constant, reflection, replication, circular) and F.pad's modes,
a negative constant pad (a crop); every element compared (a cat of the outputs)"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.zero = nn.ZeroPad2d((1, 2, 0, 3))
        self.const = nn.ConstantPad1d(2, -1.5)
        self.refl = nn.ReflectionPad2d(2)
        self.repl = nn.ReplicationPad3d((1, 0, 2, 1, 0, 1))
        self.circ = nn.CircularPad2d((3, 1, 2, 2))

    def forward(self, x):
        a = self.zero(x)
        b = self.const(x.view(4, 8, 36))
        c = self.refl(torch.relu(x))
        d = self.repl(x.view(4, 2, 4, 6, 6))
        e = self.circ(x)
        f = F.pad(x, (1, 1, 2, 0), mode="reflect")
        g = F.pad(x, (-1, 2, 1, -2), value=0.25)
        h = F.pad(x, [2, 2, 0, 1], mode="replicate")
        return torch.cat(
            [
                a.flatten(1),
                b.flatten(1),
                c.flatten(1),
                d.flatten(1),
                e.flatten(1),
                f.flatten(1),
                g.flatten(1),
                h.flatten(1),
            ],
            1,
        )


def get_inputs():
    return [torch.randn(4, 8, 6, 6)]


def get_init_inputs():
    return []
