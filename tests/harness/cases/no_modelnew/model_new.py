import torch


class Something(torch.nn.Module):
    pass
