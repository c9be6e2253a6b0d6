"""POST /v1/jobs/{id}/cancel: a queued job is cancelled at once and never runs; a running one is
stopped by its worker; a finished one answers 409 job_finished."""

from __future__ import annotations

import uuid

from servicekit import (
    CASES,
    Stack,
    assert_error,
    candidate_files,
    evaluation_body,
    failing_files,
    unique_task,
)


def _kinds(stack: Stack, job_id: str) -> list[str]:
    return stack.psql(
        f"SELECT string_agg(kind, ',' ORDER BY seq) FROM job_events WHERE job_id = '{job_id}'"
    ).split(",")


def test_cancel_queued_then_finished(stack: Stack, workers) -> None:
    # no worker yet: the job stays queued
    r = stack.api.post("/v1/evaluations", evaluation_body(unique_task("cancel"), failing_files()))
    assert r.status_code == 202, r.text
    queued = r.json()["job"]
    c = stack.api.post(f"/v1/jobs/{queued['id']}/cancel")
    assert c.status_code == 200, c.text
    assert c.json()["id"] == queued["id"] and c.json()["status"] == "cancelled"
    assert stack.api.job(queued["id"])["status"] == "cancelled"
    assert _kinds(stack, queued["id"]) == ["queued", "cancelled", "done"]
    ev = stack.api.get(f"/v1/evaluations/{r.json()['evaluation']['id']}").json()
    assert ev["job_status"] == "cancelled" and ev["verdict"] is None

    # a worker now drains the stream: it must skip the cancelled job and run the next one
    w = workers()
    r2 = stack.api.post("/v1/evaluations", evaluation_body(unique_task("finished"), failing_files()))
    assert r2.status_code == 202, r2.text
    done = stack.api.wait_job(r2.json()["job"]["id"], watch=[w])
    assert done["status"] == "succeeded", done
    after = stack.api.job(queued["id"])
    assert after["status"] == "cancelled" and after["attempt"] == 0 and after["claimed_at"] is None, after
    assert _kinds(stack, queued["id"]) == ["queued", "cancelled", "done"]

    err = assert_error(stack.api.post(f"/v1/jobs/{done['id']}/cancel"), "job_finished")
    assert "field" not in err or err["field"] is None
    assert stack.api.job(done["id"])["status"] == "succeeded"


def test_cancel_running(stack: Stack, workers) -> None:
    """A candidate that hangs at import (the harness would wait 600 s): cancel stops it."""
    files = candidate_files(CASES / "hangs_at_import")
    r = stack.api.post("/v1/evaluations", evaluation_body(unique_task("hangs"), files))
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    w = workers()
    for ev in stack.api.events(job_id):
        if ev["event"] == "building":
            break
    c = stack.api.post(f"/v1/jobs/{job_id}/cancel")
    assert c.status_code == 200, c.text
    assert c.json()["cancel_requested"] is True or c.json()["status"] == "cancelled", c.json()
    job = stack.api.wait_job(job_id, deadline_s=60, watch=[w])
    assert job["status"] == "cancelled", job
    kinds = _kinds(stack, job_id)
    assert kinds[-2:] == ["cancelled", "done"] and kinds.count("done") == 1, kinds
    assert w.alive(), "the worker survives a cancel"


def test_cancel_unknown_job(stack: Stack) -> None:
    assert_error(stack.api.post(f"/v1/jobs/{uuid.uuid4()}/cancel"), "job_not_found")
    assert_error(stack.api.post("/v1/jobs/xyz/cancel"), "invalid_id")


def test_cancel_queued_optimize_ends_its_episode(stack: Stack) -> None:
    """A queued optimize job cancelled at once takes its episode along: `cancelled`, with its
    end, not `queued` for ever (the UI would say it is still running)."""
    r = stack.api.post("/v1/optimize", {"task": {"source": unique_task("cancel optimize")}, "backend": "cpu"})
    assert r.status_code == 202, r.text
    job_id, episode_id = r.json()["job"]["id"], r.json()["episode"]["id"]
    assert stack.api.get(f"/v1/episodes/{episode_id}").json()["status"] == "queued"
    c = stack.api.post(f"/v1/jobs/{job_id}/cancel")
    assert c.status_code == 200 and c.json()["status"] == "cancelled", c.text
    ep = stack.api.get(f"/v1/episodes/{episode_id}").json()
    assert ep["status"] == "cancelled" and ep["end_reason"] == "cancelled", ep
    assert ep["finished_at"], ep
