"""baseline: eager and torch.compile times of a task, from the cache or measured now."""

from __future__ import annotations

import random
import secrets
from typing import Any

from kforge_harness import baseline, inputs, timing
from kforge_harness.envinfo import env_info
from kforge_harness.judge import _set_precision, device_for, make_reference
from kforge_harness.task import TaskError, load_task


def run_baseline(
    task_path: str, backend: str, use_cache: bool, budget_s: float, n_sets: int = 3, with_compile: bool = True
) -> dict[str, Any]:
    env = env_info(backend)
    try:
        task = load_task(task_path, backend)
        device = device_for(backend)
    except TaskError as e:
        return {"error": str(e), "env": env}
    _set_precision(task.allow_tf32)
    path = baseline.cache_path(task.sha256, env)
    if use_cache:
        cached = baseline.load_cached(path)
        if cached is not None and not (with_compile and cached.get("compile_error") == "not requested"):
            return {"task_sha256": task.sha256, "cached": True, "env": env, **cached}
    model, _ = make_reference(task, device, secrets.randbits(62))
    sets = [inputs.draw(task, "task", secrets.randbits(62), device) for _ in range(n_sets)]
    policy = timing.Policy(budget_s=budget_s)
    rng = random.Random(secrets.randbits(62))
    scales = [rng.uniform(0.5, 2.0) for _ in range(policy.max_reps)]
    data = baseline.measure_baselines(model, sets, device, policy, with_compile, scales=scales)
    baseline.store(path, data)
    return {"task_sha256": task.sha256, "cached": False, "env": env, **data}
