"""The operator graph of a task (``python -m kforge_harness inspect``), made once per task source,
backend and harness, and kept on disk (build/test-cache/graphs) for every test process: each
inspect starts a Python with PyTorch and the task's own process (seconds), and the expert's
tests, its sanitizer run and the xdist workers of one run plan the same tasks. The key holds
the task's source, the backend and a digest of the harness's sources and of requirements.txt,
so a change to either makes new graphs; a graph is written whole (a rename) under a lock, so a
process never reads half of one nor makes one that another is making."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()
CACHE = BUILD / "test-cache" / "graphs"


@functools.lru_cache(maxsize=1)
def _harness_digest() -> str:
    h = hashlib.sha256()
    for f in sorted((HARNESS / "kforge_harness").rglob("*.py")) + [ROOT / "requirements.txt"]:
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def inspect(task: Path, backend: str) -> str:
    """The graph's JSON text of ``task`` for ``backend``, made by inspect when no process has
    made it yet. A failure of inspect fails the caller's assertion with its stderr."""
    key = hashlib.sha256(
        task.read_bytes() + b"\0" + backend.encode() + b"\0" + _harness_digest().encode()
    ).hexdigest()
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"{key}.json"
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out.read_text()
        env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND=backend)
        cmd = [sys.executable, "-m", "kforge_harness", "inspect", "--no-jail", "--task", str(task)]
        p = subprocess.run(
            [*cmd, "--backend", backend],
            cwd=str(HARNESS),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, f"inspect {task} ({backend}):\n{p.stderr[-3000:]}"
        text = p.stdout.strip().splitlines()[-1]
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.rename(out)
        return text


def graph_file(task: Path, backend: str, folder: Path, name: str | None = None) -> Path:
    """``inspect``'s graph written to FOLDER/NAME (default TASK.BACKEND.graph.json)."""
    path = folder / (name or f"{task.stem}.{backend}.graph.json")
    path.write_text(inspect(task, backend))
    return path
