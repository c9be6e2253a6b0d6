"""Where a candidate's timed call goes, outside the judge (on a GPU, one process, nothing else
running): for each task, the expert's plan (variant 0) is built and timed with the judge's own
timing routine (kforge_harness.timing.measure) several ways, against eager in the same run:

  eager      the task's Model
  bare       ModelNew.forward, no guard
  guarded    ModelNew.forward under the Python guard (ComputeGuard, a TorchDispatchMode)
  native     the same under the C++ guard (NativeGuard, build/libkforge-guard.so), the runner's
             default
  grad       native with autograd on (as the runner timed it up to the 24th session)
  kernels    the kernels' launches alone (forward's tensors made once, outside the timer),
             so kernels - eager is what the kernels lose and bare - kernels the host's share

then as the runner's own timed call (runner, runner_judged, runner_profiled: runner_ways; with
the native guard entered before the timer starts, runner_inline with it inside the timer as up
to the 24th session, and runner_python with the Python one), and then by the judge itself (`python
-m kforge_harness evaluate`, no torch.compile, the same candidate): with the runner outside the
jail (judge), the same with the Python guard (judge_python: KFORGE_GUARD_LIB empty), and inside
the jail (judge_jail, when build/kforge-jail exists), each with its host median.

  python bench/host_gap.py [task ...]   (examples/tasks, bench/tasks_extra or
                                        bench/tasks_heldout; needs
                                        build/agent-probes/expert_probe)

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
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workers" / "harness"))
BACKEND = os.environ.setdefault("KFORGE_BACKEND", "cuda")  # cpu: the same on this machine's CPU

import torch  # noqa: E402
from kforge_harness import build, candidate, guard, nativeguard, timing  # noqa: E402
from kforge_harness import runner as runnermod  # noqa: E402

PROBE = ROOT / "build" / "agent-probes" / "expert_probe"
JAIL = ROOT / "build" / "kforge-jail"
NATIVE, WHY_NOT = nativeguard.load(nativeguard.library_path(), guard.ALLOWED_OPS)


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plan(task: Path, work: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workers" / "harness"))
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", "inspect", "--no-jail", "--task", str(task), "--backend", BACKEND],
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


def runner_ways(new, task, inputs: list, dev: torch.device, policy: timing.Policy) -> dict:
    """The runner's guarded call (GuardedCall around the call, autograd off, as Runner.wcall
    makes it), in this process: over one input set; over three; and that again after a checked
    call under the profiler (Runner.run); and with the Python guard."""
    r = runnermod.Runner.__new__(runnermod.Runner)
    r.in_forward, r.foreign, r.model, r.native = False, [], new, NATIVE
    r.kernels = [v for v in vars(new).values() if hasattr(v, "_functions")]
    r.args = types.SimpleNamespace(format="native")

    def inline(*xs):  # the guard inside the timer
        return r._forward(list(xs))[0]

    flags: list[str] = []

    def wrap():
        return runnermod.GuardedCall(r, flags, grad=False)

    sets = [inputs] + [
        [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()] for _ in range(2)
    ]
    row = {"runner_inline": timing.measure(inline, [inputs], dev, policy)["median_ms"]}
    row["runner"] = timing.measure(new, [inputs], dev, policy, wrap=wrap)["median_ms"]
    row["runner_sets"] = timing.measure(new, sets, dev, policy, wrap=wrap)["median_ms"]
    r._profiled_forward(inputs)
    row["runner_profiled"] = timing.measure(new, sets, dev, policy, wrap=wrap)["median_ms"]
    r.native = None
    row["runner_python"] = timing.measure(new, sets, dev, policy, wrap=wrap)["median_ms"]
    assert not flags, flags
    return {k: round(v, 4) for k, v in row.items()}


def judge_ways(dev: torch.device) -> list[tuple[str, list[str], dict[str, str]]]:
    ways = [("judge", ["--no-jail"], {}), ("judge_python", ["--no-jail"], {nativeguard.ENV_PATH: ""})]
    if dev.type == "cuda" and JAIL.exists():
        ways.append(("judge_jail", ["--jail", str(JAIL), "--gpu", "0"], {}))
    return ways


def judge(task: Path, cand: Path, extra: list[str], extra_env: dict[str, str]) -> dict:
    """The candidate's and eager's medians as the judge's full evaluate measures them."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workers" / "harness"), KFORGE_JAIL_PREBUILT="1")
    env.update(extra_env)
    cmd = [sys.executable, "-m", "kforge_harness", "evaluate", "--task", str(task), "--candidate", str(cand)]
    cmd += ["--backend", BACKEND, "--no-compile", "--no-baseline-cache", "--budget", "2", *extra]
    p = subprocess.run(cmd, cwd=str(ROOT / "workers" / "harness"), env=env, capture_output=True, text=True)
    try:
        v = json.loads(p.stdout.strip().splitlines()[-1])
        t = v["timing"]
        return {
            "median_ms": round(t["candidate"]["median_ms"], 4),
            "host_median_ms": round(t["candidate"]["host_median_ms"], 4),
            "eager_ms": round(t["eager"]["median_ms"], 4),
            "guard": v["env"].get("guard"),
        }
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise RuntimeError(
            f"{task.stem}: the judge gave no timing ({e}): {p.stdout[-800:]} {p.stderr[-800:]}"
        ) from e


def time_task(name: str, dev: torch.device, policy: timing.Policy) -> dict:
    task_path = ROOT / "examples" / "tasks" / f"{name}.py"
    for folder in ("tasks_extra", "tasks_heldout"):
        if not task_path.exists():
            task_path = ROOT / "bench" / folder / f"{name}.py"
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

        def native(*xs):
            with guard.NativeGuard(NATIVE):
                return new(*xs)

        def native_grad(*xs):
            with torch.enable_grad(), guard.NativeGuard(NATIVE):
                return new(*xs)

        ways = {"eager": ref, "bare": new, "guarded": guarded, "native": native, "grad": native_grad}
        ways["kernels"] = rec.replay
        row: dict = {"task": name}
        with torch.no_grad():
            for way, fn in ways.items():
                row[way] = round(timing.measure(fn, [inputs], dev, policy)["median_ms"], 4)
        row.update(runner_ways(new, task, inputs, dev, policy))
        for way, extra, extra_env in judge_ways(dev):
            t = judge(task_path, cand, extra, extra_env)
            row[way] = t["median_ms"]
            row[way + "_host"] = t["host_median_ms"]
            row[way + "_eager"] = t["eager_ms"]
            row[way + "_guard"] = t["guard"]
    row["host_ms"] = round(row["guarded"] - row["kernels"], 4)
    row["guard_ms"] = round(row["guarded"] - row["bare"], 4)
    row["native_guard_ms"] = round(row["native"] - row["bare"], 4)
    return row


def main() -> int:
    names = sys.argv[1:] or ["leaky_relu", "gelu", "scale_bias_relu", "batch_norm1d_relu", "matmul"]
    dev = torch.device("cuda" if BACKEND == "cuda" else "cpu")
    if NATIVE is None:
        print(f"host_gap: no native guard ({WHY_NOT}); make build builds it", file=sys.stderr)
        return 1
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
