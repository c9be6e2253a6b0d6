"""check-task: is this task fit to be a task?

It must load and run, be deterministic, take a runtime inside a window, produce outputs that
depend on its inputs, and reject every null candidate: zeros, a constant, one of its inputs,
and the mean of the reference output.
"""

from __future__ import annotations

from typing import Any

import torch

from kforge_harness import compare, inputs, timing
from kforge_harness.envinfo import env_info
from kforge_harness.judge import device_for, make_reference, reference_outputs
from kforge_harness.task import TaskError, load_task

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
    path: str, backend: str, window_ms: tuple[float, float] | None = None, seed: int = 1234
) -> dict[str, Any]:
    """Returns the verdict object: ``fit``, ``reasons`` and the measurements behind them."""
    verdict: dict[str, Any] = {"fit": False, "reasons": [], "env": env_info(backend)}
    reasons = verdict["reasons"]
    lo, hi = window_ms or WINDOWS_MS[backend]
    verdict["window_ms"] = [lo, hi]
    try:
        task = load_task(path, backend)
        device = device_for(backend)
        model, _ = make_reference(task, device, seed)
        draws = [inputs.draw(task, k, seed + i, device) for i, k in enumerate(["task", "normal", "task"])]
        refs = [reference_outputs(model, d) for d in draws]
        again = reference_outputs(model, draws[0])
    except TaskError as e:
        reasons.append(str(e))
        return verdict
    except Exception as e:  # noqa: BLE001 - the task may raise anything
        reasons.append(f"the task raised: {type(e).__name__}: {e}")
        return verdict
    verdict["task_sha256"] = task.sha256

    if not all(isinstance(r, torch.Tensor) for r in compare.flatten(refs[0])):
        reasons.append("the output is not a tensor or a tuple of tensors")
    if not compare.compare(again, refs[0], task.tolerance)["pass"]:
        reasons.append("not deterministic: the same inputs gave different outputs")
    if not inputs.all_finite(refs[0]):
        reasons.append("the output on the task's own inputs is not finite")
    if compare.compare(refs[2], refs[0], task.tolerance)["pass"]:
        reasons.append("the output does not depend on the inputs")

    failed_nulls = []
    for name in _nulls(refs[0], draws[0]):
        passes = True
        for d, r in zip(draws, refs):
            null = _nulls(r, d).get(name)
            if null is None or not compare.compare(null, compare.flatten(r), task.tolerance)["pass"]:
                passes = False
                break
        if passes:
            failed_nulls.append(name)
    verdict["null_candidates_passing"] = failed_nulls
    if failed_nulls:
        reasons.append(f"null candidates pass: {', '.join(failed_nulls)}")

    policy = timing.Policy(budget_s=1.0, min_reps=5, max_reps=200, target_spread=0.05)
    with torch.no_grad():
        t = timing.measure(model, [draws[0]], device, policy)
    verdict["eager_ms"] = t["median_ms"]
    if not lo <= t["median_ms"] <= hi:
        reasons.append(f"eager time {t['median_ms']:.3f} ms is outside the window [{lo}, {hi}] ms")
    verdict["fit"] = not reasons
    return verdict
