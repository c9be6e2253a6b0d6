"""The main job (until the service exists): evaluate every example candidate on its task.

Uses the cuda backend when a GPU is visible and the cpu backend otherwise, runs the harness's
``evaluate`` on each example, and prints a table of statuses, times, speedups and rewards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"


def evaluate(task: Path, cand: Path, backend: str, extra: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HARNESS))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kforge_harness",
            "evaluate",
            "--task",
            str(task),
            "--candidate",
            str(cand),
            "--backend",
            backend,
            *extra,
        ],
        cwd=str(HARNESS),
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines:
        return {"status": "harness_failed", "message": p.stderr.strip().splitlines()[-1:] or [""]}
    return json.loads(lines[-1])


def fmt_ms(t: dict | None) -> str:
    return f"{t['median_ms']:.3f}" if t and t.get("median_ms") is not None else "-"


def fmt_x(x: float | None) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["cuda", "cpu"])
    ap.add_argument("--tasks", nargs="*", help="names of example tasks (default: all)")
    ap.add_argument("--budget", default="1.0", help="timing budget per subject, seconds")
    ap.add_argument("--json", help="also write every verdict to this file")
    ap.add_argument(
        "--cached-baselines",
        action="store_true",
        help="reuse cached eager/compile times (faster; by default they are timed in this run, "
        "beside the candidate, so that a baseline from a differently loaded machine never counts)",
    )
    args = ap.parse_args()
    backend = args.backend
    if backend is None:
        import torch

        backend = "cuda" if torch.cuda.is_available() else "cpu"
    names = args.tasks or sorted(p.stem for p in (ROOT / "examples" / "tasks").glob("*.py"))
    print(f"kforge: evaluating {len(names)} example candidates on the {backend} backend", flush=True)
    header = (
        f"{'task':<18} {'status':<14} {'reward':>6} {'eager ms':>10} {'compile ms':>10} "
        f"{'kforge ms':>10} {'vs eager':>9} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    failures = 0
    for name in names:
        cand = ROOT / "examples" / "candidates" / name / backend
        extra = ["--budget", args.budget] + ([] if args.cached_baselines else ["--no-baseline-cache"])
        v = evaluate(ROOT / "examples" / "tasks" / f"{name}.py", cand, backend, extra)
        results[name] = v
        t = v.get("timing") or {}
        print(
            f"{name:<18} {v['status']:<14} {v.get('reward', -1):>6} {fmt_ms(t.get('eager')):>10} "
            f"{fmt_ms(t.get('compile')):>10} {fmt_ms(t.get('candidate')):>10} "
            f"{fmt_x(v.get('speedup_vs_eager')):>9} {fmt_x(v.get('speedup_vs_compile')):>10}",
            flush=True,
        )
        if v["status"] != "ok":
            failures += 1
            print(f"    {v.get('message', '')!s:.300}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    env = next((v.get("env") for v in results.values() if v.get("env")), {})
    device = env.get("gpu") or env.get("cpu")
    print(f"\n{len(names) - failures}/{len(names)} correct on {device} (torch {env.get('torch')})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
