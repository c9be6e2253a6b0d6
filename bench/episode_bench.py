"""episode_bench.py: the agent loop's figures, through the whole service.

    python bench/episode_bench.py [--kforge build/kforge] [--backend cpu|cuda] [--turns 200]
                                  [--episodes 4] [--policy-delay 2] [--json FILE]

Starts the local stack with ``kforge up`` in a temporary folder (``--slots`` = --episodes on the
chosen backend) and a scripted OpenAI-compatible policy (tests/fakellm) per episode, then:

1. **Per-turn overhead**: one episode of --turns turns, each calling one cheap tool (``glob``)
   with an instant policy. ``turns.overhead_ms`` is the loop's own time in a turn (everything
   but the policy's answer and the tools' work: the turn's JSON, the fenced insert, the event).
   Goal: median under 20 ms.
2. **Judge share with several episodes in flight**: --episodes episodes at once, each a slow
   policy (--policy-delay seconds per reply) that writes the example candidate of --task,
   then verifies, profiles twice and submits. Reported: the wall time from the first POST to
   the last finish, the judge time of all episodes (``episodes.gpu_seconds``: on cuda the time
   the judges held the GPU lock; on cpu, where there is no lock, their wall time, so the share
   may pass 100%), and their ratio: the share of the wall time the device spent verifying or
   timing. No goal; it shows how much a slow policy leaves the device idle.

Only the standard library and the repository's fakellm; runs on a GPU host from a bundle too
(--kforge BUNDLE/bin/kforge).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
from fakellm.server import start_fake_llm  # noqa: E402
from run_examples import http_json as http  # noqa: E402

FINISHED = {"succeeded", "failed", "cancelled", "dead"}


def up(kforge: str, var: Path, backend: str, slots: int) -> tuple[str, str]:
    cmd = [kforge, "up", "--var", str(var), "--port", "0", "--slots", str(slots)]
    cmd += ["--cpu"] if backend == "cpu" else ["--gpus", "0"]
    p = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kforge up failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    env = dict(line.split("=", 1) for line in (var / "stack.env").read_text().splitlines() if "=" in line)
    return env["KFORGE_URL"].strip().strip('"'), (var / "api-key").read_text().strip()


def optimize(url: str, key: str, source: str, llm_url: str, backend: str, **limits: int) -> dict:
    body = {
        "task": {"name": "bench", "source": source},
        "backend": backend,
        "policy": {"name": "openai", "base_url": llm_url + "/v1", "model": "fakellm-1"},
        "options": {"budget_s": 0.5, "no_compile": True},
        "limits": limits,
    }
    code, r = http("POST", f"{url}/v1/optimize", body, key)
    if code != 202:
        raise SystemExit(f"POST /v1/optimize answered {code}: {r}")
    return r


def wait(url: str, key: str, job_id: str, deadline_s: float) -> dict:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        _, j = http("GET", f"{url}/v1/jobs/{job_id}", key=key)
        if j.get("status") in FINISHED:
            return j
        time.sleep(0.2)
    raise SystemExit(f"job {job_id} did not finish in {deadline_s} s")


def overhead(url: str, key: str, backend: str, turns: int) -> dict:
    call = {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}
    _, h = start_fake_llm({"turns": [call], "on_exhausted": "repeat"})
    try:
        source = f"# overhead {time.time()}\n" + (ROOT / "examples/tasks/sum_dim.py").read_text()
        r = optimize(url, key, source, h.url, backend, max_turns=turns)
        job = wait(url, key, r["job"]["id"], 600 + turns)
        _, ep = http("GET", f"{url}/v1/episodes/{r['episode']['id']}", key=key)
    finally:
        h.close()
    over = [t["overhead_ms"] for t in ep["turns"][1:]]  # the first includes the prompt's start
    tools = [t["tools_ms"] for t in ep["turns"]]
    pol = [t["policy_ms"] for t in ep["turns"]]
    return {
        "job_status": job["status"],
        "end_reason": ep["end_reason"],
        "turns": ep["n_turns"],
        "overhead_ms_median": statistics.median(over),
        "overhead_ms_p90": sorted(over)[int(0.9 * (len(over) - 1))],
        "tools_ms_median": statistics.median(tools),
        "policy_ms_median": statistics.median(pol),
    }


def candidate_script(task: str, backend: str, delay: float) -> dict:
    cand = ROOT / "examples" / "candidates" / task / backend
    writes = [
        {"name": "write_file", "arguments": {"path": str(f.relative_to(cand)), "content": f.read_text()}}
        for f in sorted(cand.rglob("*"))
        if f.is_file() and "__pycache__" not in f.parts
    ]
    steps = [[w] for w in writes] + [
        [{"name": n, "arguments": {}}] for n in ("verify", "profile", "profile", "submit")
    ]
    return {"turns": [{"fault": "sleep", "seconds": delay, "then": {"tool_calls": s}} for s in steps]}


def judge_share(url: str, key: str, backend: str, name: str, episodes: int, delay: float) -> dict:
    handles = [start_fake_llm(candidate_script(name, backend, delay))[1] for _ in range(episodes)]
    try:
        task = (ROOT / "examples" / "tasks" / f"{name}.py").read_text()
        t0 = time.monotonic()
        started = [
            optimize(url, key, f"# share {i} {time.time()}\n" + task, h.url, backend)
            for i, h in enumerate(handles)
        ]
        jobs = [wait(url, key, s["job"]["id"], 3600) for s in started]
        wall = time.monotonic() - t0
        eps = [http("GET", f"{url}/v1/episodes/{s['episode']['id']}", key=key)[1] for s in started]
    finally:
        for h in handles:
            h.close()
    judge = sum(e["gpu_seconds"] for e in eps)
    return {
        "episodes": episodes,
        "policy_delay_s": delay,
        "jobs": [j["status"] for j in jobs],
        "end_reasons": [e["end_reason"] for e in eps],
        "rewards": [(e.get("result") or {}).get("reward") for e in eps],
        "speedups_vs_eager": [(e.get("result") or {}).get("speedup_vs_eager") for e in eps],
        "devices": [(e.get("result") or {}).get("device") for e in eps],
        "episode_ids": [e["id"] for e in eps],
        "turn_rewards": [
            [
                {
                    k: c.get(k)
                    for k in ("tool", "status", "reward", "speedup_vs_eager", "candidate_ms", "eager_ms")
                }
                for t in e["turns"]
                for c in t["rewards"]
            ]
            for e in eps
        ],
        "wall_s": round(wall, 2),
        "judge_s": round(judge, 2),
        "judge_share": round(judge / wall, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kforge", default=str(ROOT / "build" / "kforge"))
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--policy-delay", type=float, default=2.0)
    ap.add_argument("--task", default="softmax_rows", help="the example whose candidate the policy writes")
    ap.add_argument("--only", default="overhead,share")
    ap.add_argument("--json")
    args = ap.parse_args()
    var = Path(tempfile.mkdtemp(prefix="kforge-episode-bench-"))
    var.chmod(0o755)
    out: dict[str, Any] = {"backend": args.backend}
    try:
        url, key = up(args.kforge, var / "var", args.backend, max(1, args.episodes))
        if "overhead" in args.only:
            out["overhead"] = overhead(url, key, args.backend, args.turns)
            o = out["overhead"]
            print(
                f"per-turn overhead: median {o['overhead_ms_median']:.2f} ms, p90 {o['overhead_ms_p90']:.2f} ms "
                f"over {o['turns']} turns (goal < 20 ms; tools {o['tools_ms_median']:.1f} ms, "
                f"policy {o['policy_ms_median']:.1f} ms)",
                flush=True,
            )
        if "share" in args.only:
            out["share"] = judge_share(url, key, args.backend, args.task, args.episodes, args.policy_delay)
            s = out["share"]
            print(
                f"{s['episodes']} episodes, policy {s['policy_delay_s']} s per reply: wall {s['wall_s']} s, "
                f"judge {s['judge_s']} s, judge share {100 * s['judge_share']:.0f}% "
                f"(rewards {s['rewards']}, speedups vs eager {s['speedups_vs_eager']}, {s['end_reasons']}, "
                f"{s['devices']})",
                flush=True,
            )
    finally:
        subprocess.run([args.kforge, "down", "--var", str(var / "var")], capture_output=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        shutil.rmtree(var, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
