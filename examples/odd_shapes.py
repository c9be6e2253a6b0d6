"""Extra input shapes for the example tasks, used by check_examples.py and check_examples_cuda.py.

The tasks declare one size per backend; these shapes check that a candidate reads its sizes from
the tensors (no hard-coded shapes) and handles what its fast paths exclude: lengths that are not
a multiple of 4, rows longer than a register-cached row, tiny tensors, and inputs whose first
element is not 16-byte aligned (a contiguous view one element into a buffer). Sizes fixed by the
module's parameters (hidden size, in_features, in_channels) are read from the task's inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

Shapes = list[tuple[int, ...]]

# task name -> function of the task's own input shapes -> list of input-shape lists
SHAPES: dict[str, Callable[[list[torch.Size]], list[Shapes]]] = {
    "gelu": lambda b: [[(3, 1001)], [(2, 64)]],
    "softmax_rows": lambda b: [[(5, 1001)], [(3, 40000)], [(7, 12)], [(4, 4096)]],
    "log_softmax_rows": lambda b: [[(5, 1001)], [(3, 40000)], [(7, 12)], [(4, 4096)]],
    "layer_norm": lambda b: [[(3, 5, b[0][-1])], [(1, 1, b[0][-1])]],
    "rms_norm": lambda b: [[(3, 5, b[0][-1])], [(1, 1, b[0][-1])]],
    "sum_dim": lambda b: [[(3, 37, 101)], [(2, 5, 1)], [(2, 300, 8)]],
    "mean_dim_tanh": lambda b: [[(3, 5, 1001)], [(2, 3, 8)]],
    "matmul": lambda b: [[(123, 77), (77, 45)], [(1, 300), (300, 1)]],
    "linear_bias_relu": lambda b: [[(7, b[0][-1])], [(2, 3, b[0][-1])]],
    "conv_bn_relu": lambda b: [[(2, b[0][1], 17, 19)], [(1, b[0][1], 8, 8)]],
    "silu_residual": lambda b: [[(3, 1001), (3, 1001)], [(5, 4), (5, 4)]],
    "max_pool2d": lambda b: [[(2, 3, 17, 23)], [(2, 3, 16, 16)], [(1, 1, 2, 2)]],
}


def _tensor(
    shape: tuple[int, ...], device: torch.device, g: torch.Generator, misaligned: bool
) -> torch.Tensor:
    n = math.prod(shape)
    if not misaligned:
        return torch.randn(shape, device=device, generator=g) * 2.0
    # Contiguous, but its first element sits 4 bytes past the allocation's (aligned) start.
    return (torch.randn(n + 1, device=device, generator=g) * 2.0)[1:].view(shape)


def odd_inputs(task_name: str, base: list[torch.Tensor], device: torch.device) -> Iterator[tuple[str, list]]:
    """(label, inputs) for each extra shape list, once aligned and once misaligned."""
    make = SHAPES.get(task_name)
    if make is None:
        return
    g = torch.Generator(device=device).manual_seed(4321)
    for shapes in make([t.shape for t in base]):
        for misaligned in (False, True):
            label = "x".join(str(d) for d in shapes[0]) + ("+1" if misaligned else "")
            yield label, [_tensor(s, device, g, misaligned) for s in shapes]
