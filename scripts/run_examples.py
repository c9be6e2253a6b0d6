"""The main job: start the local stack and evaluate every example candidate through it.

Uses the cuda backend when a GPU is visible and the cpu backend otherwise. By default it starts
the service (``build/kforge up --var var``: PostgreSQL, Redis, kforge-server and the workers),
POSTs each example to ``/v1/evaluations``, waits for the verdicts, prints a table of statuses,
times, speedups and rewards, and leaves the stack running (``build/kforge down`` stops it).
``--direct`` runs the harness's ``evaluate`` on each example without the service instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
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


def start_stack(kforge: str, var: Path, backend: str) -> tuple[str, str]:
    """``kforge up`` (a no-op when the stack is already up); returns its URL and API key."""
    up = [kforge, "up", "--var", str(var)]
    if backend == "cpu":
        up.append("--cpu")
    p = subprocess.run(up, cwd=str(ROOT), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kforge up failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    env = {}
    for line in (var / "stack.env").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip().strip('"')
    return env["KFORGE_URL"], (var / "api-key").read_text().strip()


def http_json(
    method: str, url: str, body: dict | None = None, key: str = "", timeout: float = 90
) -> tuple[int, dict]:
    """One request with the standard library (the GPU hosts may lack requests)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def evaluate_service(url: str, key: str, task: Path, cand: Path, backend: str, options: dict) -> dict:
    """POSTs one example to /v1/evaluations and waits for its verdict (the harness's JSON)."""
    files = {str(f.relative_to(cand)): f.read_text() for f in sorted(cand.rglob("*")) if f.is_file()}
    body = {
        "task": {"source": task.read_text(), "name": task.stem},
        "candidate": {"format": "native", "files": files},
        "backend": backend,
        "wait": 60,
        "options": options,
    }
    code, r = http_json("POST", f"{url}/v1/evaluations", body, key)
    if code not in (200, 202):
        return {"status": "api_error", "message": json.dumps(r)[:300]}
    ev = r["evaluation"]
    deadline = time.monotonic() + 1800
    while ev.get("verdict") is None and time.monotonic() < deadline:
        time.sleep(0.5)
        ev = http_json("GET", f"{url}/v1/evaluations/{ev['id']}", timeout=30)[1]
        if ev.get("job_status") in ("failed", "dead", "cancelled"):
            return {"status": f"job_{ev['job_status']}", "message": ev.get("id", "")}
    return ev.get("verdict") or {"status": "timeout", "message": "no verdict within 30 minutes"}


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
    ap.add_argument("--direct", action="store_true", help="run the harness directly, without the service")
    ap.add_argument(
        "--kforge", default=str(ROOT / "build" / "kforge"), help="the kforge CLI (a bundle's bin/kforge)"
    )
    ap.add_argument("--var", default=str(ROOT / "var"), help="the local stack's folder")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
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
    url = key = ""
    if not args.direct:
        url, key = start_stack(args.kforge, Path(args.var), backend)
        print(f"kforge: the local stack is up at {url} (build/kforge down stops it)", flush=True)
    how = "the harness directly" if args.direct else "the service"
    print(
        f"kforge: evaluating {len(names)} example candidates on the {backend} backend through {how}",
        flush=True,
    )
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
        extra += ["--no-compile"] if args.no_compile else []
        options = {"budget_s": float(args.budget), "no_compile": args.no_compile}
        task = ROOT / "examples" / "tasks" / f"{name}.py"
        if args.direct:
            v = evaluate(task, cand, backend, extra)
        else:
            v = evaluate_service(url, key, task, cand, backend, options)
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
    if url:
        print(
            f"results: {url}/v1/evaluations/ID (the web UI comes with issue 7); stop with build/kforge down"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
