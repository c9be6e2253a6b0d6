"""check-task: is this task fit to be a task?

It must load and run, be deterministic, take a runtime inside a window, produce outputs that
depend on its inputs, and reject every null candidate: zeros, a constant, one of its inputs,
and the mean of the reference output. The task runs only in its own process
(kforge_harness.refrunner, jailed with ``--jail``); the verdict is reached here, on copies of
what it sends.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import torch

from kforge_harness import compare, inputs
from kforge_harness.envinfo import env_info
from kforge_harness.judge import device_for
from kforge_harness.launch import Options
from kforge_harness.reference import Reference, TaskFailed, open_task

WINDOWS_MS = {"cuda": (1.0, 100.0), "cpu": (0.1, 1000.0)}


def _nulls(ref: Any, args: list[Any]) -> dict[str, Any]:
    """Null candidates' outputs, shaped like ``ref`` (a tensor or a tuple of tensors)."""
    refs = compare.flatten(ref)
    out: dict[str, Any] = {}

    def like(fn: Any) -> list[Any]:
        return [fn(r) if isinstance(r, torch.Tensor) else r for r in refs]

    out["zeros"] = like(torch.zeros_like)
    out["ones"] = like(torch.ones_like)
    out["mean_of_reference"] = like(
        lambda r: torch.full_like(r, float(r.double().mean()) if r.dtype.is_floating_point else 0)
    )
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and len(refs) == 1 and isinstance(refs[0], torch.Tensor):
            if a.shape == refs[0].shape and a.dtype == refs[0].dtype:
                out[f"input_{i}"] = [a]
    return out


def check_task(
    path: str,
    backend: str,
    window_ms: tuple[float, float] | None = None,
    seed: int = 1234,
    opts: Options | None = None,
) -> dict[str, Any]:
    """Returns the verdict object: ``fit``, ``reasons`` and the measurements behind them.
    ``opts``: how the task's process runs (its jail, GPU, limits); the backend's defaults
    without one."""
    verdict: dict[str, Any] = {"fit": False, "reasons": [], "env": env_info(backend)}
    reasons = verdict["reasons"]
    lo, hi = window_ms or WINDOWS_MS[backend]
    verdict["window_ms"] = [lo, hi]
    o = opts or Options(backend=backend)
    ref: Reference | None = None
    try:
        device = device_for(backend)
        ref = open_task(path, o, secrets.randbits(62))
        verdict["task_sha256"] = ref.sha256
        meta = ref.load(seed, device)
        tol = meta["tolerance"]
        draws, refs = [], []
        for i, k in enumerate(["task", "normal", "task"]):
            d, r = ref.draw(f"d{i}", k, seed + i, device, forward=True)
            draws.append(d)
            refs.append(r)
        again = ref.outputs("d0", device)
        eager = _eager(ref)
    except TaskFailed as e:
        reasons.append(_reason(str(e)))
        return verdict
    finally:
        if ref is not None:
            ref.close()

    if not all(isinstance(r, torch.Tensor) for r in compare.flatten(refs[0])):
        reasons.append("the output is not a tensor or a tuple of tensors")
    if not compare.compare(again, refs[0], tol)["pass"]:
        reasons.append("not deterministic: the same inputs gave different outputs")
    if not inputs.all_finite(refs[0]):
        reasons.append("the output on the task's own inputs is not finite")
    if compare.compare(refs[2], refs[0], tol)["pass"]:
        reasons.append("the output does not depend on the inputs")

    failed_nulls = []
    for name in _nulls(refs[0], draws[0]):
        passes = True
        for d, r in zip(draws, refs):
            null = _nulls(r, d).get(name)
            if null is None or not compare.compare(null, compare.flatten(r), tol)["pass"]:
                passes = False
                break
        if passes:
            failed_nulls.append(name)
    verdict["null_candidates_passing"] = failed_nulls
    if failed_nulls:
        reasons.append(f"null candidates pass: {', '.join(failed_nulls)}")

    verdict["eager_ms"] = eager["median_ms"]
    if not lo <= eager["median_ms"] <= hi:
        reasons.append(f"eager time {eager['median_ms']:.3f} ms is outside the window [{lo}, {hi}] ms")
    verdict["fit"] = not reasons
    return verdict


def _eager(ref: Reference) -> dict[str, Any]:
    """The eager time of the task on its own inputs (slot d0), timed in its process."""
    policy = {"budget_s": 1.0, "min_reps": 5, "max_reps": 200, "target_spread": 0.05}
    t0 = time.monotonic()
    t = ref.eager("d0", policy, 120.0)
    if t["median_ms"] * t["trials"] / 1000.0 > (time.monotonic() - t0) * 1.05 + 0.01:
        raise TaskFailed("the task's eager times exceed the wall clock")
    return t


def _reason(message: str) -> str:
    """A failure of the task's process as check-task has always worded it."""
    for known in ("cannot read task", "task does not parse", "task raised while loading", "task defines no"):
        if message.startswith(known):
            return message
    return f"the task raised: {message}"
