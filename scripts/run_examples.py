"""The main job: start the local stack and let the expert policy optimize every example task.

Uses the cuda backend when a GPU is visible and the cpu backend otherwise. By default it starts
the service (``build/kforge up --var var``: PostgreSQL, Redis, kforge-server and the workers),
POSTs the source of each task of examples/tasks to ``/v1/optimize`` with the built-in ``expert``
policy (all at once: the workers take the episodes in turn), waits for every episode to end,
prints a table of each task's end, times, speedups and reward, their geometric means and
shares, and the web addresses of the results, and leaves the stack running (``build/kforge
down`` stops it). An episode the expert cannot handle yet ends ``unsupported``; its row says
why. Exit status: 0 when every episode ended (whatever its end), 1 when one could not run
(an API error, a failed or dead job, no end before --deadline).

Two other modes evaluate the hand-written candidates of examples/candidates instead:
``--evaluations`` POSTs each to ``/v1/evaluations`` (the service's judge), ``--direct`` runs
the harness's ``evaluate`` on each without the service (exit 1 when one is not correct).

``--no-up`` uses a stack that is already running (``--url`` and ``--key``, else
``$KFORGE_URL`` and ``$KFORGE_API_KEY``, else ``--var``'s stack.env and api-key).
``--json PATH`` writes every result; bench/expert_bench.py imports this module.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "workers" / "harness"
TASKS = ROOT / "examples" / "tasks"
# "Faster" in the shares means faster by more than this factor (the reward's 5% margin).
MARGIN = 1.05
# Episode statuses that do not change any more (EpisodeStatus in openapi/openapi.yaml).
EPISODE_ENDED = {"finished", "failed", "cancelled"}
JOB_ENDED = {"succeeded", "failed", "cancelled", "dead"}
# The statuses of a row whose episode could not run to an end of its own (exit status 1).
NOT_RUN = {
    "error",
    "timeout",
    "job_failed",
    "job_dead",
    "job_cancelled",
    "episode_failed",
    "episode_cancelled",
}


# ---- the harness and the service -------------------------------------------------------------


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


def read_stack_env(var: Path) -> dict[str, str]:
    env = {}
    for line in (var / "stack.env").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip().strip('"')
    return env


def start_stack(kforge: str, var: Path, backend: str, port: int | None = None) -> tuple[str, str]:
    """``kforge up`` (a no-op when the stack is already up); returns its URL and API key."""
    up = [kforge, "up", "--var", str(var)]
    if port is not None:
        up += ["--port", str(port)]
    if backend == "cpu":
        up.append("--cpu")
    p = subprocess.run(up, cwd=str(ROOT), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kforge up failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return read_stack_env(var)["KFORGE_URL"], (var / "api-key").read_text().strip()


def running_stack(var: Path, url: str | None, key: str | None) -> tuple[str, str]:
    """The URL and key of a stack that is already up: options, environment, then var/."""
    url = url or os.environ.get("KFORGE_URL")
    key = key or os.environ.get("KFORGE_API_KEY")
    try:
        url = url or read_stack_env(var)["KFORGE_URL"]
        key = key or (var / "api-key").read_text().strip()
    except (OSError, KeyError) as e:
        raise SystemExit(f"--no-up: no --url/--key and nothing usable in {var} ({e})") from e
    return url.rstrip("/"), key


def http_json(
    method: str, url: str, body: dict | None = None, key: str = "", timeout: float = 90
) -> tuple[int, dict]:
    """One request with the standard library (the GPU hosts may lack requests). A connection
    that fails answers (0, {"error": ...})."""
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
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {"error": {"message": f"HTTP {e.code}"}}
    except (urllib.error.URLError, OSError) as e:
        return 0, {"error": {"message": f"{type(e).__name__}: {e}"}}


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
        ev = http_json("GET", f"{url}/v1/evaluations/{ev['id']}", key=key, timeout=30)[1]
        if ev.get("job_status") in ("failed", "dead", "cancelled"):
            return {"status": f"job_{ev['job_status']}", "message": ev.get("id", "")}
    return ev.get("verdict") or {"status": "timeout", "message": "no verdict within 30 minutes"}


# ---- episodes (the default mode) -------------------------------------------------------------


def episode_page(url: str, episode_id: str) -> str:
    """The web UI's page of an episode (web/js/episode.js; the leaderboard is at `/`)."""
    return f"{url}/episodes/{episode_id}"


def start_episode(url: str, key: str, name: str, source: str, backend: str, options: dict) -> dict:
    """POST /v1/optimize with the expert policy: the OptimizeCreated reply, or {"error": ...}."""
    body = {
        "task": {"name": name, "source": source, "suite": "examples"},
        "backend": backend,
        "policy": {"name": "expert"},
        "options": options,
        # the examples' results and kernels on the leaderboard the table points to
        "publish": "sources",
    }
    code, r = http_json("POST", f"{url}/v1/optimize", body, key)
    if code != 202:
        err = r.get("error") if isinstance(r.get("error"), dict) else {}
        return {"error": f"POST /v1/optimize answered {code}: {err.get('name', '')} {err.get('message', r)}"}
    return r


def _ms(timing: dict | None, which: str) -> float | None:
    t = (timing or {}).get(which) or {}
    v = t.get("median_ms")
    return float(v) if isinstance(v, (int, float)) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def episode_row(name: str, url: str, episode: dict | None, job: dict | None, error: str = "") -> dict:
    """One task's result from its episode (GET /v1/episodes/{id}?turns=false) and its job
    (GET /v1/jobs/{id}, for end_detail and a failure's error): what the table, --json and
    bench/expert_bench.py read. `solved`: the final re-validation found the best candidate
    correct."""
    ep = episode or {}
    jb = job or {}
    res = ep.get("result") or {}
    verdict = res.get("verdict") or {}
    timing = verdict.get("timing") or None
    jres = jb.get("result") or {}
    ep_status = ep.get("status")
    if error:
        status = "error"
    elif ep_status == "finished":
        status = ep.get("end_reason") or "finished"
    elif ep_status in ("failed", "cancelled"):
        status = f"episode_{ep_status}"
    elif jb.get("status") in ("failed", "dead", "cancelled"):
        status = f"job_{jb['status']}"
    else:
        status = "timeout"
    detail = error or jres.get("end_detail") or ""
    if not detail and jb.get("error"):
        e = jb["error"]
        detail = (e.get("message") or json.dumps(e)) if isinstance(e, dict) else str(e)
    if not detail and status == "timeout":
        detail = f"still {ep_status or 'unknown'} at the deadline (the episode goes on in the stack)"
    solved = ep_status == "finished" and verdict.get("correct") is True and verdict.get("status") == "ok"
    if ep_status == "finished" and not solved and not detail and verdict:
        detail = f"final verdict {verdict.get('status')}: {verdict.get('message', '')}".strip()
    eid = ep.get("id")
    return {
        "task": name,
        "status": status,
        "detail": detail,
        "solved": solved,
        "episode_id": eid,
        "job_id": ep.get("job_id") or jb.get("id"),
        "episode_status": ep_status,
        "end_reason": ep.get("end_reason"),
        "job_status": jb.get("status"),
        "reward": res.get("reward"),
        "reward_version": res.get("reward_version"),
        "speedup_vs_eager": _num(res.get("speedup_vs_eager")),
        "speedup_vs_compile": _num(res.get("speedup_vs_compile")),
        "eager_ms": _ms(timing, "eager"),
        "compile_ms": _ms(timing, "compile"),
        "candidate_ms": _ms(timing, "candidate"),
        "verdict_status": verdict.get("status"),
        "timing": timing,
        "best_candidate_id": ep.get("best_candidate_id"),
        "n_turns": ep.get("n_turns"),
        "gpu_seconds": ep.get("gpu_seconds"),
        "device": res.get("device") or (timing or {}).get("device"),
        "env": ep.get("env"),
        "backend": ep.get("backend"),
        "page": episode_page(url, eid) if eid else None,
    }


def run_episodes(
    url: str,
    key: str,
    names: list[str],
    backend: str,
    options: dict,
    deadline_s: float | None = None,
    poll_s: float = 1.0,
    tasks_dir: Path = TASKS,
    on_end: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Starts one expert episode per task (all at once), polls them until each has ended or the
    deadline passed (default: 900 s per task, at least an hour; only a guard against a hang:
    each episode has its own wall-time limit), and returns their rows (episode_row) in the order of `names`. `on_end` is
    called with each row as its episode ends."""
    rows: dict[str, dict] = {}
    pending: dict[str, dict] = {}
    for name in names:
        started = start_episode(url, key, name, (tasks_dir / f"{name}.py").read_text(), backend, options)
        if "error" in started:
            rows[name] = episode_row(name, url, None, None, started["error"])
            if on_end:
                on_end(rows[name])
        else:
            pending[name] = started
    end = time.monotonic() + (deadline_s or max(3600.0, 900.0 * len(names)))
    polls = 0
    while pending:
        polls += 1
        for name, started in list(pending.items()):
            eid, jid = started["episode"]["id"], started["job"]["id"]
            code, ep = http_json("GET", f"{url}/v1/episodes/{eid}?turns=false", key=key, timeout=30)
            ended = code == 200 and ep.get("status") in EPISODE_ENDED
            job = None
            if ended or polls % 10 == 0 or time.monotonic() > end:
                # the job says why (end_detail, error) and catches a job that died while its
                # episode still reads running
                jcode, job = http_json("GET", f"{url}/v1/jobs/{jid}", key=key, timeout=30)
                job = job if jcode == 200 else None
                ended = ended or (job is not None and job.get("status") in JOB_ENDED)
            if ended or time.monotonic() > end:
                rows[name] = episode_row(name, url, ep if code == 200 else {"id": eid}, job)
                del pending[name]
                if on_end:
                    on_end(rows[name])
        if pending:
            time.sleep(poll_s)
    return [rows[n] for n in names]


def verdict_row(name: str, v: dict) -> dict:
    """A row like episode_row's from a verdict of the harness (--direct, --evaluations)."""
    t = v.get("timing") or None
    return {
        "task": name,
        "status": v.get("status", "?"),
        "detail": "" if v.get("status") == "ok" else str(v.get("message", ""))[:300],
        "solved": v.get("status") == "ok" and v.get("correct", True) is True,
        "reward": v.get("reward", -1),
        "speedup_vs_eager": _num(v.get("speedup_vs_eager")),
        "speedup_vs_compile": _num(v.get("speedup_vs_compile")),
        "eager_ms": _ms(t, "eager"),
        "compile_ms": _ms(t, "compile"),
        "candidate_ms": _ms(t, "candidate"),
        "timing": t,
        "env": v.get("env"),
    }


# ---- the table and its summary ---------------------------------------------------------------


def geomean(xs: Iterable[float]) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows: list[dict], margin: float = MARGIN) -> dict:
    """Counts, shares and geometric means over the rows. The shares are over all rows (a task
    that is not solved is neither solved nor faster); the geometric means are over the solved
    rows that have the speedup."""
    n = len(rows)
    solved = [r for r in rows if r.get("solved")]

    def faster(key: str) -> int:
        return sum(1 for r in solved if (_num(r.get(key)) or 0.0) > margin)

    fe, fc = faster("speedup_vs_eager"), faster("speedup_vs_compile")
    return {
        "tasks": n,
        "solved": len(solved),
        "solved_share": len(solved) / n if n else None,
        "faster_than_eager": fe,
        "faster_than_eager_share": fe / n if n else None,
        "faster_than_compile": fc,
        "faster_than_compile_share": fc / n if n else None,
        "geomean_vs_eager": geomean(r["speedup_vs_eager"] for r in solved if r.get("speedup_vs_eager")),
        "geomean_vs_compile": geomean(r["speedup_vs_compile"] for r in solved if r.get("speedup_vs_compile")),
        "margin": margin,
    }


def fmt_ms(t: dict | float | None) -> str:
    if isinstance(t, dict):
        t = t.get("median_ms")
    return f"{t:.3f}" if isinstance(t, (int, float)) else "-"


def fmt_x(x: float | None) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def fmt_share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "0/0"


COLUMNS = ("task", "status", "eager ms", "compile ms", "kforge ms", "vs eager", "vs compile", "reward")


def table(rows: list[dict], names: list[str] | None = None) -> list[str]:
    """The table's lines: a header, a rule, a line per row (and an indented line saying why, for
    a row that is not solved). `names`: the tasks the task column must fit (default: the rows')."""
    wt = max([len(COLUMNS[0])] + [len(n) for n in names or [r["task"] for r in rows]])
    ws = max([17] + [len(r["status"]) for r in rows])
    head = (
        f"{'task':<{wt}} {'status':<{ws}} {'eager ms':>10} {'compile ms':>10} {'kforge ms':>10} "
        f"{'vs eager':>9} {'vs compile':>10} {'reward':>6}"
    )
    out = [head, "-" * len(head)]
    for r in rows:
        reward = r.get("reward")
        out.append(
            f"{r['task']:<{wt}} {r['status']:<{ws}} {fmt_ms(r.get('eager_ms')):>10} "
            f"{fmt_ms(r.get('compile_ms')):>10} {fmt_ms(r.get('candidate_ms')):>10} "
            f"{fmt_x(r.get('speedup_vs_eager')):>9} {fmt_x(r.get('speedup_vs_compile')):>10} "
            f"{reward if reward is not None else '-':>6}"
        )
        if r.get("detail") and not r.get("solved"):
            out.append(f"    {r['detail']!s:.300}")
    return out


def summary_lines(s: dict, what: str = "solved") -> list[str]:
    """The summary below the table; `what` names the rows that count: "solved" (an episode's
    final re-validation found its best candidate correct) or "correct" (a verdict)."""
    n = s["tasks"]
    pct = round(100 * (s["margin"] - 1))
    label = "solved (correct at the final re-validation)" if what == "solved" else what
    return [
        f"{label}: {fmt_share(s['solved'], n)}",
        f"faster than eager by more than {pct}%: {fmt_share(s['faster_than_eager'], n)}; "
        f"than torch.compile: {fmt_share(s['faster_than_compile'], n)}",
        f"geometric mean over the {what}: {fmt_x(s['geomean_vs_eager'])} vs eager, "
        f"{fmt_x(s['geomean_vs_compile'])} vs torch.compile",
    ]


def task_names(given: list[str] | None, tasks_dir: Path = TASKS) -> list[str]:
    """--tasks a,b c (commas or spaces), else every examples/tasks/*.py, sorted."""
    names = [n for g in given or [] for n in g.split(",") if n.strip()]
    names = [n.strip().removesuffix(".py") for n in names]
    if not names:
        return sorted(p.stem for p in tasks_dir.glob("*.py"))
    missing = [n for n in names if not (tasks_dir / f"{n}.py").is_file()]
    if missing:
        raise SystemExit(f"no such task in {tasks_dir}: {', '.join(missing)}")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["cuda", "cpu"], help="default: cuda when a GPU is visible")
    ap.add_argument("--tasks", nargs="*", help="names of example tasks, e.g. gelu,matmul (default: all)")
    ap.add_argument("--budget", default="1.0", help="timing budget per subject, seconds")
    ap.add_argument("--json", help="also write every result to this file")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--evaluations",
        action="store_true",
        help="evaluate the hand-written candidates through POST /v1/evaluations instead",
    )
    mode.add_argument(
        "--direct", action="store_true", help="evaluate the hand-written candidates with the harness alone"
    )
    ap.add_argument(
        "--kforge", default=str(ROOT / "build" / "kforge"), help="the kforge CLI (a bundle's bin/kforge)"
    )
    ap.add_argument("--var", default=str(ROOT / "var"), help="the local stack's folder")
    ap.add_argument("--port", type=int, help="kforge up --port (default 8080; 0: a free one)")
    ap.add_argument("--no-up", action="store_true", help="use a running stack (--url, --key) instead")
    ap.add_argument("--url", help="with --no-up: the server's base URL")
    ap.add_argument("--key", help="with --no-up: an API key")
    ap.add_argument(
        "--deadline",
        type=float,
        help="seconds to wait for all episodes (default: 900 per task, at least 3600); a hang guard",
    )
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument(
        "--cached-baselines",
        action="store_true",
        help="--direct: reuse cached eager/compile times (faster; by default they are timed in this "
        "run, beside the candidate, so that a baseline from a differently loaded machine never counts)",
    )
    args = ap.parse_args(argv)
    backend = args.backend
    if backend is None:
        import torch

        backend = "cuda" if torch.cuda.is_available() else "cpu"
    names = task_names(args.tasks)
    options = {"budget_s": float(args.budget), "no_compile": args.no_compile}
    url = key = ""
    if args.no_up and not args.direct:
        url, key = running_stack(Path(args.var), args.url, args.key)
        print(f"kforge: using the stack at {url}", flush=True)
    elif not args.direct:
        url, key = start_stack(args.kforge, Path(args.var), backend, args.port)
        print(f"kforge: the local stack is up at {url} (build/kforge down stops it)", flush=True)

    if args.direct or args.evaluations:
        return evaluate_candidates(args, names, backend, url, key, options)

    print(
        f"kforge: optimizing {len(names)} example tasks with the expert policy on the {backend} "
        f"backend (the workers take the episodes in turn)",
        flush=True,
    )
    done = [0]

    def ended(r: dict) -> None:
        done[0] += 1
        print(f"  [{done[0]}/{len(names)}] {r['task']}: {r['status']}", file=sys.stderr, flush=True)

    rows = run_episodes(url, key, names, backend, options, args.deadline, on_end=ended)
    s = summarize(rows)
    print("\n".join(["", *table(rows), "", *summary_lines(s)]))
    env = next((r["env"] for r in rows if r.get("env")), None) or {}
    device = next((r["device"] for r in rows if r.get("device")), None) or env.get("gpu") or env.get("cpu")
    print(f"on {device or backend} (torch {env.get('torch', '?')})")
    print("\nresults in the web UI:")
    print(f"  {'leaderboard':<18} {url}/?suite=examples")
    for r in rows:
        if r.get("page"):
            print(f"  {r['task']:<18} {r['page']}")
    print("the stack keeps running; build/kforge down stops it", flush=True)
    if args.json:
        out = {
            "mode": "optimize",
            "policy": "expert",
            "backend": backend,
            "url": url,
            "leaderboard": f"{url}/",
            "options": options,
            "summary": s,
            "results": rows,
        }
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 1 if any(r["status"] in NOT_RUN for r in rows) else 0


def evaluate_candidates(
    args: argparse.Namespace, names: list[str], backend: str, url: str, key: str, options: dict
) -> int:
    """--direct and --evaluations: the hand-written candidate of each task, judged."""
    how = "the harness directly" if args.direct else "the service"
    # only some tasks have a hand-written candidate; the others are for the expert to solve
    without = [n for n in names if not (ROOT / "examples" / "candidates" / n / backend).is_dir()]
    names = [n for n in names if n not in without]
    if without:
        print(f"kforge: no {backend} candidate (skipped): {', '.join(without)}", flush=True)
    print(
        f"kforge: evaluating {len(names)} example candidates on the {backend} backend through {how}",
        flush=True,
    )
    rows, results = [], {}
    print("\n".join(table([], names)), flush=True)
    for name in names:
        cand = ROOT / "examples" / "candidates" / name / backend
        extra = ["--budget", args.budget] + ([] if args.cached_baselines else ["--no-baseline-cache"])
        extra += ["--no-compile"] if args.no_compile else []
        task = TASKS / f"{name}.py"
        if args.direct:
            v = evaluate(task, cand, backend, extra)
        else:
            v = evaluate_service(url, key, task, cand, backend, options)
        results[name] = v
        rows.append(verdict_row(name, v))
        print("\n".join(table(rows[-1:], names)[2:]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    s = summarize(rows)
    print("\n".join(["", *summary_lines(s, "correct")]))
    env = next((v.get("env") for v in results.values() if v.get("env")), {})
    device = env.get("gpu") or env.get("cpu")
    print(f"{s['solved']}/{len(names)} correct on {device} (torch {env.get('torch')})")
    if url:
        print(f"results: {url}/v1/evaluations/ID; stop with build/kforge down")
    return 0 if s["solved"] == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
