"""Eager and torch.compile baselines, timed by the same routine as candidates, cached on disk.

The cache key is the task's source hash, the backend, the device, the driver and the torch,
timing and harness versions: a baseline is reused only where it would be measured the same.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kforge_harness import timing
from kforge_harness.build import cache_dir
from kforge_harness.envinfo import device_slug


def cache_path(task_sha: str, env: dict[str, Any]) -> str:
    parts = [
        task_sha[:24],
        env["backend"],
        device_slug(env),
        str(env.get("driver") or "nodrv"),
        env["torch"].replace("+", "-"),
        timing.TIMING_VERSION,
    ]
    d = os.path.join(cache_dir(), "baselines")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "_".join(parts) + ".json")


def load_cached(path: str) -> dict[str, Any] | None:
    """The cached baseline at ``path``, or None: none there, unreadable, or noisy (one stored
    before ``store`` kept noisy baselines out is measured again, and replaced when quiet)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) and "eager" in data and quiet(data) else None
    except (OSError, ValueError):
        return None


# The largest spread (interquartile range over median) of a cached baseline's timings. A baseline
# timed on a busy machine serves the verdict that measured it but is not cached: cached, it would
# stand for every later verdict of the task on this device (the main job's table once showed a
# 40 ms eager time, timed while tests ran on the same two cores, spread 0.56; quiet runs of the
# same task stay under 0.1).
MAX_CACHED_SPREAD = 0.25


def quiet(data: dict[str, Any]) -> bool:
    """Whether every timing in ``data`` (eager, and compile when measured) has a spread of at most
    MAX_CACHED_SPREAD."""
    for key in ("eager", "compile"):
        t = data.get(key)
        if t is None and key == "compile":
            continue
        spread = t.get("spread") if isinstance(t, dict) else None
        if not isinstance(spread, (int, float)) or not 0 <= spread <= MAX_CACHED_SPREAD:
            return False
    return True


def store(path: str, data: dict[str, Any]) -> bool:
    """Writes ``data`` to the cache at ``path`` when it is quiet (see above). Returns whether it did."""
    if not quiet(data):
        return False
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
    return True
