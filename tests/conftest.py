"""Shared fixtures: paths, and the harness's cache kept in one directory per test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"
EXAMPLES = ROOT / "examples"


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (make test-gpu on the GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
        p = subprocess.run(
            [sys.executable, "-m", "kforge_harness", *args],
            cwd=str(HARNESS),
            env=e,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        data = json.loads(lines[-1]) if lines else None
        return p.returncode, data, p.stderr

    return run
