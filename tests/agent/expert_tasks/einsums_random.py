"""Twelve einsums drawn at random (seed 7) over 2 to 4 operands of indices a-f (sizes 2 to 6):
each operand a random subset in a random order, the output a random subset (empty: a scalar),
indices summed within one operand, repeated operands' subscripts; each contracted a pair at a
time (expert_plan_contract.c) and judged against torch.einsum"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(
        self,
        x0,
        x1,
        x2,
        x3,
        x4,
        x5,
        x6,
        x7,
        x8,
        x9,
        x10,
        x11,
        x12,
        x13,
        x14,
        x15,
        x16,
        x17,
        x18,
        x19,
        x20,
        x21,
        x22,
        x23,
        x24,
        x25,
        x26,
        x27,
        x28,
        x29,
        x30,
        x31,
        x32,
        x33,
        x34,
        x35,
    ):
        e0 = torch.einsum("da,e,c->adec", x0, x1, x2).flatten()
        e1 = torch.einsum("dabe,aefd->aefd", x3, x4).flatten()
        e2 = torch.einsum("cd,ea->deac", x5, x6).flatten()
        e3 = torch.einsum("ca,e,e,de->dce", x7, x8, x9, x10).flatten()
        e4 = torch.einsum("bfe,e,edc->dbe", x11, x12, x13).flatten()
        e5 = torch.einsum("bcfd,afcb,edf,a->da", x14, x15, x16, x17).flatten()
        e6 = torch.einsum("fed,fdc->", x18, x19).flatten()
        e7 = torch.einsum("bea,abcf,df->abd", x20, x21, x22).flatten()
        e8 = torch.einsum("bdc,cdba,b->b", x23, x24, x25).flatten()
        e9 = torch.einsum("ad,cf,b,ecfa->eadc", x26, x27, x28, x29).flatten()
        e10 = torch.einsum("dfea,fdae,b,bacd->", x30, x31, x32, x33).flatten()
        e11 = torch.einsum("e,ea->a", x34, x35).flatten()
        return torch.cat([e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11])


def get_inputs():
    return [
        torch.randn(2, 3),
        torch.randn(6),
        torch.randn(5),
        torch.randn(2, 3, 4, 6),
        torch.randn(3, 6, 3, 2),
        torch.randn(5, 2),
        torch.randn(6, 3),
        torch.randn(5, 3),
        torch.randn(6),
        torch.randn(6),
        torch.randn(2, 6),
        torch.randn(4, 3, 6),
        torch.randn(6),
        torch.randn(6, 2, 5),
        torch.randn(4, 5, 3, 2),
        torch.randn(3, 3, 5, 4),
        torch.randn(6, 2, 3),
        torch.randn(3),
        torch.randn(3, 6, 2),
        torch.randn(3, 2, 5),
        torch.randn(4, 6, 3),
        torch.randn(3, 4, 5, 3),
        torch.randn(2, 3),
        torch.randn(4, 2, 5),
        torch.randn(5, 2, 4, 3),
        torch.randn(4),
        torch.randn(3, 2),
        torch.randn(5, 3),
        torch.randn(4),
        torch.randn(6, 5, 3, 3),
        torch.randn(2, 3, 6, 3),
        torch.randn(3, 2, 3, 6),
        torch.randn(4),
        torch.randn(4, 3, 5, 2),
        torch.randn(6),
        torch.randn(6, 3),
    ]


def get_init_inputs():
    return []
