"""Scale-out on one machine, as if on several hosts: three cpu workers (separate processes, each
with its own var directory and name, one PostgreSQL and one Redis) share a batch of evaluations
and expert episodes. One worker is killed with SIGKILL in the middle of a job. Every job ends
once: one verdict per evaluation, one finished episode per optimize job whose turns are those
of its last attempt, one `done` event each, and the stream empties. (The same on two GPUs of
one host: bench/scale_bench.py, run on the device by scripts/gpu_scale.sh.)"""

from __future__ import annotations

import re
import uuid
from typing import Any

from servicekit import EXAMPLES, Stack, candidate_files, evaluation_body, example_task, wait_until

FAST_TAKEOVER = {"lease_s": 4, "heartbeat_s": 1, "reconcile_s": 2}
EVALUATED = ["gelu", "sum_dim", "rms_norm", "softmax_rows"]
OPTIMIZED = ["gelu"]


def enqueue(stack: Stack) -> dict[str, dict[str, Any]]:
    """The batch: job id -> what the job is (kind, and its evaluation or episode id)."""
    jobs: dict[str, dict[str, Any]] = {}
    for name in EVALUATED:
        files = candidate_files(EXAMPLES / "candidates" / name / "cpu")
        body = evaluation_body(f"# scale-out {uuid.uuid4()}\n" + example_task(name), files)
        r = stack.api.post("/v1/evaluations", body)
        assert r.status_code == 202, r.text
        jobs[r.json()["job"]["id"]] = {"kind": "evaluate", "id": r.json()["evaluation"]["id"]}
    for name in OPTIMIZED:
        body = {
            "task": {"name": name, "source": f"# {uuid.uuid4()}\n" + example_task(name)},
            "backend": "cpu",
            "policy": {"name": "expert"},
            "options": {"budget_s": 0.2, "no_compile": True},
        }
        r = stack.api.post("/v1/optimize", body)
        assert r.status_code == 202, r.text
        jobs[r.json()["job"]["id"]] = {"kind": "optimize", "id": r.json()["episode"]["id"]}
    return jobs


def running_on(stack: Stack, worker_names: set[str]) -> tuple[str, str] | None:
    """A running job (an episode first: the longest) and the worker that holds it, once one holds a
    job past its claim."""
    rows = stack.psql(
        "SELECT j.id, j.lease_owner FROM jobs j WHERE j.status = 'running' AND EXISTS "
        "(SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.kind IN ('building', 'turn'))"
        " ORDER BY j.kind = 'optimize' DESC"
    )
    for line in rows.splitlines():
        job_id, owner = line.split("|")
        if owner in worker_names:
            return job_id, owner
    return None


def test_three_workers_share_a_batch_and_survive_a_kill(stack: Stack, workers) -> None:
    jobs = enqueue(stack)
    names = [f"scale-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    started = {n: workers(worker_name=n, **FAST_TAKEOVER) for n in names}

    # /metrics labels each live worker by name, host, GPU ("" on cpu) and class, and shows who is busy
    def metric(family: str, name: str) -> str | None:
        m = re.search(
            rf'^{family}{{worker="{name}",host="[^"]+",gpu="",class="cpu"}} (\d)$',
            stack.api.get("/metrics").text,
            re.M,
        )
        return m.group(1) if m else None

    wait_until(
        lambda: all(metric("kforge_worker_up", n) == "1" for n in names), 30, "three workers in /metrics"
    )
    wait_until(lambda: any(metric("kforge_worker_busy", n) == "1" for n in names), 30, "a busy worker")
    victim_job, victim = wait_until(lambda: running_on(stack, set(names)), 300, "a worker to hold a job")
    started[victim].kill_hard()
    alive = [p for n, p in started.items() if n != victim]

    done = {j: stack.api.wait_job(j, deadline_s=900, watch=alive) for j in jobs}
    assert all(j["status"] == "succeeded" for j in done.values()), done
    assert done[victim_job]["attempt"] >= 2, done[victim_job]

    for job_id, what in jobs.items():
        kinds = stack.psql(
            f"SELECT string_agg(kind, ',' ORDER BY seq) FROM job_events WHERE job_id = '{job_id}'"
        )
        kinds_list = kinds.split(",")
        assert kinds_list.count("done") == 1 and kinds_list[-1] == "done", (job_id, kinds)
        if what["kind"] == "evaluate":
            rows = stack.psql(f"SELECT count(*), count(verdict) FROM evaluations WHERE job_id = '{job_id}'")
            assert rows == "1|1", (job_id, rows)
            ev = stack.api.get(f"/v1/evaluations/{what['id']}").json()
            assert ev["status"] == "ok" and ev["reward"] >= 1, ev
        else:
            ep = stack.api.get(f"/v1/episodes/{what['id']}").json()
            assert ep["status"] == "finished" and ep["end_reason"] == "submitted", ep["end_reason"]
            assert ep["result"]["reward"] >= 1, ep["result"]
            # the turns are those of the attempt that finished, numbered from 0 without gaps
            attempt = stack.psql(f"SELECT attempt FROM episodes WHERE id = '{what['id']}'")
            assert attempt == str(done[job_id]["attempt"]), (attempt, done[job_id])
            assert [t["idx"] for t in ep["turns"]] == list(range(len(ep["turns"]))), ep["turns"]

    # the work was shared, and the last claim of every job (the one that finished it) is a live worker's
    ids = ",".join(f"'{j}'" for j in jobs)
    last = stack.psql(
        "SELECT DISTINCT ON (job_id) data->>'worker' FROM job_events "
        f"WHERE kind = 'claimed' AND job_id IN ({ids}) ORDER BY job_id, seq DESC"
    ).split()
    assert len(last) == len(jobs) and victim not in last, (victim, last)
    claimers = set(
        stack.psql(
            f"SELECT DISTINCT data->>'worker' FROM job_events WHERE kind = 'claimed' AND job_id IN ({ids})"
        ).split()
    )
    assert claimers <= set(names) and len(claimers) >= 2, claimers
    wait_until(lambda: stack.redis.command("XLEN", "kforge:jobs:cpu") == ":0", 60, "kforge:jobs:cpu to empty")
