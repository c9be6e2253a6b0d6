"""nn.MultiheadAttention with an attn_mask: a float [L, L] mask added to self-attention's
scores, a bool [L, S] mask on cross-attention (-inf where true, as PyTorch's module reads it),
and is_causal with need_weights=False (causal attention; the mask only a hint, its values
unread: here it masks nothing, so reading it would not be causal); a key padding mask [N, S]
alone, with a bool attn_mask, and with is_causal (which it turns off: the float mask is read)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4)
        self.cross = nn.MultiheadAttention(32, 8, batch_first=True)

    def forward(self, x, m, fm, bm, hint, pad):
        a, _ = self.attn(x, x, x, attn_mask=fm)
        b, _ = self.cross(x.transpose(0, 1), m, m, attn_mask=bm)
        c = self.attn(x, x, x, attn_mask=hint, is_causal=True, need_weights=False)[0]
        d, _ = self.cross(x.transpose(0, 1), m, m, key_padding_mask=pad)
        e, _ = self.cross(x.transpose(0, 1), m, m, attn_mask=bm, key_padding_mask=pad)
        t = x.transpose(0, 1)
        f = self.cross(t, m, m, attn_mask=bm, key_padding_mask=pad, is_causal=True, need_weights=False)[0]
        return torch.cat([a.flatten(), b.flatten(), c.flatten(), d.flatten(), e.flatten(), f.flatten()])


def get_inputs():
    bm = torch.rand(6, 10) > 0.5
    bm[:, 0] = False  # every query sees a key
    return [
        torch.randn(6, 3, 32),
        torch.randn(3, 10, 32),
        torch.randn(6, 6),
        bm,
        torch.zeros(6, 6, dtype=torch.bool),  # a hint whose values would mask nothing
        torch.arange(10).expand(3, 10) >= torch.tensor([[10], [7], [4]]),  # padding after 10, 7, 4 keys
    ]


def get_init_inputs():
    return []
