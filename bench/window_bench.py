"""The judge's windows (kforge_harness.windows) on example candidates: where an evaluation's wall
time goes, and how the judge's time of a call compares with the subject's own.

    python bench/window_bench.py --backend cuda [--jail PATH] [--runs 2] [TASK ...]

For each task with a hand-written candidate (examples/candidates/TASK/BACKEND), ``evaluate`` runs
``--runs`` times with the baselines cached after the first; the table has the last run's:

* wall seconds, and the phases (seconds from the judge's start: runner ready, verified, timed,
  baselines);
* the candidate's and eager's time (the judge's: window less overhead), their own (CUDA events
  or host clock around the call alone), the window's median and the null call's overhead;
* ``judged``: the share of the wall time spent inside the candidate's timed windows (the
  timed calls times their median window).

The rows go to ``--json`` as well.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"


def evaluate(task: str, backend: str, extra: list[str]) -> tuple[dict, float]:
    cand = ROOT / "examples" / "candidates" / task / backend
    cmd = [sys.executable, "-m", "kforge_harness", "evaluate", "--task", str(ROOT / "examples" / "tasks" / f"{task}.py"),
           "--candidate", str(cand), "--backend", backend, *extra]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(HARNESS))
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.monotonic() - t0
    try:
        return json.loads(p.stdout), wall
    except ValueError:
        return {"status": "harness_error", "message": p.stderr[-800:]}, wall


def row(task: str, v: dict, wall: float) -> dict:
    t = v.get("timing") or {}
    c, e = t.get("candidate") or {}, t.get("eager") or {}
    ph = v.get("phases") or {}
    calls = (c.get("trials") or 0) + (t.get("warmup") or 0)
    judged = (c.get("window_median_ms") or 0) * (t.get("verified_calls") or calls) / 1000.0
    return {
        "task": task,
        "status": v.get("status"),
        "message": (v.get("message") or "")[:120],
        "flags": v.get("flags"),
        "wall_s": round(wall, 2),
        "ready_s": ph.get("runner_ready"),
        "verified_s": ph.get("verified"),
        "timed_s": ph.get("timed"),
        "baselines_s": ph.get("baselines"),
        "cand_ms": c.get("median_ms"),
        "cand_own_ms": c.get("own_median_ms"),
        "cand_window_ms": c.get("window_median_ms"),
        "overhead_ms": c.get("overhead_ms"),
        "runner_path_ms": (t.get("overheads_ms") or {}).get("runner_path"),
        "task_path_ms": (t.get("overheads_ms") or {}).get("task_path"),
        "output_copy_ms": (t.get("overheads_ms") or {}).get("output_copy"),
        "put_ms": c.get("put_median_ms"),
        "handler_ms": c.get("handler_median_ms"),
        "switch_ms": c.get("switch_median_ms"),
        "host_ms": c.get("host_median_ms"),
        "tail_ms": c.get("tail_median_ms"),
        "eager_switch_ms": e.get("switch_median_ms"),
        "eager_handler_ms": e.get("handler_median_ms"),
        "eager_ms": e.get("median_ms"),
        "eager_own_ms": e.get("own_median_ms"),
        "eager_put_ms": e.get("put_median_ms"),
        "spread": c.get("spread"),
        "trials": c.get("trials"),
        "verified_calls": t.get("verified_calls"),
        "speedup": v.get("speedup_vs_eager"),
        "judged_share": round(judged / wall, 3) if wall else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--jail")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--budget", default="1.0")
    ap.add_argument("--json")
    ap.add_argument("tasks", nargs="*")
    a = ap.parse_args()
    tasks = a.tasks or sorted(
        p.parent.name for p in (ROOT / "examples" / "candidates").glob(f"*/{a.backend}") if p.is_dir()
    )
    extra = ["--budget", a.budget, "--no-compile"]
    extra += ["--jail", a.jail, "--gpu", "0"] if a.jail else ["--no-jail"]
    rows = []
    for task in tasks:
        for _ in range(a.runs):
            v, wall = evaluate(task, a.backend, extra)
        r = row(task, v, wall)
        rows.append(r)
        keys = ("status", "wall_s", "cand_ms", "cand_own_ms", "cand_window_ms", "overhead_ms", "runner_path_ms", "task_path_ms", "output_copy_ms", "put_ms",
                "handler_ms", "switch_ms", "host_ms", "tail_ms", "eager_ms", "eager_own_ms", "eager_put_ms",
                "eager_switch_ms", "eager_handler_ms", "speedup", "judged_share")  # fmt: skip
        print(task, " ".join(f"{k}={r[k]:.4g}" if isinstance(r[k], float) else f"{k}={r[k]}" for k in keys),
              r["message"] if r["status"] != "ok" else "", flush=True)  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
