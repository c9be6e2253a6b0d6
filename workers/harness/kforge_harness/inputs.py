"""Fresh inputs from a secret seed, in several distributions.

The judge draws every input; the runner never learns the seed. Kinds of correctness trial:

* ``task``: the task's own ``get_inputs()``;
* ``normal``: floating inputs replaced by standard normal values (signed);
* ``wide``: uniform on [-4, 4];
* ``heavy_tailed``: Student-t with 2 degrees of freedom, clipped to +-1e3;
* ``same_buffers``: a fresh ``task`` draw written into the previous trial's input tensors,
  so a cache keyed on pointers, ids or versions returns stale results;
* ``shape:N``: the N-th input list of the task's ``get_test_inputs()``.

Integer and boolean inputs (indices, masks) always keep the task's own values.
"""

from __future__ import annotations

from typing import Any

import torch

from kforge_harness.task import Task

BASE_KINDS = ["task", "normal", "same_buffers", "wide", "heavy_tailed"]


def _map_floats(value: Any, fn: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return fn(value)
    if isinstance(value, list):
        return [_map_floats(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_map_floats(v, fn) for v in value)
    return value


def _heavy(t: torch.Tensor) -> torch.Tensor:
    """Student-t with 2 degrees of freedom: a normal over the root of a chi-square(2) / 2."""
    normal = torch.randn(t.shape, dtype=t.dtype, device=t.device)
    u = torch.rand(t.shape, dtype=torch.float32, device=t.device).clamp_min(1e-12)
    chi2_over_2 = -torch.log(u)  # chi-square with 2 degrees of freedom is 2 * Exp(1)
    return (normal / chi2_over_2.sqrt().clamp_min(1e-3).to(t.dtype)).clamp(-1e3, 1e3)


def draw(task: Task, kind: str, seed: int, device: torch.device | None = None) -> list[Any]:
    """Inputs of one trial, deterministic in ``seed`` (which the judge keeps secret), made on
    ``device``: the task's factory calls (torch.randn ...) allocate there directly."""
    dev = device or torch.device("cpu")
    torch.manual_seed(seed)
    with torch.device(dev):
        if kind.startswith("shape:"):
            variants = task.get_test_inputs()
            return to_device(list(variants[int(kind.split(":", 1)[1])]), dev)
        base = to_device(task.get_inputs(), dev)
        if kind in ("task", "same_buffers"):
            return base
        if kind == "normal":
            return _map_floats(base, lambda t: torch.randn(t.shape, dtype=t.dtype, device=dev))
        if kind == "wide":
            return _map_floats(base, lambda t: torch.empty_like(t).uniform_(-4, 4))
        if kind == "heavy_tailed":
            return _map_floats(base, _heavy)
    raise ValueError(f"unknown input kind {kind}")


def kinds_for(task: Task) -> list[str]:
    return BASE_KINDS + [f"shape:{i}" for i in range(len(task.get_test_inputs()))]


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(v, device) for v in value)
    return value


def nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    return 0


def all_finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not value.dtype.is_floating_point or bool(torch.isfinite(value).all())
    if isinstance(value, (list, tuple)):
        return all(all_finite(v) for v in value)
    return True
