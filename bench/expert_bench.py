"""expert_bench.py: how good the expert policy's kernels are, over every example task.

    python bench/expert_bench.py [--backend cpu|cuda] [--tasks a,b] [--out FILE] [--json FILE]
                                 [--kforge build/kforge] [--var DIR] [--port N]
                                 [--no-up --url URL --key KEY] [--budget S] [--no-compile]
                                 [--results FILE]

Runs the main job's code (scripts/run_examples.py: the local stack, one expert episode per
task of examples/tasks) and computes, per task and overall:

* **solved**: the episode's best candidate was correct at the final re-validation (share);
* **faster than eager / than torch.compile** by more than 5% (shares; an unsolved task is not
  faster), and the **geometric-mean speedup** over each (over the solved tasks; also over all
  tasks with an unsolved one counted as 1x, the reference it would fall back to);
* **the fraction of the hardware limit** the kernel reaches. The task's graph comes from
  ``python -m kforge_harness inspect --task T --backend B`` (the backend's sizes). A task with a
  matmul, linear, bmm or convolution node is compute-bound: its FLOPs (2*M*N*K for a product,
  2 * output elements * in_channels/groups * kernel elements for a convolution, from the graph's
  shapes and attrs) over the candidate's time, over the peak of a large fp32 ``torch.mm`` (TF32
  off) measured in the same run. Any other task is memory-bound: the bytes it must move (its
  inputs, outputs and parameters) over the candidate's time, over the bandwidth of a large
  device-to-device ``torch`` copy (read + write; CUDA events on cuda, the wall clock on cpu)
  measured in the same run (before and after the episodes, the best of several runs each: on a
  shared machine other work lowers a measurement). The eager reference's fraction is shown
  beside it.

Prints a markdown table (and writes it to --out); --json writes the rows, the peaks and the
summary. --results FILE reads the rows of an earlier ``run_examples.py --json FILE`` (or
``expert_bench.py --json FILE``) instead of running the episodes (the limits are measured now).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import run_examples as rx  # noqa: E402

DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

# ---- the task's work, from its graph (python -m kforge_harness inspect) ------------------------


def inspect(task: Path, backend: str) -> dict[str, Any]:
    """The harness's inspect of a task at the backend's sizes (runs on the meta device)."""
    env = dict(os.environ, PYTHONPATH=str(rx.HARNESS))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kforge_harness",
            "inspect",
            "--no-jail",
            "--task",
            str(task),
            "--backend",
            backend,
        ],
        cwd=str(rx.HARNESS),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or [f"inspect exited {p.returncode}"])[-1]}
    return json.loads(lines[-1])


def tensor_bytes(meta: Any) -> int:
    """Bytes of a tensor's {"shape", "dtype"} (or a list of them, or a parameter entry); 0 for
    anything else (a scalar argument)."""
    if isinstance(meta, list):
        return sum(tensor_bytes(m) for m in meta)
    if isinstance(meta, dict) and isinstance(meta.get("shape"), list):
        return math.prod(meta["shape"]) * DTYPE_BYTES.get(str(meta.get("dtype")), 4)
    return 0


def moved_bytes(info: dict[str, Any]) -> int:
    """The least a kernel must move: its inputs and outputs, and the module's parameters."""
    return (
        tensor_bytes(info.get("inputs"))
        + tensor_bytes(info.get("outputs"))
        + tensor_bytes(info.get("parameters"))
    )


MATMUL_FUNCS = {
    "torch.matmul",
    "torch.mm",
    "torch.bmm",
    "matmul",
    "mm",
    "bmm",
    "_operator.matmul",
    "operator.matmul",
    "torch.nn.functional.linear",
    "torch.addmm",
    "torch.baddbmm",
    "addmm",
    "baddbmm",
}
CONV_FUNCS = {
    "torch.conv1d",
    "torch.conv2d",
    "torch.conv3d",
    "torch.nn.functional.conv1d",
    "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d",
}
CONV_MODULES = {"Conv1d", "Conv2d", "Conv3d"}
CONVT_MODULES = {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}


def _shape(meta: Any) -> list[int] | None:
    if isinstance(meta, dict) and isinstance(meta.get("shape"), list):
        return meta["shape"]
    return None


def _numel(meta: Any) -> int:
    s = _shape(meta)
    return math.prod(s) if s is not None else 0


def _fx_flops(node: dict[str, Any], shapes: dict[str, Any]) -> int:
    out = node.get("output")
    target, op = str(node.get("target")), node.get("op")
    args = node.get("args") or []

    def arg_shape(i: int) -> list[int] | None:
        a = args[i] if i < len(args) else None
        return _shape(shapes.get(a["node"])) if isinstance(a, dict) and "node" in a else None

    if op == "call_module":
        mt, attrs = node.get("module_type"), node.get("attrs") or {}
        if mt == "Linear":
            return 2 * _numel(out) * int(attrs.get("in_features", 0))
        if mt in CONV_MODULES:
            k = math.prod(attrs.get("kernel_size") or [1])
            return 2 * _numel(out) * int(attrs.get("in_channels", 0)) // int(attrs.get("groups", 1)) * k
        if mt in CONVT_MODULES:
            x = arg_shape(0)
            k = math.prod(attrs.get("kernel_size") or [1])
            per = int(attrs.get("out_channels", 0)) // int(attrs.get("groups", 1)) * k
            return 2 * (math.prod(x) if x else 0) * per
        return 0
    if op not in ("call_function", "call_method"):
        return 0
    if target in MATMUL_FUNCS:
        first = 1 if target.endswith("addmm") or target.endswith("baddbmm") else 0
        a = arg_shape(first)
        if target.endswith("linear"):
            w = arg_shape(1)
            k = w[-1] if w else (a[-1] if a else 0)
        else:
            k = a[-1] if a else 0
        return 2 * max(_numel(out), 1) * k
    if target in CONV_FUNCS:
        w = arg_shape(1)
        return 2 * _numel(out) * (math.prod(w[1:]) if w else 0)
    return 0


def _aten_flops(node: dict[str, Any]) -> int:
    op, args, out = str(node.get("op")), node.get("args") or [], node.get("output")
    name = op.split(".")[1] if op.startswith("aten.") else op

    def shp(i: int) -> list[int] | None:
        return _shape(args[i]) if i < len(args) else None

    if name in ("mm", "bmm", "matmul"):
        a = shp(0)
        return 2 * _numel(out) * (a[-1] if a else 0)
    if name in ("addmm", "baddbmm"):
        a = shp(1)
        return 2 * _numel(out) * (a[-1] if a else 0)
    if name in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution"):
        w = shp(1)
        return 2 * _numel(out) * (math.prod(w[1:]) if w else 0)
    return 0


def graph_flops(info: dict[str, Any]) -> int:
    """The FLOPs of the graph's matmul, linear, bmm and convolution nodes (0: none)."""
    g = info.get("graph") or {}
    nodes = g.get("nodes") or []
    if g.get("source") == "aten":
        return sum(_aten_flops(n) for n in nodes)
    shapes = {n.get("name"): n.get("output") for n in nodes}
    return sum(_fx_flops(n, shapes) for n in nodes)


def task_work(info: dict[str, Any]) -> dict[str, Any]:
    """bound (compute or memory), FLOPs and bytes of one task's inspect."""
    if "error" in info:
        return {"bound": None, "flops": None, "bytes": None, "error": info["error"]}
    flops = graph_flops(info)
    return {"bound": "compute" if flops > 0 else "memory", "flops": flops, "bytes": moved_bytes(info)}


# ---- the hardware's limits, measured in the same run ------------------------------------------


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def measure_peaks(backend: str, copy_mib: int | None = None, mm_n: int | None = None) -> dict[str, Any]:
    """Bandwidth of a large device-to-device copy (bytes read + written per second) and the
    fp32 throughput of a large torch.mm with TF32 off (FLOP/s): the best of several runs."""
    import torch

    cuda = backend == "cuda"
    dev = torch.device("cuda" if cuda else "cpu")
    copy_mib = copy_mib or (2048 if cuda else 256)
    mm_n = mm_n or (8192 if cuda else 2048)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    def timed(fn: Any, reps: int) -> float:
        """Seconds per call of fn, the best of 5 runs of reps calls (a limit is what the device
        can do, so the run that other work on the machine disturbed least counts)."""
        fn()
        runs = []
        for _ in range(5):
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                s.record()
                for _ in range(reps):
                    fn()
                e.record()
                torch.cuda.synchronize()
                runs.append(s.elapsed_time(e) / 1000.0 / reps)
            else:
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn()
                runs.append((time.perf_counter() - t0) / reps)
        return min(runs)

    def copy_s() -> float:
        x = torch.randn(copy_mib * 2**20 // 4, device=dev)
        y = torch.empty_like(x)
        return timed(lambda: y.copy_(x), 10)

    def mm_s() -> float:
        a = torch.randn(mm_n, mm_n, device=dev)
        b = torch.randn(mm_n, mm_n, device=dev)
        return timed(lambda: torch.mm(a, b), 5 if cuda else 2)

    t_copy = copy_s()
    bandwidth = 2 * copy_mib * 2**20 / t_copy
    t_mm = mm_s()
    flops = 2 * mm_n**3 / t_mm
    if cuda:
        torch.cuda.empty_cache()
        device = torch.cuda.get_device_name(0)
    else:
        device = f"{cpu_name()}, {torch.get_num_threads()} threads"
    return {
        "backend": backend,
        "device": device,
        "bandwidth_Bps": bandwidth,
        "copy_MiB": copy_mib,
        "copy_ms": t_copy * 1e3,
        "peak_flops": flops,
        "mm_n": mm_n,
        "mm_ms": t_mm * 1e3,
    }


# ---- per task and overall --------------------------------------------------------------------


def best_peaks(a: dict[str, Any], b: dict[str, Any] | None) -> dict[str, Any]:
    """The higher bandwidth and the higher FLOP rate of two measurements (before and after the
    episodes: on a shared machine either may have met other work)."""
    if not b:
        return a
    out = dict(a)
    for rate, ms in (("bandwidth_Bps", "copy_ms"), ("peak_flops", "mm_ms")):
        if (b.get(rate) or 0) > (a.get(rate) or 0):
            out[rate], out[ms] = b[rate], b[ms]
    out["measured"] = [{k: m.get(k) for k in ("bandwidth_Bps", "peak_flops")} for m in (a, b)]
    return out


def limit_fraction(
    work: dict[str, Any], ms: float | None, peaks: dict[str, Any]
) -> tuple[float | None, float | None]:
    """(achieved rate, fraction of the limit) of a kernel taking ms: FLOP/s over peak_flops for a
    compute-bound task, bytes/s over bandwidth_Bps for a memory-bound one."""
    if not isinstance(ms, (int, float)) or ms <= 0 or work.get("bound") is None:
        return None, None
    if work["bound"] == "compute":
        rate, peak = work["flops"] / (ms / 1e3), peaks.get("peak_flops")
    else:
        rate, peak = work["bytes"] / (ms / 1e3), peaks.get("bandwidth_Bps")
    return rate, (rate / peak if peak else None)


def bench_row(row: dict[str, Any], work: dict[str, Any], peaks: dict[str, Any]) -> dict[str, Any]:
    """A row of run_examples (episode_row) with its work and its fractions of the limit. A
    candidate faster than the reference's FLOPs at the peak did less arithmetic than the
    reference (diag(a) @ b as a row scaling): its row is measured against the memory limit, the
    bound "memory (fewer FLOPs)", and so is eager's. A matrix product past the fp32 peak ran on
    the tensor cores with split operands (expert_gemm_split.c): the same FLOPs, the bound
    "compute (tensor cores)", its fraction of the fp32 peak above 1."""
    ms = row.get("candidate_ms") if row.get("solved") else None
    rate, frac = limit_fraction(work, ms, peaks)
    kinds = " ".join(str(row.get(k) or "") for k in ("status", "detail", "kernels"))
    if work.get("bound") == "compute" and frac is not None and frac > 1.0 and "gemm" in kinds:
        work = {**work, "bound": "compute (tensor cores)"}
    elif work.get("bound") == "compute" and frac is not None and frac > 1.0:
        work = {**work, "bound": "memory"}
        rate, frac = limit_fraction(work, ms, peaks)
        work["bound"] = "memory (fewer FLOPs)"
    plain = {**work, "bound": work["bound"].split(" ")[0]} if work.get("bound") else work
    _, eager_frac = limit_fraction(plain, row.get("eager_ms"), peaks)
    return {
        **{k: row.get(k) for k in ("task", "status", "detail", "solved", "episode_id", "reward")},
        **{k: row.get(k) for k in ("speedup_vs_eager", "speedup_vs_compile", "candidate_ms", "eager_ms")},
        "compile_ms": row.get("compile_ms"),
        **work,
        "achieved": rate,
        "limit_fraction": frac,
        "eager_limit_fraction": eager_frac,
    }


def overall(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """run_examples.summarize over the rows, the geometric means over all tasks with an unsolved
    one counted as 1x, and the mean fraction of the limit of the solved tasks of each bound."""
    s = rx.summarize(rows)
    for key in ("speedup_vs_eager", "speedup_vs_compile"):
        xs = [(r.get(key) or 1.0) if r.get("solved") else 1.0 for r in rows]
        s[f"geomean_{key.split('_vs_')[1]}_all"] = rx.geomean(xs)

    def kind(r: dict[str, Any]) -> str:  # "memory (fewer FLOPs)" counts as memory
        return str(r.get("bound") or "").split(" ")[0]

    for bound in ("memory", "compute"):
        fr = [r["limit_fraction"] for r in rows if kind(r) == bound and r.get("limit_fraction") is not None]
        s[f"{bound}_bound_tasks"] = sum(1 for r in rows if kind(r) == bound)
        s[f"{bound}_bound_mean_fraction"] = sum(fr) / len(fr) if fr else None
        s[f"{bound}_bound_measured"] = len(fr)
    return s


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"


def _rate(r: dict[str, Any]) -> str:
    v = r.get("achieved")
    if not isinstance(v, (int, float)):
        return "-"
    return (
        f"{v / 1e9:.1f} GFLOP/s" if str(r.get("bound") or "").startswith("compute") else f"{v / 1e9:.1f} GB/s"
    )


def markdown(rows: list[dict[str, Any]], s: dict[str, Any], peaks: dict[str, Any]) -> str:
    n = s["tasks"]
    out = [
        f"Device: {peaks.get('device')} ({peaks.get('backend')} backend); limits measured in this run: "
        f"copy {peaks['bandwidth_Bps'] / 1e9:.1f} GB/s (read + write, {peaks['copy_MiB']} MiB), "
        f"fp32 mm {peaks['peak_flops'] / 1e12:.2f} TFLOP/s (n = {peaks['mm_n']}, TF32 off).",
        "",
        "| task | end | solved | kforge ms | eager ms | compile ms | vs eager | vs compile | reward "
        "| bound | achieved | of limit | eager of limit |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['task']} | {r['status']} | {'yes' if r.get('solved') else 'no'} "
            f"| {rx.fmt_ms(r.get('candidate_ms'))} | {rx.fmt_ms(r.get('eager_ms'))} "
            f"| {rx.fmt_ms(r.get('compile_ms'))} | {rx.fmt_x(r.get('speedup_vs_eager'))} "
            f"| {rx.fmt_x(r.get('speedup_vs_compile'))} "
            f"| {r.get('reward') if r.get('reward') is not None else '-'} | {r.get('bound') or '-'} "
            f"| {_rate(r)} | {_pct(r.get('limit_fraction'))} | {_pct(r.get('eager_limit_fraction'))} |"
        )
    out += [
        "",
        "| overall | value |",
        "| --- | --- |",
        f"| solved | {rx.fmt_share(s['solved'], n)} |",
        f"| faster than eager by > 5% | {rx.fmt_share(s['faster_than_eager'], n)} |",
        f"| faster than torch.compile by > 5% | {rx.fmt_share(s['faster_than_compile'], n)} |",
        f"| geomean speedup vs eager (solved; all, unsolved = 1x) | {rx.fmt_x(s['geomean_vs_eager'])}; "
        f"{rx.fmt_x(s['geomean_eager_all'])} |",
        f"| geomean speedup vs torch.compile (solved; all, unsolved = 1x) | "
        f"{rx.fmt_x(s['geomean_vs_compile'])}; {rx.fmt_x(s['geomean_compile_all'])} |",
        f"| memory-bound: mean fraction of the copy bandwidth (solved) | "
        f"{_pct(s['memory_bound_mean_fraction'])} over {s['memory_bound_measured']} of "
        f"{s['memory_bound_tasks']} |",
        f"| compute-bound: mean fraction of the fp32 mm peak (solved) | "
        f"{_pct(s['compute_bound_mean_fraction'])} over {s['compute_bound_measured']} of "
        f"{s['compute_bound_tasks']} |",
    ]
    return "\n".join(out) + "\n"


def episodes(args: argparse.Namespace, names: list[str], backend: str) -> list[dict[str, Any]]:
    """The main job's episodes (run_examples.run_episodes) on the chosen stack."""
    tmp = None
    if args.no_up:
        url, key = rx.running_stack(Path(args.var or rx.ROOT / "var"), args.url, args.key)
    elif args.var:
        url, key = rx.start_stack(args.kforge, Path(args.var), backend, args.port)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="kforge-expert-bench-"))
        tmp.chmod(0o755)  # PostgreSQL runs as postgres or nobody and must reach its folder
        url, key = rx.start_stack(args.kforge, tmp / "var", backend, 0)
    try:
        print(f"expert_bench: {len(names)} expert episodes through {url}", file=sys.stderr, flush=True)
        options = {"budget_s": args.budget, "no_compile": args.no_compile}

        def ended(r: dict) -> None:
            print(f"  {r['task']}: {r['status']}", file=sys.stderr, flush=True)

        return rx.run_episodes(url, key, names, backend, options, args.deadline, on_end=ended)
    finally:
        if tmp is not None:
            subprocess.run([args.kforge, "down", "--var", str(tmp / "var")], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["cuda", "cpu"], help="default: cuda when a GPU is visible")
    ap.add_argument("--tasks", nargs="*", help="names of example tasks, e.g. gelu,matmul (default: all)")
    ap.add_argument("--out", help="also write the markdown table to this file")
    ap.add_argument("--json", help="write the rows, the limits and the summary to this file")
    ap.add_argument(
        "--results", help="the rows of an earlier run_examples.py or expert_bench.py --json instead of a run"
    )
    ap.add_argument("--kforge", default=str(ROOT / "build" / "kforge"), help="a bundle's bin/kforge too")
    ap.add_argument(
        "--var",
        help="start (or reuse) the stack in this folder and leave it running (default: a stack of "
        "its own in a temporary folder, on a free port, stopped at the end)",
    )
    ap.add_argument("--port", type=int, help="with --var: kforge up --port")
    ap.add_argument("--no-up", action="store_true", help="use a running stack (--url, --key)")
    ap.add_argument("--url")
    ap.add_argument("--key")
    ap.add_argument("--budget", type=float, default=1.0, help="timing budget per subject, seconds")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument(
        "--deadline",
        type=float,
        help="seconds to wait for all episodes (default: 900 per task, at least 3600)",
    )
    args = ap.parse_args(argv)
    backend = args.backend
    if backend is None:
        import torch

        backend = "cuda" if torch.cuda.is_available() else "cpu"
    names = rx.task_names(args.tasks)

    data = json.loads(Path(args.results).read_text()) if args.results else None
    if data is not None:
        backend = data.get("backend") or (data.get("peaks") or {}).get("backend") or backend
    # the limits before the episodes (the stack's workers idle) and again after them: the best
    peaks = measure_peaks(backend)
    if data is not None:
        by_task = {r["task"]: r for r in data.get("results") or data.get("rows") or []}
        rows = [by_task.get(n) or rx.episode_row(n, "", None, None, "not in --results") for n in names]
    else:
        rows = episodes(args, names, backend)
        peaks = best_peaks(peaks, measure_peaks(backend))
    print(
        f"expert_bench: {peaks['device']}: copy {peaks['bandwidth_Bps'] / 1e9:.1f} GB/s, "
        f"fp32 mm {peaks['peak_flops'] / 1e12:.3f} TFLOP/s",
        file=sys.stderr,
        flush=True,
    )
    works = {n: task_work(inspect(rx.TASKS / f"{n}.py", backend)) for n in names}
    brows = [bench_row(r, works[r["task"]], peaks) for r in rows]
    s = overall(brows)
    md = markdown(brows, s, peaks)
    print(md, end="")
    if args.out:
        Path(args.out).write_text(md)
    if args.json:
        Path(args.json).write_text(json.dumps({"peaks": peaks, "summary": s, "rows": brows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
