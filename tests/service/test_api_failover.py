"""A worker killed with SIGKILL in the middle of a job: a second worker finishes it, once."""

from __future__ import annotations

from servicekit import EXAMPLES, Stack, candidate_files, evaluation_body, unique_task, wait_until

FAST_TAKEOVER = {"lease_s": 4, "heartbeat_s": 1, "reconcile_s": 2}


def test_killed_worker_job_finished_once_by_another(stack: Stack, workers) -> None:
    files = candidate_files(EXAMPLES / "candidates" / "sum_dim" / "cpu")
    r = stack.api.post("/v1/evaluations", evaluation_body(unique_task("failover"), files))
    assert r.status_code == 202, r.text
    job_id, eval_id = r.json()["job"]["id"], r.json()["evaluation"]["id"]
    first = workers(**FAST_TAKEOVER)
    seen = []
    for ev in stack.api.events(job_id):
        seen.append(ev["event"])
        if ev["event"] == "building":
            break
    assert seen == ["queued", "claimed", "building"], seen
    first.kill_hard()
    assert stack.api.job(job_id)["status"] == "running"

    second = workers(**FAST_TAKEOVER)
    job = stack.api.wait_job(job_id, watch=[second])
    assert job["status"] == "succeeded", job
    assert job["attempt"] == 2, job
    rows = stack.psql(f"SELECT count(*), count(verdict) FROM evaluations WHERE job_id = '{job_id}'")
    assert rows == "1|1", rows
    ev = stack.api.get(f"/v1/evaluations/{eval_id}").json()
    assert ev["status"] == "ok" and ev["reward"] >= 1, ev
    kinds = stack.psql(f"SELECT string_agg(kind, ',' ORDER BY seq) FROM job_events WHERE job_id = '{job_id}'")
    kinds_list = kinds.split(",")
    assert kinds_list.count("done") == 1 and kinds_list[-1] == "done", kinds
    assert kinds_list.count("claimed") == 2, kinds
    # the stream answers the same story, ending once
    assert [e["event"] for e in stack.api.events(job_id, deadline_s=30)] == kinds_list
    # the stream empties: the dead worker's pending entry (or the reconciler's copy) is taken
    # over, found finished, acknowledged and deleted
    wait_until(lambda: stack.redis.command("XLEN", "kforge:jobs:cpu") == ":0", 60, "kforge:jobs:cpu to empty")
