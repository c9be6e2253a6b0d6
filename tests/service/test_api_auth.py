"""API keys on writes, revocation, the per-key rate limit, and request ids."""

from __future__ import annotations

import re
import time

import pytest
from servicekit import Api, Stack, assert_error, cli, unique_task

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _task(tag: str) -> dict:
    return {"source": unique_task(tag), "backend": "cpu"}


def test_writes_need_a_key(stack: Stack) -> None:
    before = stack.counts()
    assert_error(stack.api.post("/v1/tasks", _task("nokey"), key=None), "unauthorized")
    for malformed in (
        "Basic Zm9vOmJhcg==",
        "Bearer",
        "Bearer ",
        "Bearer not-a-key",
        "kf_0badc0de_" + "1" * 40,
    ):
        r = stack.api.post("/v1/tasks", _task("malformed"), key=None, headers={"Authorization": malformed})
        assert_error(r, "unauthorized")
    unknown = "kf_0badc0de_" + "1" * 40
    assert_error(stack.api.post("/v1/tasks", _task("unknown"), key=unknown), "forbidden")
    # the real prefix with a wrong secret
    forged = stack.key[: len("kf_00000000_")] + "2" * 40
    assert_error(stack.api.post("/v1/tasks", _task("forged"), key=forged), "forbidden")
    assert stack.counts() == before, "a refused write stored something"


def test_private_reads_need_the_key(stack: Stack) -> None:
    """A task nobody published is its submitter's: without a key it is not found (and not
    listed); a key that was sent is checked on reads too."""
    r = stack.api.post("/v1/tasks", _task("private"))
    assert r.status_code == 201, r.text
    tid = r.json()["task"]["id"]
    assert stack.api.get(f"/v1/tasks/{tid}").status_code == 200
    assert_error(stack.api.get(f"/v1/tasks/{tid}", key=None), "task_not_found")
    listed = stack.api.get("/v1/tasks?limit=200", key=None)
    assert listed.status_code == 200 and tid not in {t["id"] for t in listed.json()["tasks"]}
    assert_error(stack.api.get(f"/v1/tasks/{tid}", key="kf_0badc0de_" + "1" * 40), "forbidden")


def test_revoked_key_is_forbidden(stack: Stack) -> None:
    key = cli(stack.env(), "keys", "create", "--name", "to-revoke").strip()
    prefix = key.split("_")[1]
    ok = stack.api.post("/v1/tasks", _task("before revoke"), key=key)
    assert ok.status_code == 201, ok.text
    cli(stack.env(), "keys", "revoke", prefix)
    assert stack.psql(f"SELECT revoked_at IS NOT NULL FROM api_keys WHERE prefix = '{prefix}'") == "t"
    before = stack.counts()
    assert_error(stack.api.post("/v1/tasks", _task("after revoke"), key=key), "forbidden")
    assert stack.counts() == before
    # the other key still works
    assert stack.api.post("/v1/tasks", _task("other key")).status_code == 201


def test_rate_limit(stack: Stack) -> None:
    """A second server on the same database and Redis with rate_limit=5: the 6th write of a
    minute is 429 with Retry-After, for that key only."""
    server = stack.start_server(rate_limit=5)
    key = cli(stack.env(), "keys", "create", "--name", "limited").strip()
    api = Api(server.url, key)
    # the limit counts per clock minute: start well inside one
    if time.time() % 60 > 50:
        time.sleep(61 - time.time() % 60)
    source = _task("rate")
    codes = [api.post("/v1/tasks", source).status_code for _ in range(5)]
    assert codes == [201, 200, 200, 200, 200], codes
    r = api.post("/v1/tasks", source)
    err = assert_error(r, "rate_limited")
    retry = r.headers.get("Retry-After")
    assert retry is not None and retry.isdigit() and 1 <= int(retry) <= 60, (retry, err)
    # another key is not limited by this one's count, and reads are not writes
    other = cli(stack.env(), "keys", "create", "--name", "unlimited").strip()
    assert Api(server.url, other).post("/v1/tasks", source).status_code == 200
    assert api.get("/healthz").status_code == 200
    server.stop()


@pytest.mark.parametrize(
    "path", ["/healthz", "/v1/tasks", "/v1/jobs/3f0c5a4e-9b1d-4c57-a1e2-7d6b8f90c312", "/nowhere"]
)
def test_request_ids(stack: Stack, path: str) -> None:
    mine = stack.api.get(path, headers={"X-Request-Id": "test-req.42_A"})
    assert mine.headers.get("X-Request-Id") == "test-req.42_A"
    for bad in ("has space", "x" * 65, "semi;colon"):
        r = stack.api.get(path, headers={"X-Request-Id": bad})
        assert UUID.fullmatch(r.headers.get("X-Request-Id", "")), (bad, r.headers)
    fresh = stack.api.get(path)
    assert UUID.fullmatch(fresh.headers.get("X-Request-Id", "")), fresh.headers
    if fresh.status_code >= 400 and not fresh.headers["Content-Type"].startswith("text/html"):
        # (outside /v1, web_dir/404.html answers an unknown path when there is one)
        assert fresh.json()["error"]["request_id"] == fresh.headers["X-Request-Id"]
