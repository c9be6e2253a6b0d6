"""Redis and PostgreSQL restarted under load: no job is lost, and the API answers 503 (never
hangs) while one is down, with /healthz still 200."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
from servicekit import (
    EXAMPLES,
    Api,
    PgCluster,
    Stack,
    assert_error,
    candidate_files,
    evaluation_body,
    example_task,
    failing_files,
    unique_task,
    wait_until,
)

FAST = {"lease_s": 4, "heartbeat_s": 1, "reconcile_s": 2}
N_JOBS = 4


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """This module stops PostgreSQL: it gets a cluster of its own."""
    cluster = PgCluster()
    cluster.start()
    s = Stack(cluster, tmp_path_factory.mktemp("stack-deps"), rate_limit=600)
    yield s
    s.close()
    cluster.close()


def _submit(stack: Stack, tag: str) -> list[str]:
    ids = []
    for i in range(N_JOBS):
        r = stack.api.post("/v1/evaluations", evaluation_body(unique_task(f"{tag} {i}"), failing_files()))
        assert r.status_code == 202, r.text
        ids.append(r.json()["job"]["id"])
    return ids


def _write_while_down(stack: Stack, name: str, server_url: str | None = None) -> requests.Response:
    """A write, bounded by a 5 s client timeout (it must not hang)."""
    api = stack.api if server_url is None else Api(server_url, stack.key)
    try:
        return api.post("/v1/evaluations", evaluation_body(unique_task("down"), failing_files()), timeout=5)
    except requests.Timeout:
        pytest.fail(f"POST /v1/evaluations hung (> 5 s) while {name} was down")


def _health_while_down(stack: Stack, name: str) -> None:
    h = stack.api.get("/healthz", timeout=5)
    assert h.status_code == 200 and h.json() == {"status": "ok"}
    ready = stack.api.get("/readyz", timeout=5)
    err = assert_error(ready, {"database_unavailable", "queue_unavailable"})
    assert err["name"] == ("database_unavailable" if name == "postgres" else "queue_unavailable"), err


def _all_succeeded(stack: Stack, ids: list[str]) -> None:
    for job_id in ids:
        job = stack.api.wait_job(job_id)
        assert job["status"] == "succeeded", job
        ev = stack.psql(f"SELECT count(*), count(verdict) FROM evaluations WHERE job_id = '{job_id}'")
        assert ev == "1|1", (job_id, ev)
        kinds = stack.psql(
            f"SELECT string_agg(kind, ',' ORDER BY seq) FROM job_events WHERE job_id = '{job_id}'"
        )
        assert kinds.split(",").count("done") == 1, kinds


def test_redis_restarted_empty(stack: Stack, workers) -> None:
    """The stack runs with the default rate limit (600 writes a minute), so a write needs Redis."""
    w = workers(**FAST)
    ids = _submit(stack, "redis")
    # in flight: wait for the worker to hold one of them
    wait_until(lambda: any(stack.api.job(j)["status"] == "running" for j in ids), 120, "a running job")
    # a key nobody else writes: its absence after the restart shows Redis came back empty (the
    # stream itself may already be back, re-filled by the reconciler within milliseconds)
    assert stack.redis.command("SET", "kforge:test:before-restart", "1") == "+OK"
    stack.redis.kill()
    try:
        assert_error(_write_while_down(stack, "redis"), "queue_unavailable")
        _health_while_down(stack, "redis")
        # GETs need PostgreSQL only
        assert stack.api.get(f"/v1/jobs/{ids[0]}", timeout=5).status_code == 200
    finally:
        stack.redis.start()  # same port, no data: every stream entry and the consumer group are gone
    assert stack.redis.command("EXISTS", "kforge:test:before-restart") == ":0"
    _all_succeeded(stack, ids)
    assert w.alive(), "the worker survives Redis going away"
    assert stack.api.get("/readyz", timeout=5).status_code == 200
    # and new work flows again through the new Redis
    _all_succeeded(stack, _submit(stack, "redis after"))


def test_write_without_rate_limit_while_redis_down(stack: Stack, workers) -> None:
    """Without a rate limit a write needs Redis only for its XADD: the contract accepts it (202)
    while Redis is down, and the job, kept in PostgreSQL, is dispatched by the reconciler once
    Redis is back, and finishes."""
    w = workers(**FAST)
    unlimited = stack.start_server(rate_limit=0)
    stack.redis.kill()
    try:
        r = _write_while_down(stack, "redis", unlimited.url)
    finally:
        stack.redis.start()
    assert r.status_code == 202, r.text
    _all_succeeded(stack, [r.json()["job"]["id"]])
    unlimited.stop()
    assert w.alive()


def test_postgres_restarted(stack: Stack, workers) -> None:
    w = workers(**FAST)
    ids = _submit(stack, "postgres")
    wait_until(lambda: any(stack.api.job(j)["status"] == "running" for j in ids), 120, "a running job")
    stack.cluster.stop("immediate")
    try:
        assert_error(_write_while_down(stack, "postgres"), "database_unavailable")
        try:
            r = stack.api.get(f"/v1/jobs/{ids[0]}", timeout=5)
        except requests.Timeout:
            pytest.fail("GET /v1/jobs/{id} hung (> 5 s) while PostgreSQL was down")
        assert_error(r, "database_unavailable")
        _health_while_down(stack, "postgres")
    finally:
        stack.cluster.start()
    _all_succeeded(stack, ids)
    assert w.alive(), "the worker survives PostgreSQL going away"
    assert stack.api.get("/readyz", timeout=5).status_code == 200
    _all_succeeded(stack, _submit(stack, "postgres after"))


def test_backlog_does_not_fill_the_stream(stack: Stack, workers) -> None:
    """Jobs waiting behind a running one keep their one entry: the reconciler, which runs every
    2 s here, re-adds only jobs without an entry (before, each pass added a copy of each)."""
    # a first job that runs for tens of seconds (torch.compile baseline, 3 s budgets)
    slow = evaluation_body(
        example_task("gelu"),
        candidate_files(EXAMPLES / "candidates" / "gelu" / "cpu"),
        options={"budget_s": 3.0},
    )
    r = stack.api.post("/v1/evaluations", slow)
    assert r.status_code == 202, r.text
    first = r.json()["job"]["id"]
    w = workers(**FAST)
    wait_until(lambda: stack.api.job(first)["status"] == "running", 120, "the first job running")
    waiting = _submit(stack, "backlog")
    time.sleep(7)  # three reconcile periods (this is not a timing assertion)
    assert stack.api.job(first)["status"] == "running", "the first job ended too soon to tell"
    entries = int(stack.redis.command("XLEN", "kforge:jobs:cpu").lstrip(":"))
    # each inline task also brings its check_task job: count the unfinished jobs themselves
    jobs = int(stack.psql("SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')"))
    assert jobs >= len(waiting) + 1
    assert entries <= jobs, f"{entries} stream entries for {jobs} unfinished jobs"
    _all_succeeded(stack, [first, *waiting])
    assert w.alive()
