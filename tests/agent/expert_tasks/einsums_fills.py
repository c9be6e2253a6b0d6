"""einsums that are not one matrix product (expert_plan_contract.c): a row-wise dot, an output
in another order, three operands, an index summed within one operand, an outer product, a
transpose of one operand, an implicit output, a full contraction to a scalar; tensors made from
sizes in forward() (ones, zeros, full, eye, new_ones, new_full; float32 and bool) and logic on
booleans (~, &, |, ^, logical_not, logical_and)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, z):
        a = torch.einsum("ij,ij->i", x, y)
        b = torch.einsum("bij,bjk->bki", x.view(4, 6, 8), z)
        c = torch.einsum("ij,jk,kl->il", x[:8], z[0], y.T[:5])
        d = torch.einsum("bij->j", x.view(4, 6, 8)) + torch.einsum("i,j->ij", a[:3], a[3:7]).sum()
        e = torch.einsum("ij,jk", x, y.T) + torch.einsum("bij,bij->", x.view(4, 6, 8), y.view(4, 6, 8))
        f = torch.einsum("ji", x)
        T = x.size(0)
        keep = torch.ones(T, T, device=x.device, dtype=torch.bool).triu(1)
        g = e.masked_fill(~keep, 0.0) + torch.eye(T, device=x.device) * 2.0
        pos = x > 0
        h = torch.where(pos & (y < 0) | ~(x > 1) ^ torch.logical_not(y > 0.5), x, y)
        m = torch.logical_and(x, y > 0) + torch.full((T, 8), 0.25, device=x.device)
        n = x.new_ones(T, 8) * torch.zeros(8, device=x.device) + x.new_full((1, 8), 3.0)
        return torch.cat([a, b.flatten(), c.flatten(), d, g.flatten()]), torch.cat([f.T, h, m, n], dim=1)


def get_inputs():
    return [torch.randn(24, 8), torch.randn(24, 8), torch.randn(4, 8, 5)]


def get_init_inputs():
    return []
