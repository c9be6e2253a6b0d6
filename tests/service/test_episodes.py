"""Agent episodes end to end: POST /v1/optimize, a cpu worker running the agent loop against the
scripted OpenAI-compatible fakellm, tools in the jail, the judge, turns in PostgreSQL, events,
GET /v1/episodes/{id}, the export and the kernel download. Each episode ends the way a user
would expect, with a typed reason."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from fakellm.server import Handle, load_script
from servicekit import Process, Stack, example_task, wait_until

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "fakellm" / "scripts" / "good_cpu_episode.json"
FAST = {"budget_s": 0.2, "no_compile": True}
# small retries so that an endpoint that stays down fails in seconds
POLICY_SETTINGS = {"policy_retries": 1, "policy_backoff_s": 0.05, "policy_timeout_s": 3}


def unique_task(name: str = "gelu") -> str:
    """The example's source with a fresh comment: a new task (and check job) per test."""
    return f"# {uuid.uuid4()}\n" + example_task(name)


def optimize(stack: Stack, handle: Handle, source: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": {"name": "gelu", "source": source},
        "backend": "cpu",
        "policy": {"name": "openai", "base_url": handle.url + "/v1", "model": "fakellm-1"},
        "options": FAST,
    }
    for k, v in extra.items():
        body[k] = {**body.get(k, {}), **v} if isinstance(v, dict) else v
    r = stack.api.post("/v1/optimize", body)
    assert r.status_code == 202, (r.status_code, r.text)
    return r.json()


def finished(stack: Stack, started: dict[str, Any], watch: list[Process], deadline_s: float = 600):
    job = stack.api.wait_job(started["job"]["id"], deadline_s=deadline_s, watch=watch)
    r = stack.api.get(f"/v1/episodes/{started['episode']['id']}")
    assert r.status_code == 200, r.text
    return job, r.json()


def tool_texts(ep: dict[str, Any]) -> list[str]:
    return [m["content"] for t in ep["turns"] for m in t["tool_results"]]


def test_good_cpu_episode_earns_a_positive_reward(stack: Stack, workers, fake) -> None:
    """The scripted good episode: read, profile, write a kernel, compile, verify, profile, tune,
    submit; the best candidate is re-validated and counts."""
    script = load_script(str(GOOD))
    h = fake(script)
    w = workers(**POLICY_SETTINGS)
    started = optimize(stack, h, unique_task(), policy={"return_token_ids": True, "logprobs": 2})
    assert started["job"]["kind"] == "optimize" and started["episode"]["status"] == "queued"
    job, ep = finished(stack, started, [w])
    assert job["status"] == "succeeded", job
    assert ep["status"] == "finished" and ep["end_reason"] == "submitted", ep
    n_calls = len(script["turns"]) - 1  # the last scripted turn (a plain reply) is never asked for
    assert ep["n_turns"] == n_calls and [t["idx"] for t in ep["turns"]] == list(range(n_calls))
    assert not any(t["malformed"] for t in ep["turns"])
    res = ep["result"]
    assert res["reward"] >= 1 and res["verdict"]["status"] == "ok", res
    assert res["verdict"]["correct"] is True and res["speedup_vs_eager"] > 0
    # the reward components of verify / profile / submit, in the turns that called them
    comps = [c for t in ep["turns"] for c in t["rewards"]]
    assert [c["tool"] for c in comps] == ["verify", "profile", "verify", "profile", "submit"]
    assert all(c["status"] == "ok" and c["correct"] is True and c["candidate_id"] for c in comps)
    assert all(c["speedup_vs_eager"] > 0 for c in comps if c["tool"] != "verify")
    assert ep["best_candidate_id"] in {c["candidate_id"] for c in comps}
    # the feedback the policy saw
    texts = tool_texts(ep)
    assert any("no model_new.py yet" in t and "eager" in t for t in texts)  # profile before writing
    assert any(t.startswith("compile: status ok") for t in texts)
    assert any("correctness trials:" in t and "FAIL" not in t for t in texts)
    # what the policy was sent: the skill guide, the task, the tools
    first = h.requests()[0]["body"]
    assert (
        first["messages"][0]["role"] == "system" and "kforge skill guide" in first["messages"][0]["content"]
    )
    assert "exact GELU" in first["messages"][1]["content"] or "GELU" in first["messages"][1]["content"]
    names = {t["function"]["name"] for t in first["tools"]}
    assert names == {
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
        "compile",
        "verify",
        "profile",
        "submit",
    }
    assert first["return_token_ids"] is True and first["logprobs"] is True
    # the second request carries the first turn: the assistant's call and the tool's answer
    second = h.requests()[1]["body"]["messages"]
    assert second[2]["role"] == "assistant" and second[2]["tool_calls"][0]["function"]["name"] == "glob"
    assert second[3]["role"] == "tool" and second[3]["tool_call_id"] == second[2]["tool_calls"][0]["id"]
    assert "model.py" in second[3]["content"]
    # token ids and logprobs are stored per turn (the export carries them)
    rows = stack.psql(
        f"SELECT count(*) FROM turns WHERE episode_id = '{ep['id']}'"
        " AND completion_token_ids IS NOT NULL AND logprobs IS NOT NULL"
    )
    assert int(rows) == n_calls
    # events: a turn event per turn, revalidating, done
    kinds = [e["event"] for e in stack.api.events(job["id"])]
    assert kinds.count("turn") == n_calls and "revalidating" in kinds and kinds[-1] == "done"
    # the export has it, with the OpenAI-format messages of the whole trajectory
    r = stack.api.get(f"/v1/export?task_id={ep['task_id']}")
    recs = [json.loads(x) for x in r.text.split("\n") if x.strip()]
    rec = next(x for x in recs if x.get("episode_id") == ep["id"])
    assert rec["final"]["reward"] == res["reward"] and len(rec["turns"]) == n_calls
    assert sum(1 for m in rec["messages"] if m["role"] == "assistant") == n_calls
    # the kernel files download
    r = stack.api.get(f"/v1/candidates/{ep['best_candidate_id']}/download")
    assert r.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        names = set(tar.getnames())
    assert "candidate/model_new.py" in names and "candidate/kernels/gelu.cpp" in names


def test_malformed_calls_are_answered_and_marked(stack: Stack, workers, fake) -> None:
    h = fake(
        [
            {"tool_calls": [{"name": "launch_missiles", "arguments": {}}]},
            {"fault": "malformed_tool_call", "name": "write_file", "arguments": '{"path": '},
            {"tool_calls": [{"name": "read_file", "arguments": {"file": "model.py"}}]},
            {"tool_calls": [{"name": "verify", "arguments": {"now": True}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}]},
            {"content": "done"},
        ]
    )
    w = workers(**POLICY_SETTINGS)
    job, ep = finished(stack, optimize(stack, h, unique_task()), [w])
    assert job["status"] == "succeeded" and ep["end_reason"] == "policy_stopped", ep
    assert [t["malformed"] for t in ep["turns"]] == [True, True, True, True, False, False]
    texts = tool_texts(ep)
    assert "unknown tool" in texts[0] and "launch_missiles" in texts[0]
    assert "path" in texts[2]  # names the expected argument
    assert "takes no arguments" in texts[3]
    assert "class Model" in texts[4]
    assert ep["result"]["reward"] == -1  # nothing was ever verified


def test_a_looping_policy_ends_at_max_turns(stack: Stack, workers, fake) -> None:
    h = fake(
        {
            "turns": [{"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]}],
            "on_exhausted": "repeat",
        }
    )
    w = workers(**POLICY_SETTINGS)
    job, ep = finished(stack, optimize(stack, h, unique_task(), limits={"max_turns": 5}), [w])
    assert job["status"] == "succeeded" and ep["end_reason"] == "max_turns", ep
    assert ep["n_turns"] == 5 and len(h.requests()) == 5


def test_the_reference_the_harness_and_the_network_stay_out_of_reach(stack: Stack, workers, fake) -> None:
    h = fake(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "model.py", "content": "x = 1\n"}}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "arguments": {"path": "model.py", "old": "class Model", "new": "class M"},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {"command": "echo hacked > model.py; cat model.py | head -3"},
                    }
                ]
            },
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "../judge/task.py"}}]},
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {"command": f"ls {ROOT / 'workers' / 'harness'} 2>&1; echo rc=$?"},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {
                            "command": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\" 2>&1 | tail -1"
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}]},
            {"content": "giving up"},
        ]
    )
    w = workers(**POLICY_SETTINGS)
    source = unique_task()
    job, ep = finished(stack, optimize(stack, h, source), [w])
    assert job["status"] == "succeeded" and ep["end_reason"] == "policy_stopped", ep
    t = tool_texts(ep)
    assert t[0] == "model.py: refused: model.py is read-only"
    assert t[1] == "model.py: refused: model.py is read-only"
    assert "model.py: Read-only file system" in t[2] and "hacked" not in t[2]
    assert "refused" in t[3] and "outside the workspace" in t[3]
    assert "No such file or directory" in t[4] and "rc=2" in t[4]  # the harness is not in the jail
    assert "Network is unreachable" in t[5]
    assert t[6] == source  # the reference is untouched


def test_long_tool_outputs_are_cut_with_a_note(stack: Stack, workers, fake) -> None:
    h = fake(
        [
            {
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "head -c 50000 /dev/zero | tr '\\0' a"}}
                ]
            },
            {"content": "ok"},
        ]
    )
    w = workers(**POLICY_SETTINGS)
    job, ep = finished(stack, optimize(stack, h, unique_task(), limits={"max_tool_output_bytes": 2048}), [w])
    text = tool_texts(ep)[0]
    assert len(text.encode()) <= 2048 + 200 and "cut" in text, len(text)
    # the policy's next request carried the cut text, not the 50 kB
    second = h.requests()[1]["body"]["messages"][-1]
    assert second["role"] == "tool" and len(second["content"]) < 4096


@pytest.mark.parametrize(
    "fault,reason",
    [
        ({"fault": "status", "code": 500}, "policy_server_error"),
        ({"fault": "status", "code": 429, "retry_after": 0}, "policy_rate_limited"),
        ({"fault": "invalid_json"}, "policy_bad_response"),
        ({"fault": "sleep", "seconds": 8}, "policy_timeout"),
        ({"fault": "status", "code": 401}, "policy_http_error"),
    ],
)
def test_an_endpoint_that_stays_down_ends_the_episode_typed(
    stack: Stack, workers, fake, fault, reason
) -> None:
    h = fake({"turns": [fault], "on_exhausted": "repeat"})
    w = workers(**POLICY_SETTINGS)
    job, ep = finished(stack, optimize(stack, h, unique_task()), [w], deadline_s=120)
    assert job["status"] == "succeeded" and ep["status"] == "finished", (job, ep)
    assert ep["end_reason"] == reason, ep
    assert ep["n_turns"] == 0 and ep["result"]["reward"] == -1


def test_unreachable_endpoint(stack: Stack, workers) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Dead:
        url = f"http://127.0.0.1:{port}"

    w = workers(**POLICY_SETTINGS)
    job, ep = finished(stack, optimize(stack, Dead(), unique_task()), [w], deadline_s=120)  # type: ignore[arg-type]
    assert ep["end_reason"] == "policy_unreachable", ep


def test_cancel_between_turns(stack: Stack, workers, fake) -> None:
    slow = {
        "fault": "sleep",
        "seconds": 1,
        "then": {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]},
    }
    h = fake({"turns": [slow], "on_exhausted": "repeat"})
    w = workers(**POLICY_SETTINGS)
    started = optimize(stack, h, unique_task())
    jid = started["job"]["id"]
    wait_until(
        lambda: stack.api.get(f"/v1/episodes/{started['episode']['id']}").json()["n_turns"] >= 2,
        120,
        "two turns",
    )
    r = stack.api.post(f"/v1/jobs/{jid}/cancel", {})
    assert r.status_code in (200, 202), r.text
    job, ep = finished(stack, started, [w], deadline_s=60)
    assert job["status"] == "cancelled" and ep["status"] == "cancelled", (job, ep)
    n = ep["n_turns"]
    assert n >= 2 and len(h.requests()) <= n + 1  # it stopped asking


def test_a_worker_killed_mid_episode_restarts_it_cleanly(stack: Stack, workers, fake) -> None:
    """The episode restarts from its first turn on another worker (the workspace died with the
    first): the stored turns are the second attempt's, numbered from 0, none twice."""
    slow = {
        "fault": "sleep",
        "seconds": 0.5,
        "then": {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]},
    }
    h = fake({"turns": [slow], "on_exhausted": "repeat"})
    a = workers(lease_s=3, heartbeat_s=1, **POLICY_SETTINGS)
    started = optimize(stack, h, unique_task(), limits={"max_turns": 8})
    eid = started["episode"]["id"]
    wait_until(lambda: stack.api.get(f"/v1/episodes/{eid}").json()["n_turns"] >= 3, 120, "three turns")
    a.kill_hard()
    b = workers(lease_s=3, heartbeat_s=1, **POLICY_SETTINGS)
    job, ep = finished(stack, started, [b], deadline_s=180)
    assert job["status"] == "succeeded" and job["attempt"] == 2, job
    assert ep["attempt"] == 2 and ep["end_reason"] == "max_turns" and ep["n_turns"] == 8, ep
    assert [t["idx"] for t in ep["turns"]] == list(range(8))
    rows = stack.psql(f"SELECT count(*), count(DISTINCT idx) FROM turns WHERE episode_id = '{eid}'")
    assert rows == "8|8"
