"""Two builds of the expert's planner side by side on this machine's CPU: each task's plan
(variant 0) from probe A and from probe B, built by the harness and timed in one process with
eager in the same run (median of the calls after a warm-up, wall clock, no judge), each output
checked against eager's at the judge's fp32 tolerance.

  python bench/probe_ab.py --a OLD/agent-probes/expert_probe [--b build/agent-probes/expert_probe]
                           [--calls 15] task ...

A probe of an older commit: `git worktree add /tmp/wt REV`, `cp -a build /tmp/old`, then
`make -C /tmp/wt/lib BUILD=/tmp/old` and `make -C /tmp/wt/workers BUILD=/tmp/old`. Tasks come from
examples/tasks, bench/tasks_heldout or bench/tasks_extra, at their cpu sizes. Prints one JSON line
per task (ms, and the speedups over eager)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "workers" / "harness"
DIRS = [ROOT / "examples" / "tasks", ROOT / "bench" / "tasks_heldout", ROOT / "bench" / "tasks_extra"]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def candidate(task: Path, probe: str, work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cpu")
    p = subprocess.run([sys.executable, "-m", "kforge_harness", "inspect", "--no-jail", "--task", str(task), "--backend", "cpu"],
                       cwd=str(HARNESS), env=env, capture_output=True, text=True, check=True)  # fmt: skip
    (work / "graph.json").write_text(p.stdout.strip().splitlines()[-1])
    subprocess.run(
        [probe, "cpu", str(work / "graph.json"), str(work / "cand"), "0"], check=True, capture_output=True
    )
    return work / "cand"


def median_ms(fn, xs, calls: int) -> float:
    import torch

    with torch.no_grad():
        for _ in range(3):
            fn(*xs)
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            fn(*xs)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="probe A (the older build)")
    ap.add_argument("--b", default=str(ROOT / "build" / "agent-probes" / "expert_probe"), help="probe B")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("tasks", nargs="+")
    args = ap.parse_args()
    os.environ["KFORGE_BACKEND"] = "cpu"
    sys.path.insert(0, str(HARNESS))
    import torch
    from kforge_harness.build import build_native
    from kforge_harness.candidate import detect

    work = Path(tempfile.mkdtemp(prefix="kforge-ab-"))
    for name in args.tasks:
        task = next((d / f"{name}.py" for d in DIRS if (d / f"{name}.py").exists()), None)
        if task is None:
            sys.exit(f"no task {name} in {', '.join(str(d) for d in DIRS)}")
        mod = load(task, f"ab_task_{name}")
        torch.manual_seed(0)
        ref = mod.Model(*mod.get_init_inputs())
        xs = mod.get_inputs()
        with torch.no_grad():
            want = ref(*xs)
        row = {"task": name, "eager_ms": median_ms(ref, xs, args.calls)}
        for tag, probe in (("a", args.a), ("b", args.b)):
            cand = candidate(task, probe, work / f"{name}-{tag}")
            os.environ["KFORGE_KERNEL_LIB"] = build_native(detect(str(cand), "cpu"), "cpu").lib
            model = load(cand / "model_new.py", f"ab_cand_{name}_{tag}").ModelNew(*mod.get_init_inputs())
            model.load_state_dict(ref.state_dict(), strict=False)
            with torch.no_grad():
                got = model(*xs)
            row[f"{tag}_correct"] = bool(torch.allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True))
            row[f"{tag}_ms"] = median_ms(model, xs, args.calls)
            row[f"{tag}_vs_eager"] = row["eager_ms"] / row[f"{tag}_ms"]
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
