"""Where a candidate's timed call goes, outside the judge (on a GPU, one process, nothing else
running): for each task, the expert's plan (variant 0) is built and timed with the judge's own
timing routine (kforge_harness.timing.measure) four ways, against eager in the same run:

  eager      the task's Model
  bare       ModelNew.forward, no guard
  guarded    ModelNew.forward under the runner's ComputeGuard, as the judge times it
  kernels    the kernels' launches alone (forward's tensors made once, outside the timer),
             so kernels - eager is what the kernels lose and bare - kernels the host's share

  python bench/host_gap.py [task ...]   (needs build/agent-probes/expert_probe)

Prints one line per task and way (median ms of the events); the same as JSON lines to
$OUT/host_gap.jsonl when OUT is set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workers" / "harness"))
BACKEND = os.environ.setdefault("KFORGE_BACKEND", "cuda")  # cpu: the same on this machine's CPU

import torch  # noqa: E402
from kforge_harness import build, candidate, guard, timing  # noqa: E402

PROBE = ROOT / "build" / "agent-probes" / "expert_probe"


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plan(task: Path, work: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workers" / "harness"))
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", "inspect", "--task", str(task), "--backend", BACKEND],
        cwd=str(ROOT / "workers" / "harness"), env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    graph = work / "graph.json"
    graph.write_text(p.stdout.strip().splitlines()[-1])
    cand = work / "cand"
    p = subprocess.run([str(PROBE), BACKEND, str(graph), str(cand), "0"], capture_output=True, text=True)
    if p.returncode != 0 or not json.loads(p.stdout)["ok"]:
        raise RuntimeError(f"{task.stem}: no plan: {p.stdout[-500:]} {p.stderr[-500:]}")
    return cand


class Recorder:
    """Runs forward once, recording each native call's arguments, then replays the calls."""

    def __init__(self, model) -> None:
        self.calls: list[tuple[object, tuple]] = []
        self.model = model

    def record(self, inputs: list) -> None:
        for k in [v for v in vars(self.model).values() if hasattr(v, "_functions")]:
            orig = type(k).__getattr__

            def spy(kself, name, _orig=orig):
                fn = _orig(kself, name)
                rec = self.calls

                def call(*args):
                    rec.append((fn, args))
                    return fn(*args)

                return call

            type(k).__getattr__ = spy
            try:
                k._functions.clear()
                with torch.no_grad():
                    self.keep = self.model(*inputs)
            finally:
                type(k).__getattr__ = orig
                k._functions.clear()

    def replay(self, *inputs) -> None:
        for fn, args in self.calls:
            fn(*args)


def time_task(name: str, dev: torch.device, policy: timing.Policy) -> dict:
    task_path = ROOT / "examples" / "tasks" / f"{name}.py"
    with tempfile.TemporaryDirectory() as tmp:
        cand = plan(task_path, Path(tmp))
        lib = build.build_native(candidate.detect(str(cand), BACKEND), BACKEND).lib
        os.environ["KFORGE_KERNEL_LIB"] = lib
        task = load_module(task_path, f"task_{name}")
        torch.manual_seed(0)
        ref = task.Model(*task.get_init_inputs()).to(dev)  # train mode, as the judge calls it
        new = load_module(cand / "model_new.py", f"cand_{name}").ModelNew(*task.get_init_inputs())
        new = new.to(dev)
        new.load_state_dict(ref.state_dict(), strict=False)
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        rec = Recorder(new)
        rec.record(inputs)

        def guarded(*xs):
            with guard.ComputeGuard():
                return new(*xs)

        ways = {"eager": ref, "bare": new, "guarded": guarded, "kernels": rec.replay}
        row: dict = {"task": name}
        with torch.no_grad():
            for way, fn in ways.items():
                row[way] = round(timing.measure(fn, [inputs], dev, policy)["median_ms"], 4)
    row["host_ms"] = round(row["guarded"] - row["kernels"], 4)
    row["guard_ms"] = round(row["guarded"] - row["bare"], 4)
    return row


def main() -> int:
    names = sys.argv[1:] or ["leaky_relu", "gelu", "scale_bias_relu", "batch_norm1d_relu", "matmul"]
    dev = torch.device("cuda" if BACKEND == "cuda" else "cpu")
    policy = timing.Policy(budget_s=2.0, min_reps=20, max_reps=400, target_spread=0.005)
    out_path = Path(os.environ["OUT"]) / "host_gap.jsonl" if os.environ.get("OUT") else None
    for name in names:
        row = time_task(name, dev, policy)
        print(json.dumps(row), flush=True)
        if out_path:
            with open(out_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
