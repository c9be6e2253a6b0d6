"""nn.TransformerEncoder (training mode): inspect traces its layers as what they compute. The
second encoder is in eval mode and given a key padding mask, where PyTorch's nested-tensor path
writes zeros at padded positions: it stays one call."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, 0.0), 2)
        layer = nn.TransformerEncoderLayer(16, 2, 32, 0.0, batch_first=True)
        self.fast = nn.TransformerEncoder(layer, 1).eval()

    def forward(self, x, pad):
        return self.enc(x).sum() + self.fast(x.transpose(0, 1), src_key_padding_mask=pad).sum()


def get_inputs():
    return [torch.randn(5, 3, 16), torch.arange(5).expand(3, 5) >= 4]


def get_init_inputs():
    return []
