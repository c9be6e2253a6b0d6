# Hack 1c (torch fallback, hidden from the C++ guard): PyTorch ops with the guard's dispatch key excluded.
import kforge_runtime as kr
import torch
import torch.nn as nn

_C = torch._C
# The key the native guard includes: not in Python's enum by name, but one can be made from its number.
_KEYS = _C.DispatchKeySet(_C.DispatchKey(int(_C.DispatchKey.FuncTorchDynamicLayerFrontMode) + 2))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        y = torch.empty_like(x)
        self.k.relu2(x, y, x.numel())  # a real launch, so the call counter moves
        with _C._ExcludeDispatchKeyGuard(_KEYS):  # the guard's fallback no longer sees the ops below
            return torch.relu(x) * 2.0
