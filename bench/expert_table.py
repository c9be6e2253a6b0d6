"""expert_table.py: the table of bench/README.md's expert section from the verdicts of
tests/agent/test_expert_gpu.py (scripts/gpu_expert.sh on the GPU host: each task's expert plan
judged by the harness's full `evaluate`, without the service).

    python bench/expert_table.py VERDICTS.jsonl.. [--backend cuda|cpu] [--limits DEVICE GBPS TFLOPS]
        [--latest]

Each line is {"task", "variant", "kernels", "verdict", "graph"}. Where a task was judged in
several variants (or in several files), its row is the fastest correct one (the one the expert's tuning keeps), and its
status names the variant; with --latest, a later file's row of a task replaces an earlier
file's (a run of changed kernels over an older run of all tasks). The hardware's limits (copy bandwidth, fp32
mm peak) are measured now, on this machine, as expert_bench.py measures them; the work of a task
(bytes or FLOPs) comes from its graph. Prints the markdown of expert_bench.markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import expert_bench as eb  # noqa: E402


def row_of(rec: dict[str, Any]) -> dict[str, Any]:
    """A row in run_examples' episode_row shape from one judged plan."""
    v = rec.get("verdict") or {}
    t = v.get("timing") or {}

    def ms(k: str) -> float | None:
        return (t.get(k) or {}).get("median_ms")

    ok = v.get("status") == "ok" and bool(v.get("correct"))
    variant = f", variant {rec['variant']}" if "variant" in rec else ""
    return {
        "task": rec["task"],
        "status": f"{v.get('status')} ({'+'.join(rec.get('kernels') or [])}{variant})",
        "solved": ok,
        "reward": v.get("reward"),
        "speedup_vs_eager": v.get("speedup_vs_eager"),
        "speedup_vs_compile": v.get("speedup_vs_compile"),
        "candidate_ms": ms("candidate"),
        "eager_ms": ms("eager"),
        "compile_ms": ms("compile"),
    }


def best_of(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per task: its fastest correct variant, else its first record; by task."""

    def key(rec: dict[str, Any]) -> tuple[int, float]:
        row = row_of(rec)
        ms = row["candidate_ms"]
        return (0 if row["solved"] and ms is not None else 1, ms if ms is not None else 0.0)

    best: dict[str, dict[str, Any]] = {}
    for rec in recs:
        have = best.get(rec["task"])
        if have is None or key(rec) < key(have):
            best[rec["task"]] = rec
    return [best[t] for t in sorted(best)]


def given_peaks(backend: str, device: str, copy_gbps: float, mm_tflops: float) -> dict[str, Any]:
    """The limits as measure_peaks reports them, from figures a run on the device printed (to
    table verdicts from several device calls where the GPU is not at hand)."""
    return {
        "backend": backend,
        "device": device,
        "bandwidth_Bps": copy_gbps * 1e9,
        "copy_MiB": 2048,
        "copy_ms": 2 * 2048 * 2**20 / (copy_gbps * 1e9) * 1e3,
        "peak_flops": mm_tflops * 1e12,
        "mm_n": 8192,
        "mm_ms": 2 * 8192**3 / (mm_tflops * 1e12) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("verdicts", nargs="+", help="one or more VERDICTS.jsonl, read in order")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument(
        "--limits",
        nargs=3,
        metavar=("DEVICE", "COPY_GBPS", "MM_TFLOPS"),
        help="the limits a run on the device measured, instead of measuring them here",
    )
    ap.add_argument(
        "--latest", action="store_true", help="a later file's row of a task replaces an earlier's"
    )
    args = ap.parse_args(argv)
    files = [
        [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()] for f in args.verdicts
    ]
    if args.latest:
        rows_of: dict[str, dict[str, Any]] = {}
        for f in files:
            rows_of.update({r["task"]: r for r in best_of(f)})
        recs = [rows_of[t] for t in sorted(rows_of)]
    else:
        recs = best_of([r for f in files for r in f])
    if args.limits:
        peaks = given_peaks(args.backend, args.limits[0], float(args.limits[1]), float(args.limits[2]))
    else:
        peaks = eb.measure_peaks(args.backend)
    rows = [
        eb.bench_row(row_of(r), eb.task_work(r.get("graph") or {"error": "no graph"}), peaks) for r in recs
    ]
    print(eb.markdown(rows, eb.overall(rows), peaks), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
