"""Bad requests get a 4xx with the registry's code and name in the error shape, a request id,
and store nothing (row counts of every table unchanged)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from servicekit import LIMITS, Stack, assert_error, failing_files, unique_task

SMALL = failing_files()


def _eval(tid: str, **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task_id": tid,
        "candidate": {"format": "native", "files": dict(SMALL)},
        "backend": "cpu",
        "options": {"no_compile": True, "budget_s": 0.2},
    }
    body.update(over)
    return body


def _files(files: dict[str, str]) -> dict[str, Any]:
    return {"format": "native", "files": files}


# (id, route, body: a dict (JSON) or bytes, extra headers, error names allowed, field expected)
# "TASK" in a body stands for the id of a valid task made by the module.
EVAL_CASES: list[tuple[str, dict | bytes, set[str] | str, str | None]] = [
    ("malformed json", b'{"task_id": ', "invalid_json", None),
    ("trailing garbage", b'{"task_id": "x"} {', "invalid_json", None),
    ("NaN literal", b'{"task_id": "TASK", "wait": NaN}', "invalid_json", None),
    (
        "invalid utf-8",
        b'{"task_id": "TASK", "candidate": {"files": {"model_new.py": "\xff\xfe"}}}',
        "invalid_json",
        None,
    ),
    ("empty body", b"", {"invalid_json", "missing_field"}, None),
    ("array body", b"[]", {"invalid_json", "invalid_field"}, None),
    ("missing candidate", {"task_id": "TASK", "backend": "cpu"}, "missing_field", "candidate"),
    (
        "neither task nor task_id",
        {"candidate": _files(SMALL), "backend": "cpu"},
        {"missing_field", "invalid_field"},
        None,
    ),
    ("task_id wrong type", _eval("TASK", task_id=12), "invalid_field", "task_id"),
    ("task_id not a uuid", _eval("TASK", task_id="nope"), {"invalid_field", "invalid_id"}, "task_id"),
    ("files wrong type", _eval("TASK", candidate={"files": "model_new.py"}), "invalid_field", None),
    ("file content wrong type", _eval("TASK", candidate=_files({"model_new.py": 5})), "invalid_field", None),
    ("no files", _eval("TASK", candidate=_files({})), {"invalid_field", "missing_field"}, None),
    ("format unknown", _eval("TASK", candidate={"format": "zip", "files": SMALL}), "invalid_field", None),
    ("backend unknown", _eval("TASK", backend="tpu"), {"invalid_field", "unsupported_backend"}, "backend"),
    ("backend wrong type", _eval("TASK", backend=1), {"invalid_field", "unsupported_backend"}, "backend"),
    ("unknown top-level field", _eval("TASK", bogus=1), "unknown_field", "bogus"),
    ("unknown option", _eval("TASK", options={"no_compile": True, "turbo": True}), "unknown_field", None),
    ("unknown candidate field", _eval("TASK", candidate={"files": SMALL, "x": 1}), "unknown_field", None),
    ("wait absurd", _eval("TASK", wait=1e12), "invalid_field", "wait"),
    ("wait negative", _eval("TASK", wait=-1), "invalid_field", "wait"),
    ("wait over wait_max_s", _eval("TASK", wait=LIMITS["wait_max_s"] + 1), "invalid_field", "wait"),
    ("wait wrong type", _eval("TASK", wait="soon"), "invalid_field", "wait"),
    ("budget negative", _eval("TASK", options={"budget_s": -1}), "invalid_field", None),
    ("budget zero", _eval("TASK", options={"budget_s": 0}), "invalid_field", None),
    ("budget absurd", _eval("TASK", options={"budget_s": 1e12}), "invalid_field", None),
    ("no_compile wrong type", _eval("TASK", options={"no_compile": "yes"}), "invalid_field", None),
    ("task and task_id", _eval("TASK", task={"source": "x"}), "invalid_field", None),
    (
        "inline task suite bad",
        {
            **{k: v for k, v in _eval("TASK").items() if k != "task_id"},
            "task": {"source": "x", "suite": "A b"},
        },
        "invalid_field",
        "task.suite",
    ),
    ("unknown task_id", _eval(str(uuid.uuid4())), "task_not_found", None),
    (
        "too many files",
        _eval("TASK", candidate=_files({f"f{i}.py": "" for i in range(LIMITS["max_files"] + 1)})),
        "too_many_files",
        None,
    ),
    (
        "file too large",
        _eval("TASK", candidate=_files({"model_new.py": "#" * (LIMITS["max_file_bytes"] + 1)})),
        "file_too_large",
        None,
    ),
]
for bad_name in (
    "../x",
    "/etc/passwd",
    "a//b",
    "a/../b",
    "..",
    "kernels/",
    "",
    "a b.py",
    "a\\b",
    "x\u00e9.py",
    "a/./../b",
):
    EVAL_CASES.append(
        (
            f"file name {bad_name!r}",
            _eval("TASK", candidate=_files({bad_name: "x = 1\n"})),
            "invalid_file_name",
            None,
        )
    )

TASK_CASES: list[tuple[str, dict | bytes, set[str] | str, str | None]] = [
    ("missing source", {"name": "x"}, "missing_field", "source"),
    ("source wrong type", {"source": 5}, "invalid_field", "source"),
    ("name too long", {"source": unique_task("long name"), "name": "n" * 129}, "invalid_field", "name"),
    ("name wrong type", {"source": unique_task("name type"), "name": ["a"]}, "invalid_field", "name"),
    (
        "backend unknown",
        {"source": unique_task("backend"), "backend": "tpu"},
        {"invalid_field", "unsupported_backend"},
        "backend",
    ),
    ("unknown field", {"source": unique_task("unknown"), "owner": "me"}, "unknown_field", "owner"),
    ("suite bad", {"source": unique_task("suite"), "suite": "_x"}, "invalid_field", "suite"),
    ("suite wrong type", {"source": unique_task("suite type"), "suite": 3}, "invalid_field", "suite"),
    ("source too large", {"source": "#" * (LIMITS["max_source_bytes"] + 1)}, "task_source_too_large", None),
    ("invalid utf-8", b'{"source": "\xc3\x28"}', "invalid_json", None),
]


@pytest.fixture(scope="module")
def task_id(stack: Stack) -> str:
    r = stack.api.post("/v1/tasks", {"source": unique_task("bad input"), "backend": "cpu"})
    assert r.status_code == 201, r.text
    return r.json()["task"]["id"]


def _send(stack: Stack, path: str, body: dict | bytes, task_id: str, **kw: Any):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    data = data.replace(b'"TASK"', json.dumps(task_id).encode())
    headers = {"Content-Type": "application/json", **kw.pop("headers", {})}
    return stack.api.post(path, data=data, headers=headers, **kw)


def _check(stack: Stack, r, names: set[str] | str, field: str | None, before: dict[str, int]) -> None:
    err = assert_error(r, names)
    assert 400 <= r.status_code < 500
    if field is not None:
        assert field in (err.get("field") or ""), err
    assert stack.counts() == before, "a refused request stored something"


@pytest.mark.parametrize("case,body,names,field", EVAL_CASES, ids=[c[0] for c in EVAL_CASES])
def test_bad_evaluation(stack: Stack, task_id: str, case: str, body: Any, names: Any, field: Any) -> None:
    before = stack.counts()
    _check(stack, _send(stack, "/v1/evaluations", body, task_id), names, field, before)


@pytest.mark.parametrize("case,body,names,field", TASK_CASES, ids=[c[0] for c in TASK_CASES])
def test_bad_task(stack: Stack, task_id: str, case: str, body: Any, names: Any, field: Any) -> None:
    before = stack.counts()
    _check(stack, _send(stack, "/v1/tasks", body, task_id), names, field, before)


def test_valid_body_is_accepted(stack: Stack, task_id: str) -> None:
    """The control: the body the cases above spoil is itself fine."""
    r = _send(stack, "/v1/evaluations", _eval("TASK"), task_id)
    assert r.status_code == 202, r.text
    nested = _eval(
        "TASK", candidate=_files({"model_new.py": "x = 1\n", "kernels/k.cpp": "", "a.b-c_d/e.cpp": ""})
    )
    assert _send(stack, "/v1/evaluations", nested, task_id).status_code == 202


@pytest.mark.parametrize("path", ["/v1/evaluations", "/v1/tasks"])
def test_body_over_max_body_bytes(stack: Stack, task_id: str, path: str) -> None:
    """413 before parsing: a huge body that is not even JSON is body_too_large, not invalid_json."""
    before = stack.counts()
    junk = b"x" * (LIMITS["max_body_bytes"] + 1)
    _check(stack, _send(stack, path, junk, task_id), "body_too_large", None, before)
    # valid JSON just over the limit, one file under max_file_bytes each
    n = LIMITS["max_body_bytes"] // LIMITS["max_file_bytes"] + 1
    files = {f"f{i}.py": "#" * (LIMITS["max_file_bytes"] - 10) for i in range(n)}
    _check(
        stack,
        _send(stack, path, _eval("TASK", candidate=_files(files)), task_id),
        "body_too_large",
        None,
        before,
    )


@pytest.mark.parametrize("blocks", [1, LIMITS["max_body_bytes"] // 4096 + 2])
def test_chunked_bodies_are_refused(stack: Stack, task_id: str, blocks: int) -> None:
    """A body without Content-Length (chunked), small or past the limit, is 411 length_required
    at the door: libmicrohttpd, which would parse its framing, never sees it."""
    before = stack.counts()

    def chunks():
        for _ in range(blocks):
            yield b"{" * 4096

    r = stack.api.post("/v1/evaluations", data=chunks(), headers={"Content-Type": "application/json"})
    _check(stack, r, "length_required", None, before)


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_wrong_media_type(stack: Stack, task_id: str, ctype: str) -> None:
    before = stack.counts()
    r = _send(stack, "/v1/evaluations", _eval("TASK"), task_id, headers={"Content-Type": ctype})
    _check(stack, r, "unsupported_media_type", None, before)


def test_json_with_charset_is_json(stack: Stack, task_id: str) -> None:
    r = _send(
        stack,
        "/v1/evaluations",
        _eval("TASK"),
        task_id,
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=201",
        "limit=-1",
        "limit=abc",
        "limit=1e12",
        "limit=",
        "after=not-a-cursor",
        "after=%00",
    ],
)
def test_bad_list_query(stack: Stack, query: str) -> None:
    before = stack.counts()
    err = assert_error(stack.api.get(f"/v1/tasks?{query}"), "invalid_query")
    assert err.get("field") == query.split("=")[0], err
    assert stack.counts() == before


@pytest.mark.parametrize(
    "path,name",
    [
        ("/v1/jobs/not-a-uuid", "invalid_id"),
        ("/v1/evaluations/123", "invalid_id"),
        ("/v1/tasks/%2e%2e", "invalid_id"),
        ("/v1/jobs/5d7e2b90-41c3-4f8a-b6d2-0e9a13c7f458", "job_not_found"),
        ("/v1/evaluations/c2a94f17-6e08-4b3d-9f51-8d7e0b26a3c9", "evaluation_not_found"),
        ("/v1/nothing", "not_found"),
        ("/v2/tasks", "not_found"),
        ("/" + "a" * 5000, "not_found"),
    ],
)
def test_bad_paths(stack: Stack, path: str, name: str) -> None:
    r = stack.api.get(path)
    if not path.startswith("/v1") and r.headers.get("Content-Type", "").startswith("text/html"):
        assert r.status_code == 404, "outside /v1, web_dir/404.html answers when there is one"
        return
    assert_error(r, name)


@pytest.mark.parametrize(
    "method,path,allow",
    [
        ("DELETE", "/v1/tasks", {"GET", "POST"}),
        ("PUT", "/v1/evaluations", {"POST"}),
        ("GET", "/v1/evaluations", {"POST"}),
        ("POST", "/v1/jobs/00000000-0000-4000-8000-000000000000", {"GET"}),
        ("GET", "/v1/jobs/00000000-0000-4000-8000-000000000000/cancel", {"POST"}),
        ("POST", "/healthz", {"GET"}),
    ],
)
def test_wrong_method(stack: Stack, method: str, path: str, allow: set[str]) -> None:
    before = stack.counts()
    r = stack.api.s.request(method, stack.api.url + path, headers=stack.api.headers(), timeout=10)
    assert_error(r, "method_not_allowed")
    got = {m.strip() for m in r.headers.get("Allow", "").split(",") if m.strip()}
    assert allow <= got and got <= allow | {"HEAD", "OPTIONS"}, r.headers
    assert stack.counts() == before
