"""baseline: eager and torch.compile times of a task, from the cache or measured now (in the
task's own process: kforge_harness.refrunner)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from kforge_harness import baseline, timing, windows
from kforge_harness.envinfo import env_info
from kforge_harness.judge import device_for
from kforge_harness.launch import Options
from kforge_harness.reference import Reference, TaskFailed, open_task, read_task


def run_baseline(
    task_path: str,
    backend: str,
    use_cache: bool,
    budget_s: float,
    with_compile: bool = True,
    opts: Options | None = None,
    ref: Reference | None = None,
) -> dict[str, Any]:
    """The baseline object (``eager``, ``compile``, ``cached``), or ``{"error": ...}`` when the
    task cannot be measured. ``opts``: how the task's process runs (jail, GPU, limits); ``ref``:
    a task's process of the caller's to measure in (it stays open), else one of its own."""
    env = env_info(backend)
    o = opts or Options(backend=backend)
    try:
        sha = hashlib.sha256(read_task(task_path)).hexdigest()
    except TaskFailed as e:
        return {"error": str(e), "env": env}
    path = baseline.cache_path(sha, env)
    if use_cache:
        cached = baseline.load_cached(path)
        if cached is not None and not (with_compile and cached.get("compile_error") == "not requested"):
            return {"task_sha256": sha, "cached": True, "env": env, **cached}
    own = ref is None
    try:
        device = device_for(backend)
        if ref is None:
            ref = open_task(task_path, o, secrets.randbits(62))
        ref.load(secrets.randbits(62), device)
        policy = timing.Policy(budget_s=budget_s)
        salt = secrets.randbits(62)
        data = windows.baselines(
            ref, device, policy, with_compile, lambda i: (salt + 7919 * (i + 3)) % (1 << 62), o.init_timeout
        )
    except TaskFailed as e:
        return {"error": f"task: {e}", "env": env}
    finally:
        if own and ref is not None:
            ref.close()
    baseline.store(path, data)
    return {"task_sha256": sha, "cached": False, "env": env, **data}
