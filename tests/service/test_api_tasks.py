"""POST /v1/tasks is idempotent by source; GET /v1/tasks pages newest first; check jobs set the
task's status."""

from __future__ import annotations

import hashlib
import uuid

from servicekit import CASES, Stack, assert_error, unique_task


def test_same_source_twice_is_one_task(stack: Stack) -> None:
    source = unique_task("idempotent")
    sha = hashlib.sha256(source.encode()).hexdigest()
    r1 = stack.api.post("/v1/tasks", {"source": source, "backend": "cpu"})
    assert r1.status_code == 201, r1.text
    task, job = r1.json()["task"], r1.json()["job"]
    assert task["sha256"] == sha and task["backend"] == "cpu" and task["status"] == "checking"
    assert task["name"] == "task-" + sha[:8] and task["check_job_id"] == job["id"]
    assert job["kind"] == "check_task" and job["status"] == "queued" and job["task_id"] == task["id"]
    assert job["class"] == "cpu" and job["attempt"] == 0
    before = stack.counts()

    r2 = stack.api.post("/v1/tasks", {"source": source, "backend": "cpu", "name": "another name"})
    assert r2.status_code == 200, r2.text
    assert r2.json()["job"] is None and r2.json()["task"]["id"] == task["id"]
    assert stack.counts() == before, "the second POST stored something"
    assert stack.psql(f"SELECT count(*) FROM tasks WHERE sha256 = '{sha}'") == "1"
    assert stack.psql(f"SELECT count(*) FROM jobs WHERE task_id = '{task['id']}'") == "1"
    xlen = stack.redis.command("XLEN", "kforge:jobs:cpu")
    assert xlen.startswith(":") and int(xlen[1:]) >= 1

    got = stack.api.get(f"/v1/tasks/{task['id']}")
    assert got.status_code == 200 and got.json()["source"] == source and got.json()["id"] == task["id"]


def test_named_task(stack: Stack) -> None:
    r = stack.api.post("/v1/tasks", {"source": unique_task("named"), "name": "my-task"})
    assert r.status_code == 201, r.text
    assert r.json()["task"]["name"] == "my-task"
    assert r.json()["task"]["backend"] == "cpu", "default_backend is cpu on the test server"


def test_list_pages_newest_first(stack: Stack) -> None:
    made = []
    for i in range(5):
        r = stack.api.post("/v1/tasks", {"source": unique_task(f"page {i}"), "backend": "cpu"})
        assert r.status_code == 201, r.text
        made.append(r.json()["task"]["id"])
    seen: list[dict] = []
    after: str | None = None
    for _ in range(100):
        q = "/v1/tasks?limit=2" + (f"&after={after}" if after else "")
        r = stack.api.get(q)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["tasks"]) <= 2
        seen += page["tasks"]
        after = page["next"]
        if after is None:
            break
    ids = [t["id"] for t in seen]
    assert len(ids) == len(set(ids)), "a task came twice across pages"
    assert int(stack.psql("SELECT count(*) FROM tasks")) == len(ids), "pagination lost tasks"
    # the five made last are the first five listed, newest first
    assert ids[:5] == list(reversed(made))
    stamps = [t["created_at"] for t in seen]
    assert stamps == sorted(stamps, reverse=True)
    assert all("source" not in t for t in seen), "the list carries no sources"


def test_unknown_and_malformed_task_ids(stack: Stack) -> None:
    assert_error(stack.api.get(f"/v1/tasks/{uuid.uuid4()}"), "task_not_found")
    assert_error(stack.api.get("/v1/tasks/not-a-uuid"), "invalid_id")


def test_check_jobs_set_task_status(stack: Stack, workers) -> None:
    """A fit task becomes ok with its check verdict; one that a null candidate passes, invalid."""
    fit = stack.api.post("/v1/tasks", {"source": unique_task("fit"), "backend": "cpu"}).json()
    const_src = (CASES / "task_constant.py").read_text() + f"\n# {uuid.uuid4()}\n"
    unfit = stack.api.post("/v1/tasks", {"source": const_src, "backend": "cpu"}).json()
    w = workers()
    for made, want in ((fit, "ok"), (unfit, "invalid")):
        job = stack.api.wait_job(made["job"]["id"], watch=[w])
        assert job["status"] == "succeeded", job
        task = stack.api.get(f"/v1/tasks/{made['task']['id']}").json()
        assert task["status"] == want, task
        assert task["check"] is not None and task["check"]["fit"] is (want == "ok"), task["check"]
