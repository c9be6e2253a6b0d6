"""Liveness (server/readyz_get.c, server/liveness.c, workers/heartbeat.c): /readyz fails while a
class that needs a worker has no live one, a job accepted for such a class says so in its reply
and in /metrics, and a task whose check failed stops the jobs queued behind it and is refused at
submit with the check's reasons. The tests run in order on this module's stack."""

from __future__ import annotations

import re
import uuid

from servicekit import CASES, Stack, assert_error, unique_task, wait_until

FAST = {"heartbeat_s": 1}  # a crashed worker's heartbeat is gone within 3 s


def _metric(stack: Stack, name: str, labels: str) -> float | None:
    text = stack.api.get("/metrics").text
    m = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def _ready(stack: Stack) -> bool:
    return stack.api.get("/readyz").status_code == 200


def test_ready_when_nothing_needs_a_worker(stack: Stack) -> None:
    r = stack.api.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ready", "database": "ok", "redis": "ok", "classes": {}}


def test_job_without_a_worker_then_the_check_refuses_its_task(stack: Stack, workers) -> None:
    """No worker: POST /v1/optimize of a task the check will refuse is accepted with a warning,
    /readyz names the class, the metric counts the job. A worker then runs the check first: the
    optimize job queued behind it fails with the check's reasons (its episode ends task_invalid,
    not `unsupported`), and the same task is refused at submit (422 with those reasons)."""
    source = (CASES / "task_constant.py").read_text() + f"\n# liveness {uuid.uuid4()}\n"
    r = stack.api.post("/v1/optimize", {"task": {"source": source}, "backend": "cpu"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["warnings"] == [
        {
            "name": "no_live_worker",
            "class": "cpu",
            "message": "no live worker serves class cpu: the job waits until a worker of that class starts",
        }
    ], body
    job_id, episode_id = body["job"]["id"], body["episode"]["id"]
    err = assert_error(stack.api.get("/readyz"), "no_live_worker")
    assert "class cpu (2 jobs waiting)" in err["message"], err
    assert (_metric(stack, "kforge_jobs_unserved_total", 'class="cpu"') or 0) >= 2
    assert _metric(stack, "kforge_class_workers", 'class="cpu"') == 0

    w = workers(**FAST)
    job = stack.api.wait_job(job_id, watch=[w])
    assert job["status"] == "failed", job
    assert job["error"]["reason"] == "task_invalid", job
    assert any("does not depend on the inputs" in x for x in job["error"]["reasons"]), job
    ep = stack.api.get(f"/v1/episodes/{episode_id}").json()
    assert ep["status"] == "failed" and ep["end_reason"] == "task_invalid", ep
    assert "does not depend on the inputs" in (ep["end_detail"] or ""), ep
    kinds = stack.psql(f"SELECT string_agg(kind, ',' ORDER BY seq) FROM job_events WHERE job_id = '{job_id}'")
    assert kinds == "queued,done", kinds

    for body in (
        {"task": {"source": source}, "backend": "cpu"},
        {"task_id": job["task_id"], "backend": "cpu"},
    ):
        err = assert_error(stack.api.post("/v1/optimize", body), "task_invalid")
        assert err["message"].startswith("the task failed its check: "), err
        assert "does not depend on the inputs" in err["message"], err
    ev = {
        "task_id": job["task_id"],
        "candidate": {"format": "native", "files": {"model_new.py": "x = 1\n"}},
        "backend": "cpu",
    }
    err = assert_error(stack.api.post("/v1/evaluations", ev), "task_invalid")
    assert "does not depend on the inputs" in err["message"], err

    # with the worker alive: ready, the class listed, a new job without a warning
    wait_until(lambda: _ready(stack), 15, "/readyz to see the worker")
    assert stack.api.get("/readyz").json()["classes"]["cpu"]["workers"] == 1
    r = stack.api.post("/v1/tasks", {"source": unique_task("liveness served"), "backend": "cpu"})
    assert r.status_code == 201 and "warnings" not in r.json(), r.text
    stack.api.wait_job(r.json()["job"]["id"], watch=[w])


def test_a_crashed_worker_leaves_its_class_unserved(stack: Stack, workers) -> None:
    """A worker killed with SIGKILL: its class stays registered, so /readyz fails once its
    heartbeat expires, though no job waits; a worker that stops on purpose takes the class
    along when it is the last."""
    w = workers(**FAST)
    wait_until(
        lambda: _ready(stack) and stack.api.get("/readyz").json()["classes"].get("cpu"), 15, "the worker"
    )
    w.kill_hard()
    err = wait_until(
        lambda: stack.api.get("/readyz").status_code == 503 and stack.api.get("/readyz").json()["error"],
        15,
        "/readyz to notice the dead worker",
    )
    assert err["name"] == "no_live_worker" and "class cpu (0 jobs waiting)" in err["message"], err
    w2 = workers(**FAST)
    wait_until(lambda: _ready(stack), 15, "/readyz with a new worker")
    assert w2.stop(timeout=20) == 0
    r = stack.api.get("/readyz")
    assert r.status_code == 200 and r.json()["classes"] == {}, r.text
