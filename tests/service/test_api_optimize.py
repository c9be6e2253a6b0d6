"""POST /v1/optimize: the 202 reply and its Location, the rows one request writes (the optimize
job with its payload and queued event, the episode with its policy_config and limits, the inline
task with its check job), the job on its Redis stream, the reads that follow (GET /v1/jobs/{id},
GET /v1/episodes/{id}), and every refusal with the field it names. No worker runs here: the
agent loop is tested elsewhere, so every job stays queued."""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any

import pytest
from servicekit import LIMITS, Api, Stack, assert_error, cli, unique_task

DEFAULT_LIMITS = {
    "max_turns": 200,
    "max_context_tokens": 131072,
    "max_wall_s": 3600,
    "max_gpu_s": 1800,
    "max_tool_output_bytes": 16384,
}
LIMIT_BOUNDS = {
    "max_turns": (1, 1000),
    "max_context_tokens": (1024, 1048576),
    "max_wall_s": (10, 86400),
    "max_gpu_s": (1, 86400),
    "max_tool_output_bytes": (1024, 1048576),
}
JOB_KEYS = {
    "id", "kind", "status", "class", "backend", "task_id", "attempt", "cancel_requested",
    "created_at", "claimed_at", "finished_at", "result", "error", "device", "evaluation_id",
    "episode_id",
}  # fmt: skip
OPENAI = {
    "name": "openai",
    "base_url": "http://127.0.0.1:8000/v1",
    "model": "qwen-coder",
    "api_key_name": "VLLM_1",
    "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 4096, "seed": 7, "stop": ["</s>"]},
    "return_token_ids": True,
    "logprobs": 5,
}


# ---- helpers ------------------------------------------------------------------------------------


def _resp(f: Any) -> Any:
    """One RESP value from a socket file (bulk strings as str, arrays as lists)."""
    line = f.readline().decode().rstrip("\r\n")
    kind, rest = line[0], line[1:]
    if kind in "+-":
        return rest
    if kind == ":":
        return int(rest)
    if kind == "$":
        if int(rest) < 0:
            return None
        data = f.read(int(rest) + 2)
        return data[:-2].decode()
    if kind == "*":
        return [] if int(rest) < 0 else [_resp(f) for _ in range(int(rest))]
    raise AssertionError(f"unexpected RESP line {line!r}")


def stream_jobs(stack: Stack, klass: str = "cpu") -> list[str]:
    """The job ids of the entries of kforge:jobs:CLASS, oldest first (XRANGE - +)."""
    args = ["XRANGE", f"kforge:jobs:{klass}", "-", "+"]
    cmd = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
    with socket.create_connection(("127.0.0.1", stack.redis.port), timeout=5) as s:
        s.sendall(cmd.encode())
        entries = _resp(s.makefile("rb"))
    out = []
    for _entry_id, fields in entries:
        pairs = dict(zip(fields[::2], fields[1::2]))
        out.append(pairs["job"])
    return out


def row(stack: Stack, sql: str) -> Any:
    """The one JSON value a query returns (None when it returns no row)."""
    text = stack.psql(sql)
    return json.loads(text) if text else None


def episode_row(stack: Stack, episode_id: str) -> dict[str, Any]:
    return row(stack, f"SELECT row_to_json(e)::text FROM episodes e WHERE e.id = '{episode_id}'")


def job_row(stack: Stack, job_id: str) -> dict[str, Any]:
    return row(stack, f"SELECT row_to_json(j)::text FROM jobs j WHERE j.id = '{job_id}'")


def counts(stack: Stack) -> dict[str, int]:
    c = stack.counts()
    c["episodes"] = int(stack.psql("SELECT count(*) FROM episodes"))
    return c


def new_task(stack: Stack, tag: str) -> str:
    """A task made through POST /v1/tasks; no worker runs, so it stays `checking`."""
    r = stack.api.post("/v1/tasks", {"source": unique_task(tag), "backend": "cpu"})
    assert r.status_code == 201, r.text
    return r.json()["task"]["id"]


def optimize(stack: Stack, body: dict[str, Any], **kw: Any) -> Any:
    return stack.api.post("/v1/optimize", body, **kw)


def accepted(r: Any) -> dict[str, Any]:
    """Checks the documented 202 (OptimizeCreated, Location) and returns its body."""
    assert r.status_code == 202, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.headers.get("X-Request-Id")
    body = r.json()
    # no worker runs in this module: every reply warns that none serves the job's class
    assert set(body) == {"job", "episode", "warnings"}, body
    assert [w["name"] for w in body["warnings"]] == ["no_live_worker"], body["warnings"]
    job, ep = body["job"], body["episode"]
    assert set(job) == JOB_KEYS, set(job) ^ JOB_KEYS
    assert job["kind"] == "optimize" and job["status"] == "queued" and job["attempt"] == 0
    assert job["cancel_requested"] is False and job["evaluation_id"] is None
    assert job["result"] is None and job["error"] is None and job["device"] is None
    assert job["claimed_at"] is None and job["finished_at"] is None
    assert job["created_at"].endswith("Z") and "T" in job["created_at"]
    assert set(ep) == {"id", "status"} and ep["status"] == "queued", ep
    uuid.UUID(ep["id"])
    assert job["episode_id"] == ep["id"], (job, ep)
    assert r.headers.get("Location") == f"/v1/jobs/{job['id']}", r.headers
    return body


@pytest.fixture(scope="module")
def task_id(stack: Stack) -> str:
    return new_task(stack, "optimize")


# ---- what one request writes ------------------------------------------------------------------


def test_expert_by_task_id_with_defaults(stack: Stack, task_id: str) -> None:
    """The smallest request: the expert policy, every limit at its default. The task is still
    `checking` (no worker runs): accepted, as POST /v1/evaluations does."""
    assert stack.psql(f"SELECT status FROM tasks WHERE id = '{task_id}'") == "checking"
    before = counts(stack)
    body = accepted(optimize(stack, {"task_id": task_id, "backend": "cpu"}))
    job, ep = body["job"], body["episode"]
    assert job["task_id"] == task_id and job["backend"] == "cpu" and job["class"] == "cpu"
    after = counts(stack)
    assert after["jobs"] == before["jobs"] + 1 and after["episodes"] == before["episodes"] + 1
    assert after["tasks"] == before["tasks"] and after["job_events"] == before["job_events"] + 1
    assert after["candidates"] == before["candidates"] and after["evaluations"] == before["evaluations"]

    e = episode_row(stack, ep["id"])
    assert e["job_id"] == job["id"] and e["task_id"] == task_id and e["backend"] == "cpu"
    assert e["policy"] == "expert" and e["policy_config"] == {} and e["status"] == "queued"
    assert e["limits"] == DEFAULT_LIMITS
    assert e["n_turns"] == 0 and e["attempt"] == 0 and e["export_seq"] is None
    assert e["end_reason"] is None and e["started_at"] is None and e["finished_at"] is None

    j = job_row(stack, job["id"])
    assert j["kind"] == "optimize" and j["status"] == "queued" and j["class"] == "cpu"
    assert j["payload"] == {
        "episode_id": ep["id"],
        "policy": {"name": "expert"},
        "limits": DEFAULT_LIMITS,
        "options": {},
    }
    events = stack.psql(f"SELECT seq || ':' || kind FROM job_events WHERE job_id = '{job['id']}'")
    assert events == "1:queued"
    assert job["id"] in stream_jobs(stack), "the job is not on kforge:jobs:cpu"
    assert stack.redis.command("SISMEMBER", "kforge:jobs:cpu:ids", job["id"]) == ":1"

    got = stack.api.get(f"/v1/jobs/{job['id']}")
    assert got.status_code == 200 and got.json() == job
    r = stack.api.get(f"/v1/episodes/{ep['id']}")
    assert r.status_code == 200, r.text
    g = r.json()
    assert g["id"] == ep["id"] and g["job_id"] == job["id"] and g["task_id"] == task_id
    assert g["status"] == "queued" and g["turns"] == [] and g["n_turns"] == 0 and g["result"] is None
    assert g["policy"] == {"name": "expert"} and g["limits"] == DEFAULT_LIMITS
    assert g["best_candidate_id"] is None and g["started_at"] is None


def test_openai_policy_limits_and_options_stored(stack: Stack, task_id: str) -> None:
    """The policy is stored without its name as policy_config (no key in it: only the key's
    name), the limits given are merged over the defaults, the options given are passed on; an
    integral number such as 50.0 is stored as the integer JSON Schema says it is."""
    body = {
        "task_id": task_id,
        "backend": "cpu",
        "policy": OPENAI,
        "limits": {"max_turns": 50.0, "max_wall_s": 600},
        "options": {"budget_s": 0.5, "no_compile": True},
    }
    got = accepted(optimize(stack, body))
    ep, job = got["episode"], got["job"]
    config = {k: v for k, v in OPENAI.items() if k != "name"}
    limits = {**DEFAULT_LIMITS, "max_turns": 50, "max_wall_s": 600}
    e = episode_row(stack, ep["id"])
    assert e["policy"] == "openai" and e["policy_config"] == config
    assert e["limits"] == limits and isinstance(e["limits"]["max_turns"], int)
    assert "api_key" not in json.dumps(e["policy_config"]).replace("api_key_name", "")
    payload = job_row(stack, job["id"])["payload"]
    assert payload == {
        "episode_id": ep["id"],
        "policy": OPENAI,
        "limits": limits,
        "options": {"budget_s": 0.5, "no_compile": True},
    }
    g = stack.api.get(f"/v1/episodes/{ep['id']}?turns=false").json()
    assert g["policy"] == OPENAI and g["limits"] == limits and g["status"] == "queued"


def test_optional_policy_members_and_bounds(stack: Stack, task_id: str) -> None:
    """Each bound itself is accepted; a policy given without a name is the expert one."""
    low = {name: lo for name, (lo, _hi) in LIMIT_BOUNDS.items()}
    high = {name: hi for name, (_lo, hi) in LIMIT_BOUNDS.items()}
    minimal_openai = {"name": "openai", "base_url": "https://api.example.com", "model": "m"}
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"limits": low, "options": {"budget_s": 0.1}}, {}),
        ({"limits": high, "options": {"budget_s": 10, "no_compile": False}}, {}),
        ({"policy": {"return_token_ids": False, "logprobs": 0}}, {"return_token_ids": False, "logprobs": 0}),
        ({"policy": {"name": "expert", "api_key_name": "K"}}, {"api_key_name": "K"}),
        ({"policy": minimal_openai}, {"base_url": "https://api.example.com", "model": "m"}),
        (
            {
                "policy": {
                    **minimal_openai,
                    "logprobs": 20,
                    "sampling": {"temperature": 0, "top_p": 1, "max_tokens": 1048576, "stop": "END"},
                }
            },
            {
                "base_url": "https://api.example.com",
                "model": "m",
                "logprobs": 20,
                "sampling": {"temperature": 0, "top_p": 1, "max_tokens": 1048576, "stop": "END"},
            },
        ),
        ({"policy": {**minimal_openai, "sampling": {"temperature": 2, "stop": ["a", "b", "c", "d"]}}}, None),
        ({"policy": {**minimal_openai, "sampling": {}, "base_url": "http://h:1/v1?x=1#y"}}, None),
    ]
    for extra, config in cases:
        got = accepted(optimize(stack, {"task_id": task_id, "backend": "cpu", **extra}))
        e = episode_row(stack, got["episode"]["id"])
        want_policy = (extra.get("policy") or {}).get("name", "expert")
        assert e["policy"] == want_policy, extra
        if config is not None:
            assert e["policy_config"] == config, (extra, e["policy_config"])
        assert e["limits"] == {**DEFAULT_LIMITS, **extra.get("limits", {})}, extra
        payload = job_row(stack, got["job"]["id"])["payload"]
        assert payload["options"] == extra.get("options", {}), extra
        assert payload["policy"] == {"name": want_policy, **e["policy_config"]}


def test_inline_task_creates_task_and_check_job(stack: Stack) -> None:
    source = unique_task("optimize inline")
    before = counts(stack)
    task_in = {"source": source, "name": "inline-opt", "suite": "kernelbench-l1"}
    got = accepted(optimize(stack, {"task": task_in, "backend": "cpu"}))
    job = got["job"]
    after = counts(stack)
    assert after["tasks"] == before["tasks"] + 1 and after["jobs"] == before["jobs"] + 2
    assert after["episodes"] == before["episodes"] + 1
    task = stack.api.get(f"/v1/tasks/{job['task_id']}").json()
    assert task["source"] == source and task["name"] == "inline-opt" and task["status"] == "checking"
    assert task["backend"] == "cpu" and task["check_job_id"] and task["suite"] == "kernelbench-l1"
    kinds = stack.psql(f"SELECT string_agg(kind, ',' ORDER BY kind) FROM jobs WHERE task_id = '{task['id']}'")
    assert kinds == "check_task,optimize"
    assert episode_row(stack, got["episode"]["id"])["task_id"] == task["id"]
    on_stream = stream_jobs(stack)
    assert task["check_job_id"] in on_stream and job["id"] in on_stream
    assert on_stream.index(task["check_job_id"]) < on_stream.index(job["id"]), "check job first"

    # the same source again: the stored task, no second check job
    again = accepted(optimize(stack, {"task": {"source": source, "suite": "examples"}, "backend": "cpu"}))
    assert again["job"]["task_id"] == task["id"]
    assert stack.api.get(f"/v1/tasks/{task['id']}").json()["suite"] == "kernelbench-l1", (
        "the first suite stays"
    )
    assert (
        stack.psql(f"SELECT count(*) FROM jobs WHERE task_id = '{task['id']}' AND kind = 'check_task'") == "1"
    )
    assert again["episode"]["id"] != got["episode"]["id"]


def test_default_backend(stack: Stack, task_id: str) -> None:
    """backend left out: the server's default_backend (cpu on the test servers)."""
    got = accepted(optimize(stack, {"task_id": task_id}))
    assert got["job"]["backend"] == "cpu" and got["job"]["class"] == "cpu"
    assert episode_row(stack, got["episode"]["id"])["backend"] == "cpu"


# ---- refusals -----------------------------------------------------------------------------------

LONG = "x" * 2048
# (id, what to change in a valid body {"task_id", "backend": "cpu"}, error name, field)
# fmt: off
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown top-level", {"bogus": 1}, "unknown_field", "bogus"),
    ("policy not an object", {"policy": "openai"}, "invalid_field", "policy"),
    ("policy null", {"policy": None}, "invalid_field", "policy"),
    ("policy name unknown", {"policy": {"name": "gpt"}}, "invalid_field", "policy.name"),
    ("policy name wrong type", {"policy": {"name": 1}}, "invalid_field", "policy.name"),
    ("policy unknown member", {"policy": {"name": "expert", "temperature": 1}}, "unknown_field", "policy.temperature"),
    ("policy with a key", {"policy": {**OPENAI, "api_key": "sk-secret"}}, "unknown_field", "policy.api_key"),
    ("openai without base_url", {"policy": {"name": "openai", "model": "m"}}, "missing_field", "policy.base_url"),
    ("openai without model", {"policy": {"name": "openai", "base_url": "http://h/v1"}}, "missing_field", "policy.model"),
    ("openai alone", {"policy": {"name": "openai"}}, "missing_field", "policy.base_url"),
    ("base_url ftp", {"policy": {**OPENAI, "base_url": "ftp://h/v1"}}, "invalid_field", "policy.base_url"),
    ("base_url no scheme", {"policy": {**OPENAI, "base_url": "h:8000/v1"}}, "invalid_field", "policy.base_url"),
    ("base_url no host", {"policy": {**OPENAI, "base_url": "http://"}}, "invalid_field", "policy.base_url"),
    ("base_url empty host", {"policy": {**OPENAI, "base_url": "https:///v1"}}, "invalid_field", "policy.base_url"),
    ("base_url blank", {"policy": {**OPENAI, "base_url": "http://h/a b"}}, "invalid_field", "policy.base_url"),
    ("base_url credentials", {"policy": {**OPENAI, "base_url": "http://u:sk-1@h/v1"}}, "invalid_field", "policy.base_url"),
    ("base_url too long", {"policy": {**OPENAI, "base_url": "http://h/" + LONG}}, "invalid_field", "policy.base_url"),
    ("base_url wrong type", {"policy": {**OPENAI, "base_url": 8000}}, "invalid_field", "policy.base_url"),
    ("model empty", {"policy": {**OPENAI, "model": ""}}, "invalid_field", "policy.model"),
    ("model too long", {"policy": {**OPENAI, "model": "m" * 257}}, "invalid_field", "policy.model"),
    ("model wrong type", {"policy": {**OPENAI, "model": ["m"]}}, "invalid_field", "policy.model"),
    ("api_key_name dash", {"policy": {**OPENAI, "api_key_name": "my-key"}}, "invalid_field", "policy.api_key_name"),
    ("api_key_name empty", {"policy": {**OPENAI, "api_key_name": ""}}, "invalid_field", "policy.api_key_name"),
    ("api_key_name too long", {"policy": {**OPENAI, "api_key_name": "K" * 65}}, "invalid_field", "policy.api_key_name"),
    ("sampling not an object", {"policy": {**OPENAI, "sampling": [1]}}, "invalid_field", "policy.sampling"),
    ("sampling unknown", {"policy": {**OPENAI, "sampling": {"top_k": 5}}}, "unknown_field", "policy.sampling.top_k"),
    ("sampling model", {"policy": {**OPENAI, "sampling": {"model": "x"}}}, "unknown_field", "policy.sampling.model"),
    ("temperature high", {"policy": {**OPENAI, "sampling": {"temperature": 2.01}}}, "invalid_field", "policy.sampling.temperature"),
    ("temperature negative", {"policy": {**OPENAI, "sampling": {"temperature": -0.1}}}, "invalid_field", "policy.sampling.temperature"),
    ("temperature string", {"policy": {**OPENAI, "sampling": {"temperature": "hot"}}}, "invalid_field", "policy.sampling.temperature"),
    ("top_p zero", {"policy": {**OPENAI, "sampling": {"top_p": 0}}}, "invalid_field", "policy.sampling.top_p"),
    ("top_p high", {"policy": {**OPENAI, "sampling": {"top_p": 1.5}}}, "invalid_field", "policy.sampling.top_p"),
    ("max_tokens zero", {"policy": {**OPENAI, "sampling": {"max_tokens": 0}}}, "invalid_field", "policy.sampling.max_tokens"),
    ("max_tokens high", {"policy": {**OPENAI, "sampling": {"max_tokens": 1048577}}}, "invalid_field", "policy.sampling.max_tokens"),
    ("max_tokens fraction", {"policy": {**OPENAI, "sampling": {"max_tokens": 10.5}}}, "invalid_field", "policy.sampling.max_tokens"),
    ("seed string", {"policy": {**OPENAI, "sampling": {"seed": "7"}}}, "invalid_field", "policy.sampling.seed"),
    ("seed fraction", {"policy": {**OPENAI, "sampling": {"seed": 0.5}}}, "invalid_field", "policy.sampling.seed"),
    ("stop number", {"policy": {**OPENAI, "sampling": {"stop": 5}}}, "invalid_field", "policy.sampling.stop"),
    ("stop five", {"policy": {**OPENAI, "sampling": {"stop": list("abcde")}}}, "invalid_field", "policy.sampling.stop"),
    ("stop item number", {"policy": {**OPENAI, "sampling": {"stop": ["a", 1]}}}, "invalid_field", "policy.sampling.stop"),
    ("return_token_ids string", {"policy": {**OPENAI, "return_token_ids": "yes"}}, "invalid_field", "policy.return_token_ids"),
    ("logprobs high", {"policy": {**OPENAI, "logprobs": 21}}, "invalid_field", "policy.logprobs"),
    ("logprobs negative", {"policy": {**OPENAI, "logprobs": -1}}, "invalid_field", "policy.logprobs"),
    ("logprobs bool", {"policy": {**OPENAI, "logprobs": True}}, "invalid_field", "policy.logprobs"),
    ("expert base_url", {"policy": {"name": "expert", "base_url": "http://h/v1"}}, "invalid_field", "policy.base_url"),
    ("expert model", {"policy": {"name": "expert", "model": "m"}}, "invalid_field", "policy.model"),
    ("expert sampling", {"policy": {"name": "expert", "sampling": {"temperature": 1}}}, "invalid_field", "policy.sampling"),
    ("default expert base_url", {"policy": {"base_url": "http://h/v1", "model": "m"}}, "invalid_field", "policy.base_url"),
    ("limits not an object", {"limits": 5}, "invalid_field", "limits"),
    ("limits unknown", {"limits": {"max_tokens": 5}}, "unknown_field", "limits.max_tokens"),
    ("options not an object", {"options": True}, "invalid_field", "options"),
    ("options unknown", {"options": {"wait": 5}}, "unknown_field", "options.wait"),
    ("budget_s low", {"options": {"budget_s": 0.05}}, "invalid_field", "options.budget_s"),
    ("budget_s high", {"options": {"budget_s": 10.5}}, "invalid_field", "options.budget_s"),
    ("budget_s string", {"options": {"budget_s": "1"}}, "invalid_field", "options.budget_s"),
    ("no_compile string", {"options": {"no_compile": "true"}}, "invalid_field", "options.no_compile"),
    ("task_id not a uuid", {"task_id": "nope"}, "invalid_field", "task_id"),
    ("task_id wrong type", {"task_id": 7}, "invalid_field", "task_id"),
    ("task and task_id", {"task": {"source": "x = 1\n"}}, "invalid_field", "task"),
    ("neither task nor task_id", {"task_id": None}, "missing_field", "task_id"),
    ("backend unknown", {"backend": "tpu"}, "unsupported_backend", "backend"),
    ("backend wrong type", {"backend": 1}, "invalid_field", "backend"),
]
# fmt: on
for _name, (_lo, _hi) in LIMIT_BOUNDS.items():
    BAD += [
        (f"{_name} low", {"limits": {_name: _lo - 1}}, "invalid_field", f"limits.{_name}"),
        (f"{_name} high", {"limits": {_name: _hi + 1}}, "invalid_field", f"limits.{_name}"),
        (f"{_name} fraction", {"limits": {_name: _lo + 0.5}}, "invalid_field", f"limits.{_name}"),
        (f"{_name} string", {"limits": {_name: str(_lo)}}, "invalid_field", f"limits.{_name}"),
    ]
# inline tasks (no task_id)
BAD_INLINE: list[tuple[str, dict[str, Any], str, str]] = [
    ("task not an object", {"task": "x = 1\n"}, "invalid_field", "task"),
    ("task without source", {"task": {"name": "n"}}, "missing_field", "task.source"),
    ("task source empty", {"task": {"source": ""}}, "invalid_field", "task.source"),
    ("task name empty", {"task": {"source": "x = 1\n", "name": ""}}, "invalid_field", "task.name"),
    ("task name too long", {"task": {"source": "x = 1\n", "name": "n" * 129}}, "invalid_field", "task.name"),
    ("task unknown", {"task": {"source": "x = 1\n", "backend": "cpu"}}, "unknown_field", "task.backend"),
    ("task suite upper", {"task": {"source": "x = 1\n", "suite": "Examples"}}, "invalid_field", "task.suite"),
    ("task suite empty", {"task": {"source": "x = 1\n", "suite": ""}}, "invalid_field", "task.suite"),
    ("task suite wrong type", {"task": {"source": "x = 1\n", "suite": 1}}, "invalid_field", "task.suite"),
    (
        "task source too large",
        {"task": {"source": "#" * (LIMITS["max_source_bytes"] + 1)}},
        "task_source_too_large",
        "task.source",
    ),
]


@pytest.mark.parametrize("case", BAD + BAD_INLINE, ids=[c[0] for c in BAD + BAD_INLINE])
def test_refused(stack: Stack, task_id: str, case: tuple[str, dict[str, Any], str, str]) -> None:
    label, change, name, field = case
    inline = case in BAD_INLINE
    body: dict[str, Any] = {"backend": "cpu"} if inline else {"task_id": task_id, "backend": "cpu"}
    body.update(change)
    body = {k: v for k, v in body.items() if not (k == "task_id" and v is None)}
    before = counts(stack)
    err = assert_error(optimize(stack, body), name)
    assert err.get("field") == field, (label, err)
    assert err["message"].startswith(field), (label, err)
    assert counts(stack) == before, f"{label}: a refused request stored something"


def test_expert_endpoint_message(stack: Stack, task_id: str) -> None:
    r = optimize(stack, {"task_id": task_id, "policy": {"name": "expert", "base_url": "http://h/v1"}})
    err = assert_error(r, "invalid_field")
    assert "the expert policy takes no endpoint" in err["message"], err


def test_unauthorized_and_forbidden(stack: Stack, task_id: str) -> None:
    before = counts(stack)
    body = {"task_id": task_id, "backend": "cpu"}
    assert_error(optimize(stack, body, key=None), "unauthorized")
    assert_error(optimize(stack, body, key=None, headers={"Authorization": "Bearer nope"}), "unauthorized")
    assert_error(optimize(stack, body, key="kf_0badc0de_" + "1" * 40), "forbidden")
    assert counts(stack) == before


def test_task_not_found(stack: Stack) -> None:
    before = counts(stack)
    err = assert_error(optimize(stack, {"task_id": str(uuid.uuid4()), "backend": "cpu"}), "task_not_found")
    assert err["field"] == "task_id"
    assert counts(stack) == before


def test_task_invalid(stack: Stack) -> None:
    """A task that failed check-task is refused, by id and inline (the same source)."""
    source = unique_task("optimize invalid")
    r = stack.api.post("/v1/tasks", {"source": source, "backend": "cpu"})
    assert r.status_code == 201, r.text
    tid = r.json()["task"]["id"]
    stack.psql(f"UPDATE tasks SET status = 'invalid' WHERE id = '{tid}'")
    before = counts(stack)
    err = assert_error(optimize(stack, {"task_id": tid, "backend": "cpu"}), "task_invalid")
    assert err["field"] == "task_id"
    err = assert_error(optimize(stack, {"task": {"source": source}, "backend": "cpu"}), "task_invalid")
    assert err["field"] == "task"
    assert counts(stack) == before


def test_rate_limited(stack: Stack) -> None:
    """A second server on the same database and Redis with rate_limit=1: the second write of a
    minute is 429 with Retry-After (a key of its own owner, so an inline task of its own)."""
    server = stack.start_server(rate_limit=1)
    try:
        api = Api(server.url, cli(stack.env(), "keys", "create", "--name", "optimize-limited").strip())
        if time.time() % 60 > 55:  # the limit counts per clock minute: start well inside one
            time.sleep(61 - time.time() % 60)
        body = {"task": {"source": unique_task("rate")}, "backend": "cpu"}
        accepted(api.post("/v1/optimize", body))
        r = api.post("/v1/optimize", body)
        assert_error(r, "rate_limited")
        assert (r.headers.get("Retry-After") or "").isdigit(), r.headers
    finally:
        server.stop()
