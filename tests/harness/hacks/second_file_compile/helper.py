# The work, in a second file of the candidate's, which model_new.py imports.
import torch


@torch.compile
def relu2(x):
    return torch.relu(x) * 2.0
