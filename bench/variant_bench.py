"""variant_bench.py: the expert's kernel variants of a few tasks timed side by side on one GPU,
in one process, against eager and torch.compile measured in the same rounds.

    python bench/variant_bench.py --tasks rms_norm layer_norm [--variants 0 1 2] [--rounds 15]

`evaluate` judges one candidate per process, and runs taken minutes apart on a shared host drift
by 10 to 20% (bench/README.md); comparing variants of one kernel needs less than that. Here every
contestant of a task (each variant, eager, compile) is timed in turn within each round, each
round a CUDA-event timing of --calls back-to-back calls, so that drift hits them all alike; the
figure is the median over rounds; "alone" times single calls after a synchronize, as the judge
does, so the host's work before a call's first launch counts there. Each variant's output is checked against eager's (max abs and
relative error printed; the judge's full checks stay `evaluate`'s job).

Candidates are written by build/agent-probes/expert_probe (every kernel in the variant, a kernel
with fewer getting its last) and built by the harness's native build. KFORGE_PROBE_LIBS: a folder
of shared libraries the probe needs on a host without them (the bundle's kforge/lib).
Prints one markdown table; --json FILE also writes the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workers" / "harness"))

import torch  # noqa: E402
from kforge_harness import build, candidate, guard, inspect_graph, nativeguard, policy, timing  # noqa: E402
from kforge_harness import task as taskmod

PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_probe"


def write_candidate(graph: dict[str, Any], variant: int, where: Path) -> Path:
    """The expert's candidate of the graph in the variant, in a fresh folder under where."""
    g = where / "graph.json"
    g.write_text(json.dumps(graph))
    cand = where / f"v{variant}"
    env = dict(os.environ)
    if os.environ.get("KFORGE_PROBE_LIBS"):
        env["LD_LIBRARY_PATH"] = os.environ["KFORGE_PROBE_LIBS"]
    p = subprocess.run(
        [str(PROBE), "cuda", str(g), str(cand), str(variant)], capture_output=True, text=True, env=env
    )
    if p.returncode != 0 or not json.loads(p.stdout)["ok"]:
        raise RuntimeError(f"expert_probe: {p.stderr or p.stdout}")
    return cand


def load_new(cand: Path, lib: str, init: list[Any], ref: torch.nn.Module) -> torch.nn.Module:
    """ModelNew of the candidate on its library, holding the reference's parameters."""
    os.environ["KFORGE_KERNEL_LIB"] = lib
    spec = importlib.util.spec_from_file_location(f"model_new_{cand.name}_{id(lib)}", cand / "model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    new = mod.ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict(), strict=False)
    return new


def per_call_ms(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(streamed, alone): the mean of calls back to back (the host's work per call hidden behind
    the GPU's), and the median of calls each timed alone after a synchronize, as the judge times
    them (the host's work before the first launch counted)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    streamed = start.elapsed_time(end) / calls
    alone = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        alone.append(start.elapsed_time(end))
    return streamed, statistics.median(alone)


def kernel_ms(fn: Callable[[], Any], calls: int) -> tuple[float, int, str]:
    """(device ms, kernels, names) per call: the GPU time of the kernels a call launches, by
    torch.profiler, without the host's time around them; names: the longest kernels first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total, count, names = 0.0, 0, []
    for ev in prof.key_averages():
        us = getattr(ev, "self_device_time_total", None) or getattr(ev, "self_cuda_time_total", 0)
        if us <= 0 or ev.key.startswith(("cudaLaunch", "cudaDeviceSynchronize", "Memcpy", "Memset")):
            continue
        total += us
        count += ev.count
        names.append((us, f"{ev.key[:40]} {us / 1000 / calls:.3f} ms"))
    names.sort(reverse=True)
    return total / 1000 / calls, round(count / calls), "; ".join(n for _, n in names[:3])


def judge_ms(fn: Callable[[], Any], guarded: bool) -> float:
    """The judge's timing of fn (timing.measure: the cache flushed before each call, CUDA
    events around it), under the runner's compute guard when guarded (the C++ one where
    build/libkforge-guard.so loads, as in the runner), as a candidate is timed."""
    native = nativeguard.load(nativeguard.library_path(), guard.ALLOWED_OPS)[0]

    def call() -> Any:
        if not guarded:
            return fn()
        with guard.make_guard(native):
            return fn()

    pol = policy.Policy(budget_s=0.5)
    return timing.measure(call, [[]], torch.device("cuda"), pol)["median_ms"]


def build_all(names: list[str], variants: list[int], work: Path) -> dict[str, Any]:
    """Every task's candidate in every variant, built (nvcc runs in parallel): {name: {v:
    (folder, library)}}, or {name: the exception} for a task that could not be."""

    def one(name: str) -> Any:
        path = str(ROOT / "examples" / "tasks" / f"{name}.py")
        graph = inspect_graph.inspect_task(path, "cuda")
        (work / name).mkdir()
        cands = {v: write_candidate(graph, v, work / name) for v in variants}
        futs = {
            v: pool.submit(build.build_native, candidate.detect(str(c), "cuda"), "cuda")
            for v, c in cands.items()
        }
        return {v: (cands[v], futs[v]) for v in variants}

    out: dict[str, Any] = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for name in names:
            try:
                out[name] = one(name)
            except Exception as e:  # noqa: BLE001 - reported in the table
                out[name] = e
        for name, got in out.items():
            if isinstance(got, dict):
                try:
                    out[name] = {v: (c, f.result().lib) for v, (c, f) in got.items()}
                except Exception as e:  # noqa: BLE001
                    out[name] = e
    return out


def bench_task(
    name: str,
    built: dict[int, tuple[Path, str]],
    rounds: int,
    calls: int,
    kernels: bool = False,
    judge: bool = False,
) -> list[dict[str, Any]]:
    path = str(ROOT / "examples" / "tasks" / f"{name}.py")
    t = taskmod.load_task(path, "cuda")
    torch.manual_seed(0)
    init = t.get_init_inputs()
    ref = t.model_class()(*init).cuda()  # training mode, as the judge calls it (batch norm: batch statistics)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in t.get_inputs()]
    runs: dict[str, Callable[[], Any]] = {"eager": lambda: ref(*inputs)}
    compiled = torch.compile(ref)
    runs["compile"] = lambda: compiled(*inputs)
    with torch.no_grad():
        want = ref(*inputs)
        rows = {}
        for v, (cand, lib) in built.items():
            new = load_new(cand, lib, init, ref)
            got = new(*inputs)
            err = (got - want).abs().max().item()
            rel = err / max(want.abs().max().item(), 1e-30)
            runs[f"variant {v}"] = lambda new=new: new(*inputs)
            rows[f"variant {v}"] = {"max_abs_err": err, "max_rel_err": rel}
        times: dict[str, list[float]] = {k: [] for k in runs}
        alone: dict[str, list[float]] = {k: [] for k in runs}
        for fn in runs.values():  # warm-up: compile's first call compiles
            fn()
        for _ in range(rounds):
            for k, fn in runs.items():
                streamed, one = per_call_ms(fn, calls)
                times[k].append(streamed)
                alone[k].append(one)
        dev = {k: kernel_ms(fn, calls) for k, fn in runs.items()} if kernels else {}
        # the judge's way: baselines as they are, a candidate's call under the guard (and, to
        # see what the guard costs, without)
        jt = {}
        for k, fn in runs.items() if judge else []:
            jt[k] = {"judge_ms": judge_ms(fn, k.startswith("variant"))}
            if k.startswith("variant"):
                jt[k]["judge_unguarded_ms"] = judge_ms(fn, False)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_alone = {k: statistics.median(v) for k, v in alone.items()}
    out = []
    for k in runs:
        out.append(
            {
                "task": name,
                "contestant": k,
                "ms": med[k],
                "alone_ms": med_alone[k],
                "alone_vs_compile": med_alone["compile"] / med_alone[k],
                "spread": (max(times[k]) - min(times[k])) / med[k],
                "vs_eager": med["eager"] / med[k],
                "vs_compile": med["compile"] / med[k],
                **rows.get(k, {}),
                **(
                    {"kernel_ms": dev[k][0], "kernels": dev[k][1], "kernel_names": dev[k][2]}
                    if k in dev
                    else {}
                ),
                **jt.get(k, {}),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--variants", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--kernels", action="store_true", help="also each call's kernel time (profiler)")
    ap.add_argument("--judge", action="store_true", help="also the judge's timing (flush, guard)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("variant_bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"Device: {torch.cuda.get_device_name()}; median of {args.rounds} rounds of {args.calls} calls.\n")
    print(
        "| task | contestant | ms streamed | max-min over median | vs eager | vs compile | ms alone | "
        "alone vs compile | max abs err | max rel err |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kforge-variants-") as work:
        built = build_all(args.tasks, args.variants, Path(work))
        for name in args.tasks:
            try:
                if isinstance(built[name], Exception):
                    raise built[name]
                got = bench_task(name, built[name], args.rounds, args.calls, args.kernels, args.judge)
            except Exception as e:  # noqa: BLE001 - one task's failure is reported, the rest run
                print(f"| {name} | failed: {type(e).__name__}: {str(e)[:200]} | | | | | | | | |", flush=True)
                continue
            for r in got:
                err = f"{r['max_abs_err']:.2e} | {r['max_rel_err']:.2e}" if "max_abs_err" in r else "- | -"
                print(
                    f"| {r['task']} | {r['contestant']} | {r['ms']:.3f} | {r['spread']:.1%} | "
                    f"{r['vs_eager']:.2f}x | {r['vs_compile']:.2f}x | {r['alone_ms']:.3f} | "
                    f"{r['alone_vs_compile']:.2f}x | {err} |",
                    flush=True,
                )
            for r in got if args.judge else []:
                unguarded = (
                    f", {r['judge_unguarded_ms']:.3f} ms unguarded" if "judge_unguarded_ms" in r else ""
                )
                print(
                    f"|   | {r['contestant']}: judge-style {r['judge_ms']:.3f} ms{unguarded} | | | | | | | | |"
                )
            for r in got if args.kernels else []:
                print(
                    f"|   | {r['contestant']}: kernels {r['kernel_ms']:.3f} ms in {r['kernels']} "
                    f"({r['kernel_names']}); host and launch {r['alone_ms'] - r['kernel_ms']:.3f} ms alone "
                    "| | | | | | | | |",
                    flush=True,
                )
            rows += got
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
