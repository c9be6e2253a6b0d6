"""Shared fixtures: paths, and the harness's cache kept in one directory per test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harnessargs import unjailed

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"
EXAMPLES = ROOT / "examples"


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# files whose tests share nothing beyond a test's own tmp_path: under `--dist loadgroup` (make
# test) their tests are spread over the workers one by one; every other file's tests run together
# on one worker (they share servers and stacks started once per file)
SPREAD = {"tests/agent/test_expert_codegen.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.relative_to(ROOT).as_posix()
        if path not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(name=path))
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (make test-gpu on the GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _log_verdict(args: tuple[str, ...], code: int, data: Any, stderr: str, wall_s: float) -> None:
    """With KFORGE_TEST_VERDICTS=FILE, appends one line per harness call (its arguments, exit code,
    status, flags and message), so a run cut off before pytest's report still says what failed."""
    path = os.environ.get("KFORGE_TEST_VERDICTS")
    if not path:
        return
    brief: dict[str, Any] = {"args": list(args), "exit": code, "wall_s": round(wall_s, 2)}
    if isinstance(data, dict):
        keys = ("status", "flags", "reward", "speedup_vs_eager", "speedup_vs_compile", "fit", "reasons")
        for key in keys + ("phases", "gpu_lock_wait_s"):
            if key in data:
                brief[key] = data[key]
        timing = data.get("timing") or {}
        brief["ms"] = {k: (timing.get(k) or {}).get("median_ms") for k in ("candidate", "eager", "compile")}
        brief["message"] = str(data.get("message", ""))[:600]
    else:
        brief["stderr"] = stderr[-600:]
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(brief) + "\n")


@pytest.fixture(scope="session")
def kforge_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build and baseline cache for the session (KFORGE_CACHE)."""
    return tmp_path_factory.mktemp("kforge-cache")


@pytest.fixture()
def harness(kforge_cache: Path):
    """Runs ``python -m kforge_harness ARGS`` and returns (exit code, parsed JSON, stderr)."""

    def run(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
        e = dict(os.environ)
        e["PYTHONPATH"] = str(HARNESS)
        e["KFORGE_CACHE"] = str(kforge_cache)
        e.update(env or {})
        t0 = time.monotonic()
        p = subprocess.run(
            [sys.executable, "-m", "kforge_harness", *unjailed(args)],
            cwd=str(HARNESS),
            env=e,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        data = json.loads(lines[-1]) if lines else None
        _log_verdict(args, p.returncode, data, p.stderr, time.monotonic() - t0)
        return p.returncode, data, p.stderr

    return run


@pytest.fixture()
def fake():
    """start(script) -> the handle of a running tests/fakellm (a scripted OpenAI-compatible
    server); every one started is closed after the test."""
    from fakellm.server import start_fake_llm

    handles = []

    def start(script: Any):
        _, handle = start_fake_llm(script)
        handles.append(handle)
        return handle

    yield start
    for h in handles:
        h.close()
