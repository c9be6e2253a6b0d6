"""nn.TransformerDecoder (post-norm layers and a final norm: self-attention, attention to the
memory, feed-forward), a batch-first pre-norm decoder layer with gelu, and nn.Transformer
(an encoder and a decoder), each traced by inspect as what it computes"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2, 32, 0.0), 2, norm=nn.LayerNorm(16))
        self.pre = nn.TransformerDecoderLayer(16, 4, 32, 0.0, "gelu", batch_first=True, norm_first=True)
        self.full = nn.Transformer(16, 2, 1, 1, 32, 0.0)

    def forward(self, x, m):
        a = self.dec(x, m)
        b = self.pre(x.transpose(0, 1), m.transpose(0, 1))
        return a + b.transpose(0, 1) + self.full(m, x)


def get_inputs():
    return [torch.randn(5, 3, 16), torch.randn(7, 3, 16)]


def get_init_inputs():
    return []
