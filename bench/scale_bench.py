"""scale_bench.py: one worker per GPU. Throughput of one GPU against all of them, and
the cross-talk of timings between GPUs.

    python bench/scale_bench.py [--backend cuda|cpu] [--gpus 0,1] [--jobs N] [--budget S]
                                [--kforge build/kforge] [--var DIR] [--json FILE]
                                [--crosstalk-runs R] [--no-crosstalk]

Throughput: `kforge up` with the first GPU only, then with all of --gpus (on cpu: one worker,
then len(--gpus) cpu workers), each time the same batch of --jobs evaluations of the example
candidates through POST /v1/evaluations, all enqueued at once; wall time from the first POST
to the last verdict, jobs per minute, which worker and device judged each job, and that every
job ended exactly once (one verdict, one `done` event). A warm-up pass first judges every
distinct candidate once, so that builds and eager baselines are cached for both passes and the
measured passes time the judging alone. The figure: the ratio of the two throughputs (goal:
close to the number of GPUs).

Cross-talk (cuda only): one candidate timed by the harness on the first GPU R times alone, then
R times while the second GPU runs a heavy matmul loop in another process; the medians of the
candidate's time and their difference in percent (goal: within the run-to-run spread).
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
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import run_examples as rx  # noqa: E402

CROSSTALK_TASK = "softmax_rows"
LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda")
end = time.time() + float({seconds})
while time.time() < end:
    for _ in range(20):
        a = torch.tanh(a @ a * 1e-4)
    torch.cuda.synchronize()
"""


def examples(backend: str) -> list[tuple[str, Path, Path]]:
    """(name, task, candidate) of every example with a candidate for the backend."""
    out = []
    for cand in sorted((ROOT / "examples" / "candidates").glob(f"*/{backend}")):
        task = ROOT / "examples" / "tasks" / f"{cand.parent.name}.py"
        if task.exists():
            out.append((cand.parent.name, task, cand))
    return out


def post_batch(
    url: str, key: str, batch: list[tuple[str, Path, Path]], backend: str, options: dict
) -> list[dict]:
    """Enqueues every evaluation at once; returns [{name, job, evaluation}]."""
    posted = []
    for name, task, cand in batch:
        files = {str(f.relative_to(cand)): f.read_text() for f in sorted(cand.rglob("*")) if f.is_file()}
        body = {
            "task": {"source": task.read_text(), "name": name, "suite": "examples"},
            "candidate": {"format": "native", "files": files},
            "backend": backend,
            "options": options,
        }
        code, r = rx.http_json("POST", f"{url}/v1/evaluations", body, key)
        if code != 202:
            raise SystemExit(f"POST /v1/evaluations {name}: {code} {json.dumps(r)[:300]}")
        posted.append({"name": name, "job": r["job"]["id"], "evaluation": r["evaluation"]["id"]})
    return posted


def wait_all(url: str, key: str, posted: list[dict], deadline_s: float) -> list[dict]:
    """Polls until every job finished: each row gains its job and evaluation."""
    end = time.monotonic() + deadline_s
    pending = list(posted)
    while pending and time.monotonic() < end:
        still = []
        for p in pending:
            job = rx.http_json("GET", f"{url}/v1/jobs/{p['job']}", key=key, timeout=30)[1]
            if job.get("status") in ("succeeded", "failed", "cancelled", "dead"):
                p["job_row"] = job
                p["eval_row"] = rx.http_json("GET", f"{url}/v1/evaluations/{p['evaluation']}", key=key)[1]
            else:
                still.append(p)
        pending = still
        if pending:
            time.sleep(0.5)
    if pending:
        raise SystemExit(f"{len(pending)} jobs unfinished after {deadline_s:.0f} s")
    return posted


def events_of(url: str, key: str, job_id: str) -> list[dict]:
    """The job's stored events (the SSE stream replays them and closes once the job is done)."""
    req = rx.urllib.request.Request(
        f"{url}/v1/jobs/{job_id}/events", headers={"Authorization": f"Bearer {key}"}
    )
    events, kind, data = [], None, ""
    with rx.urllib.request.urlopen(req, timeout=60) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and kind:
                events.append({"event": kind, "data": json.loads(data or "{}")})
                kind, data = None, ""
    return events


def one_pass(args: argparse.Namespace, var: Path, workers: list[str], batch: list, label: str) -> dict:
    """kforge up with these workers, the batch, kforge down: the pass's figures."""
    up = [args.kforge, "up", "--var", str(var), "--port", "0"]
    up += (
        ["--cpu", "--cpu-workers", str(len(workers))]
        if args.backend == "cpu"
        else ["--gpus", ",".join(workers)]
    )
    if args.backend == "cuda":
        up += ["--slots", str(args.slots)]
    p = subprocess.run(up, cwd=str(ROOT), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kforge up failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    url, key = rx.running_stack(var, None, None)
    try:
        options = {"budget_s": args.budget, "no_compile": True}
        t0 = time.monotonic()
        rows = wait_all(url, key, post_batch(url, key, batch, args.backend, options), args.deadline)
        wall = time.monotonic() - t0
        once = True
        by_worker: dict[str, int] = {}
        devices: dict[str, int] = {}
        for r in rows:
            ev = events_of(url, key, r["job"])
            kinds = [e["event"] for e in ev]
            # an event's data is the stored event: {job_id, seq, kind, at, data: {worker, ...}}
            claims = [(e["data"].get("data") or {}).get("worker", "?") for e in ev if e["event"] == "claimed"]
            once &= kinds.count("done") == 1 and r["eval_row"].get("verdict") is not None
            by_worker[claims[-1] if claims else "?"] = by_worker.get(claims[-1] if claims else "?", 0) + 1
            dev = r["eval_row"].get("device") or "?"
            devices[dev] = devices.get(dev, 0) + 1
        ok = sum(1 for r in rows if (r["eval_row"].get("verdict") or {}).get("status") == "ok")
        return {
            "label": label,
            "workers": workers,
            "jobs": len(rows),
            "ok": ok,
            "wall_s": round(wall, 2),
            "jobs_per_min": round(60 * len(rows) / wall, 2),
            "each_once": once,
            "by_worker": by_worker,
            "devices": devices,
        }
    finally:
        subprocess.run([args.kforge, "down", "--var", str(var)], cwd=str(ROOT), capture_output=True)


def crosstalk(args: argparse.Namespace, gpus: list[str]) -> dict:
    """The candidate's median time on the first GPU alone, then while the second one is busy."""
    task = ROOT / "examples" / "tasks" / f"{CROSSTALK_TASK}.py"
    cand = ROOT / "examples" / "candidates" / CROSSTALK_TASK / "cuda"
    extra = ["--no-compile", "--budget", str(max(args.budget, 1.0))]

    def timed(n: int) -> list[float]:
        out = []
        for _ in range(n):
            os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]
            v = rx.evaluate(task, cand, "cuda", extra)
            ms = ((v.get("timing") or {}).get("candidate") or {}).get("median_ms")
            if ms is None:
                raise SystemExit(f"crosstalk: no timing: {json.dumps(v)[:300]}")
            out.append(ms)
        return out

    alone = timed(args.crosstalk_runs)
    load_env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[1])
    seconds = 600
    load = subprocess.Popen([sys.executable, "-c", LOAD.format(seconds=seconds)], env=load_env)
    try:
        time.sleep(5)  # the load's context and first products
        if load.poll() is not None:
            raise SystemExit(f"crosstalk: the load on GPU {gpus[1]} exited {load.returncode}")
        loaded = timed(args.crosstalk_runs)
    finally:
        load.kill()
        load.wait()
    a, b = statistics.median(alone), statistics.median(loaded)
    return {
        "task": CROSSTALK_TASK,
        "gpu": gpus[0],
        "busy_gpu": gpus[1],
        "alone_ms": alone,
        "loaded_ms": loaded,
        "alone_spread": round(max(alone) / min(alone), 4),
        "median_alone_ms": a,
        "median_loaded_ms": b,
        "difference_pct": round(100 * (b - a) / a, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--gpus", default="0,1", help="on cpu: as many cpu workers as entries")
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--slots", type=int, default=2, help="workers per GPU")
    ap.add_argument("--deadline", type=float, default=1500)
    ap.add_argument("--kforge", default=str(ROOT / "build" / "kforge"))
    ap.add_argument("--var", default=None, help="default: a new temporary folder")
    ap.add_argument("--json", default=None)
    ap.add_argument("--crosstalk-runs", type=int, default=5)
    ap.add_argument("--no-crosstalk", action="store_true")
    args = ap.parse_args(argv)
    gpus = [g for g in args.gpus.split(",") if g]
    pool = examples(args.backend)
    if not pool or len(gpus) < 2:
        raise SystemExit("need example candidates and at least two entries in --gpus")
    var = Path(args.var or tempfile.mkdtemp(prefix="kforge-scale-"))
    var.chmod(0o755)
    # the same task sources in every pass (a tag per job keeps them apart from other runs)
    tag = uuid.uuid4().hex[:8]
    batch = []
    for i in range(args.jobs):
        name, task, cand = pool[i % len(pool)]
        tagged = Path(tempfile.mkdtemp(prefix="kforge-scale-task-")) / f"{name}.py"
        tagged.write_text(task.read_text() + f"\n# scale_bench {tag} job {i}\n")
        batch.append((name, tagged, cand))
    result: dict = {"backend": args.backend, "gpus": gpus, "jobs": args.jobs}
    result["warmup"] = one_pass(args, var, gpus, batch, "warm-up (all, not counted)")
    result["one"] = one_pass(
        args, var, gpus[:1], batch, "one GPU" if args.backend == "cuda" else "one worker"
    )
    result["all"] = one_pass(
        args, var, gpus, batch, f"{len(gpus)} GPUs" if args.backend == "cuda" else "workers"
    )
    result["speedup"] = round(result["all"]["jobs_per_min"] / result["one"]["jobs_per_min"], 3)
    if args.backend == "cuda" and not args.no_crosstalk:
        result["crosstalk"] = crosstalk(args, gpus)
    for k in ("one", "all"):
        r = result[k]
        print(
            f"{r['label']:<10} {r['jobs']} jobs ({r['ok']} ok, each once: {r['each_once']}) in {r['wall_s']} s: "
            f"{r['jobs_per_min']} jobs/min; by worker {r['by_worker']}; devices {r['devices']}"
        )
    print(f"throughput with {len(gpus)}: {result['speedup']}x that of one")
    if "crosstalk" in result:
        c = result["crosstalk"]
        print(
            f"cross-talk: {c['task']} on GPU {c['gpu']}: {c['median_alone_ms']:.4f} ms alone (spread "
            f"{c['alone_spread']}), {c['median_loaded_ms']:.4f} ms while GPU {c['busy_gpu']} runs matmuls: "
            f"{c['difference_pct']:+.2f}%"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if result["one"]["each_once"] and result["all"]["each_once"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
