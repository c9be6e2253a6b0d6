"""GET /v1/jobs/{id}/events: the job's events live and in order; Last-Event-ID resumes."""

from __future__ import annotations

import uuid

import pytest
from servicekit import EXAMPLES, Stack, assert_error, candidate_files, evaluation_body, unique_task

PHASES = ["queued", "claimed", "building", "verifying", "timing", "done"]


@pytest.fixture(scope="module")
def finished_job(stack: Stack) -> dict:
    """One good evaluation followed live from before a worker exists to its end."""
    files = candidate_files(EXAMPLES / "candidates" / "sum_dim" / "cpu")
    r = stack.api.post("/v1/evaluations", evaluation_body(unique_task("events"), files))
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    stream = stack.api.events(job_id)
    first = next(stream)  # the stream is open before the worker starts
    w = stack.worker()
    live = [first, *stream]
    w.stop(timeout=20)
    return {"id": job_id, "live": live}


def test_live_events_in_order(stack: Stack, finished_job: dict) -> None:
    live = finished_job["live"]
    assert [e["event"] for e in live] == PHASES, live
    for n, e in enumerate(live, start=1):
        assert e["id"] == str(n)
        d = e["data"]
        assert d["job_id"] == finished_job["id"] and d["seq"] == n and d["kind"] == e["event"]
        assert isinstance(d["at"], str) and isinstance(d["data"], dict)
    ats = [e["data"]["at"] for e in live]
    assert ats == sorted(ats)
    assert stack.api.job(finished_job["id"])["status"] == "succeeded"


def test_replay_after_the_end_is_the_same(stack: Stack, finished_job: dict) -> None:
    again = list(stack.api.events(finished_job["id"], deadline_s=30))
    assert [e["data"] for e in again] == [e["data"] for e in finished_job["live"]]


@pytest.mark.parametrize("last", [0, 2, 3, 5])
def test_last_event_id_resumes(stack: Stack, finished_job: dict, last: int) -> None:
    got = list(stack.api.events(finished_job["id"], last_event_id=last, deadline_s=30))
    assert [e["event"] for e in got] == PHASES[last:]
    assert [int(e["id"]) for e in got] == list(range(last + 1, len(PHASES) + 1))


def test_resume_after_done_ends_at_once(stack: Stack, finished_job: dict) -> None:
    got = stack.api.events(finished_job["id"], last_event_id=len(PHASES), deadline_s=10, silence_s=10)
    assert list(got) == []


def test_events_of_unknown_job(stack: Stack) -> None:
    assert_error(stack.api.get(f"/v1/jobs/{uuid.uuid4()}/events"), "job_not_found")
