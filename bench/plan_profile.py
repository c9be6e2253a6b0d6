"""Where an expert plan's time goes: each kernel of the plan timed alone (CUDA events around
each ``self.k.<fn>`` call of ModelNew.forward), beside the whole forward and eager PyTorch.

    python3 bench/plan_profile.py TASK.py [TASK.py ...] [--variant V] [--reps N] [--kernels N]

For each task: `inspect`, the expert's plan (build/agent-probes/expert_probe, variant V), its
kernels built as the harness builds them, ModelNew loaded with the task's weights, then N timed
calls. Prints one table per task: each kernel's median ms and share, the forward's median and
eager's; with --kernels N, the GPU's own record (Kineto) of eager's and the plan's kernels: their
time in all against the wall time, and the N largest. A diagnostic for the GPU host (no judge, no jail, no guard): the judge's figures are
tests/agent/test_expert_gpu.py's. KFORGE_PROBE_LIBS: a folder of shared libraries the probe
needs (the bundle's kforge/lib)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "workers" / "harness"
sys.path.insert(0, str(HARNESS))

import kforge_runtime  # noqa: E402
import torch  # noqa: E402
from kforge_harness.build import native_command  # noqa: E402
from kforge_harness.candidate import Candidate  # noqa: E402


def plan(task: Path, work: Path, variant: int) -> Path:
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cuda")
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", "inspect", "--no-jail", "--task", str(task), "--backend", "cuda"],
        cwd=str(HARNESS), env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    graph = work / "graph.json"
    graph.write_text(p.stdout.strip().splitlines()[-1])
    probe_env = dict(os.environ)
    if os.environ.get("KFORGE_PROBE_LIBS"):
        probe_env["LD_LIBRARY_PATH"] = os.environ["KFORGE_PROBE_LIBS"]
    cand = work / "cand"
    probe = ROOT / "build" / "agent-probes" / "expert_probe"
    out = subprocess.run(
        [str(probe), "cuda", str(graph), str(cand), str(variant)],
        capture_output=True, text=True, env=probe_env, check=True,
    )  # fmt: skip
    if not json.loads(out.stdout)["ok"]:
        raise RuntimeError(f"{task.name}: not planned: {json.loads(out.stdout)['detail']}")
    kernels = sorted(str(k) for k in (cand / "kernels").glob("*.cu"))
    lib = cand / "libkernels.so"
    c = Candidate(str(cand), "native", str(cand / "model_new.py"), kernels)
    subprocess.run(native_command(c, "cuda", str(lib)), check=True)
    os.environ[kforge_runtime.ENV_LIBRARY] = str(lib)
    return cand


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Timed:
    """Kernels whose calls are each timed by CUDA events (per function name)."""

    def __init__(self, k: kforge_runtime.Kernels) -> None:
        self._k = k
        self.events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = {}

    def __getattr__(self, name: str):
        fn = getattr(self._k, name)

        def call(*args):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            rc = fn(*args)
            b.record()
            self.events.setdefault(name, []).append((a, b))
            return rc

        return call


def median_ms(f, reps: int) -> float:
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def device_kernels(f, reps: int) -> tuple[float, int, list[tuple[str, int, float]]]:
    """The GPU's own record of f's kernels (Kineto, CUPTI): device microseconds per call in all,
    kernels per call, and per kernel name (count and microseconds per call), largest first. A
    forward whose wall time is well above its kernels' time waits on the host."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as kineto

    f()
    torch.cuda.synchronize()
    with kineto(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            f()
        torch.cuda.synchronize()
    per: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per.setdefault(e.name, []).append(e.time_range.elapsed_us())
    rows = sorted(((n, len(t) // reps, sum(t) / reps) for n, t in per.items()), key=lambda r: -r[2])
    return sum(r[2] for r in rows), sum(len(t) for t in per.values()) // reps, rows


def print_kernels(label: str, wall_ms: float, f, reps: int, top: int) -> None:
    total, count, rows = device_kernels(f, reps)
    print(f"{label}: {count} kernels, {total / 1000:.3f} ms of kernels a call (wall {wall_ms:.3f} ms)")
    for name, n, us in rows[:top]:
        print(f"    {us:9.1f} us  x{n:<4d} {name[:100]}")


def profile(task: Path, variant: int, reps: int, kernels: int) -> None:
    os.environ["KFORGE_BACKEND"] = "cuda"
    with tempfile.TemporaryDirectory() as d:
        cand = plan(task, Path(d), variant)
        t = load_module(task, "task_" + task.stem)
        model = t.Model(*t.get_init_inputs()).cuda()
        new = load_module(cand / "model_new.py", "new_" + task.stem).ModelNew(*t.get_init_inputs()).cuda()
        new.load_state_dict(model.state_dict())
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in t.get_inputs()]
        with torch.no_grad():
            want, got = model(*inputs), new(*inputs)
            err = (got.double() - want.double()).abs().max().item()
            eager = median_ms(lambda: model(*inputs), reps)
            whole = median_ms(lambda: new(*inputs), reps)
            timed = Timed(new.k)
            new.k = timed
            for _ in range(reps):
                new(*inputs)
            torch.cuda.synchronize()
            if kernels:
                print(f"\n{task.stem}, as the GPU records them (--kernels):")
                print_kernels("  eager", eager, lambda: model(*inputs), reps, kernels)
                new.k = timed._k
                print_kernels("  kforge", whole, lambda: new(*inputs), reps, kernels)
    print(f"\n{task.stem}: forward {whole:.3f} ms, eager {eager:.3f} ms, max abs error {err:.3g}")
    print("| kernel | calls per forward | median ms | share of forward |\n| --- | ---: | ---: | ---: |")
    for name, evs in timed.events.items():
        ms = statistics.median(a.elapsed_time(b) for a, b in evs)
        print(f"| {name} | {len(evs) // reps} | {ms:.3f} | {100 * ms / whole:.0f}% |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--variant", type=int, default=0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--kernels", type=int, default=0, help="also the N largest kernels of each, from Kineto")
    a = ap.parse_args()
    # as the judge times eager (a task's ALLOW_TF32 aside): PyTorch's default lets cuDNN's
    # convolutions use TF32, which the candidates may not
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for task in a.tasks:
        try:
            profile(task.resolve(), a.variant, a.reps, a.kernels)
        except Exception as e:  # one task's failure reported, the others still profiled
            print(f"\n{task.stem}: not profiled: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
