"""Benchmarks of the harness. Prints a table; see README.md.

1. Build latency: one-kernel candidate through the native path (nvcc/g++ -shared) against the
   same kernel through torch.utils.cpp_extension.load_inline, both from cold caches.
2. Full ``evaluate`` of each example that has hand-written candidates, with baselines cached:
   median wall time of 3 runs, and the phases of the last (seconds from the judge's start);
   section ``evaluate`` with a runner started by each evaluation, ``pooled`` with runners taken
   warm from a runner pool (``python -m kforge_harness pool``, as the worker runs them).
3. Timing stability: one example candidate timed five times in one process: max/min of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"
sys.path.insert(0, str(HARNESS))

KERNEL = (Path(__file__).parent / "kernels" / "scale_kernel.inc").read_text()
NATIVE_CU = (
    KERNEL
    + """
extern "C" int scale_bias(const float* x, float* y, float a, float b, long long n) {
    scale_bias_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, a, b, n);
    return (int)cudaGetLastError();
}
"""
)
NATIVE_CPP = """#include <cstdint>
extern "C" int scale_bias(const float* x, float* y, float a, float b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + b;
    return 0;
}
"""
INLINE_CUDA_WRAPPER = """
torch::Tensor scale_bias(torch::Tensor x, double a, double b) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    scale_bias_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                          (float)a, (float)b, n);
    return y;
}
"""
INLINE_CPP = """#include <torch/extension.h>
torch::Tensor scale_bias(torch::Tensor x, double a, double b) {
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>(); float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = (float)a * in[i] + (float)b;
    return y;
}
"""


def build_latency(backend: str) -> dict:
    from kforge_harness import build
    from kforge_harness.candidate import detect

    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "cand"
        (cand / "kernels").mkdir(parents=True)
        (cand / "model_new.py").write_text("")
        ext = ".cu" if backend == "cuda" else ".cpp"
        (cand / "kernels" / f"scale{ext}").write_text(NATIVE_CU if backend == "cuda" else NATIVE_CPP)
        os.environ["KFORGE_CACHE"] = str(Path(tmp) / "cache")
        t0 = time.monotonic()
        build.build_native(detect(str(cand), backend), backend)
        native = time.monotonic() - t0
        t0 = time.monotonic()
        again = build.build_native(detect(str(cand), backend), backend)
        cached = time.monotonic() - t0
        assert again.cached
        script = (
            "import sys, torch.utils.cpp_extension as e\n"
            "kw = dict(name='kforge_bench_scale', functions=['scale_bias'], build_directory=sys.argv[1])\n"
            + (
                f"e.load_inline(cpp_sources='torch::Tensor scale_bias(torch::Tensor x, double a, double b);',"
                f" cuda_sources={json.dumps('#include <torch/extension.h>' + chr(10) + KERNEL + INLINE_CUDA_WRAPPER)}, **kw)\n"
                if backend == "cuda"
                else f"e.load_inline(cpp_sources={json.dumps(INLINE_CPP)}, **kw)\n"
            )
        )
        bdir = Path(tmp) / "ext"
        bdir.mkdir()
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", script, str(bdir)], check=True, capture_output=True)
        inline = time.monotonic() - t0
    return {"native_s": native, "native_cached_s": cached, "load_inline_s": inline, "ratio": inline / native}


def run_eval(task: Path, cand: Path, backend: str, extra: list[str]) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=str(HARNESS))
    t0 = time.monotonic()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kforge_harness",
            "evaluate",
            "--no-jail",
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
    wall = time.monotonic() - t0
    return wall, json.loads(p.stdout.strip().splitlines()[-1])


def eval_walls_pooled(backend: str, names: list[str], extra: list[str]) -> list[dict]:
    """``eval_walls`` with a runner pool of one, started here and stopped after."""
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "pool.sock")
        env = dict(os.environ, PYTHONPATH=str(HARNESS))
        argv = [
            sys.executable,
            "-m",
            "kforge_harness",
            "pool",
            "--sock",
            sock,
            "--backend",
            backend,
            "--no-jail",
        ]
        pool = subprocess.Popen(argv, cwd=str(HARNESS), env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert pool.stdout is not None
            pool.stdout.readline()  # listening
            return eval_walls(backend, names, extra + ["--pool", sock])
        finally:
            pool.terminate()
            pool.wait()


def eval_walls(backend: str, names: list[str], extra: list[str]) -> list[dict]:
    """One row per task, printed as it completes (a run cut off still reports its rows)."""
    rows = []
    print(
        f"{'task':<18} {'status':<10} {'wall s':>7} {'kforge ms':>10} {'vs eager':>9} {'vs compile':>10}  phases"
    )
    for name in names:
        task = ROOT / "examples" / "tasks" / f"{name}.py"
        cand = ROOT / "examples" / "candidates" / name / backend
        run_eval(task, cand, backend, extra)  # fills the build and baseline caches
        walls, verdicts = zip(*(run_eval(task, cand, backend, extra) for _ in range(3)))
        v = verdicts[-1]
        rows.append(
            {
                "task": name,
                "median_wall_s": statistics.median(walls),
                "status": v["status"],
                "baseline_cached": (v.get("timing") or {}).get("baseline_cached"),
                "speedup_vs_eager": v.get("speedup_vs_eager"),
                "speedup_vs_compile": v.get("speedup_vs_compile"),
                "candidate_ms": ((v.get("timing") or {}).get("candidate") or {}).get("median_ms"),
                "phases": v.get("phases"),
                "runner_start": [w.get("runner_start") for w in verdicts],
            }
        )
        r = rows[-1]
        se, sc = r["speedup_vs_eager"], r["speedup_vs_compile"]
        print(
            f"{r['task']:<18} {r['status']:<10} {r['median_wall_s']:>7.2f} {r['candidate_ms'] or 0:>10.3f} "
            f"{se or 0:>8.2f}x {sc or 0:>9.2f}x  {r['runner_start'][-1]} {json.dumps(r['phases'])}",
            flush=True,
        )
    return rows


def stability(backend: str, name: str) -> dict:
    import importlib.util

    import torch
    from kforge_harness import build, inputs, timing
    from kforge_harness.candidate import detect
    from kforge_harness.task import load_task

    cand = ROOT / "examples" / "candidates" / name / backend
    lib = build.build_native(detect(str(cand), backend), backend).lib
    os.environ["KFORGE_KERNEL_LIB"] = lib
    task = load_task(str(ROOT / "examples" / "tasks" / f"{name}.py"), backend)
    device = torch.device(backend)
    spec = importlib.util.spec_from_file_location("bench_cand", cand / "model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    init = task.get_init_inputs()
    model = mod.ModelNew(*init).to(device)
    sets = [inputs.to_device(task.get_inputs(), device) for _ in range(3)]
    medians = []
    with torch.no_grad():
        for _ in range(5):
            medians.append(timing.measure(model, sets, device, timing.Policy(budget_s=2.0))["median_ms"])
    return {"task": name, "medians_ms": medians, "max_over_min": max(medians) / min(medians)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["cuda", "cpu"])
    ap.add_argument("--tasks", nargs="*")
    ap.add_argument("--stability-task", default="softmax_rows")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument(
        "--no-compile",
        action="store_true",
        help="evaluate without the torch.compile baseline (quicker to fill the caches; the wall time "
        "with cached baselines is the same)",
    )
    ap.add_argument(
        "--only", default="build,stability,evaluate,pooled", help="comma-separated sections to run"
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    import torch

    backend = args.backend or ("cuda" if torch.cuda.is_available() else "cpu")
    # The example tasks with hand-written candidates (the others have none to evaluate).
    names = args.tasks or sorted(
        p.stem
        for p in (ROOT / "examples" / "tasks").glob("*.py")
        if (ROOT / "examples" / "candidates" / p.stem).is_dir()
    )
    out = {"backend": backend}
    print(f"== harness bench, backend {backend}", flush=True)
    if "build" in only:
        bl = build_latency(backend)
        out["build_latency"] = bl
        print(
            f"build latency: native {bl['native_s']:.2f} s (cached {bl['native_cached_s'] * 1000:.0f} ms), "
            f"load_inline {bl['load_inline_s']:.2f} s, ratio {bl['ratio']:.1f}x",
            flush=True,
        )
    if "stability" in only:
        st = stability(backend, args.stability_task)
        out["stability"] = st
        print(
            f"timing stability ({st['task']}): medians {', '.join(f'{m:.4f}' for m in st['medians_ms'])} ms, "
            f"max/min {st['max_over_min']:.4f}",
            flush=True,
        )
    if "evaluate" in only:
        out["evaluate"] = eval_walls(backend, names, ["--no-compile"] if args.no_compile else [])
    if "pooled" in only:
        print("-- evaluate, runners taken from a runner pool", flush=True)
        out["evaluate_pooled"] = eval_walls_pooled(
            backend, names, ["--no-compile"] if args.no_compile else []
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
