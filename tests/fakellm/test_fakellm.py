"""The fakellm test double: the protocol, the faults, the recording, and the good episode's files."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakellm.server import Handle, start_fake_llm

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GOOD = HERE / "scripts" / "good_cpu_episode.json"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "read a file of the workspace",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture()
def fake() -> Iterator[tuple[str, Handle]]:
    url, handle = start_fake_llm([])
    yield url, handle
    handle.close()


def chat(url: str, messages: list[dict[str, Any]], timeout: float = 5, **extra: Any) -> dict[str, Any]:
    """One non-streaming chat completion, the way an OpenAI client sends it."""
    body = {"model": "fakellm-1", "messages": messages, "tools": TOOLS, "tool_choice": "auto"}
    body.update({"temperature": 0.7, "top_p": 0.95, "max_tokens": 4096}, **extra)
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


USER = [{"role": "system", "content": "guide"}, {"role": "user", "content": "optimize model.py"}]


def test_replies_in_order(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load(
        [
            {
                "content": "looking",
                "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "model.py"}}],
            },
            {"content": "done"},
            {"content": "long", "finish_reason": "length"},
        ]
    )
    r1 = chat(url, USER)
    assert r1["object"] == "chat.completion" and r1["id"].startswith("chatcmpl-")
    assert isinstance(r1["created"], int) and r1["model"] == "fakellm-1"
    c = r1["choices"][0]
    assert c["index"] == 0 and c["finish_reason"] == "tool_calls"
    assert c["message"]["role"] == "assistant" and c["message"]["content"] == "looking"
    call = c["message"]["tool_calls"][0]
    assert call["id"] == "c1" and call["type"] == "function"
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "model.py"}
    u = r1["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0
    assert "token_ids" not in c and "prompt_token_ids" not in r1 and c["logprobs"] is None
    r2 = chat(url, USER)
    assert r2["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in r2["choices"][0]["message"]
    assert chat(url, USER)["choices"][0]["finish_reason"] == "length"
    assert "exhausted" in chat(url, USER)["choices"][0]["message"]["content"]


def test_requests_are_recorded(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load(
        [
            {"tool_calls": [{"id": "call_7", "name": "read_file", "arguments": {"path": "model.py"}}]},
            {"content": "ok"},
        ]
    )
    first = chat(url, USER)
    assistant = first["choices"][0]["message"]
    tool_msg = {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": "class Model..."}
    chat(url, [*USER, assistant, tool_msg], seed=3)
    log = h.requests()
    assert [r["turn"] for r in log] == [0, 1] and [r["index"] for r in log] == [0, 1]
    sent = log[1]["body"]
    assert sent["messages"][-1] == tool_msg and sent["messages"][-1]["tool_call_id"] == "call_7"
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto" and sent["seed"] == 3
    assert log[1]["headers"]["Authorization"] == "Bearer sk-test"
    with urllib.request.urlopen(url + "/_requests", timeout=5) as resp:
        assert [r["turn"] for r in json.loads(resp.read())] == [0, 1]
    urllib.request.urlopen(
        urllib.request.Request(url + "/_reset", data=b"", method="POST"), timeout=5
    ).close()
    assert h.requests() == []
    assert chat(url, USER)["choices"][0]["message"]["tool_calls"][0]["id"] == "call_7"  # rewound


def test_script_endpoint(fake: tuple[str, Handle]) -> None:
    url, _ = fake
    data = json.dumps({"turns": [{"content": "from _script"}]}).encode()
    urllib.request.urlopen(
        urllib.request.Request(url + "/_script", data=data, method="POST"), timeout=5
    ).close()
    assert chat(url, USER)["choices"][0]["message"]["content"] == "from _script"
    bad = urllib.request.Request(url + "/_script", data=b'{"turns": [{"fault": "nope"}]}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad, timeout=5)
    assert e.value.code == 400


def test_status_faults(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load(
        [
            {"fault": "status", "code": 429, "retry_after": 2},
            {"fault": "status", "code": 500},
            {"content": "ok"},
        ]
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        chat(url, USER)
    assert e.value.code == 429 and e.value.headers["Retry-After"] == "2"
    assert json.loads(e.value.read())["error"]["type"] == "rate_limit_error"
    with pytest.raises(urllib.error.HTTPError) as e:
        chat(url, USER)
    assert e.value.code == 500 and e.value.headers["Retry-After"] is None
    assert chat(url, USER)["choices"][0]["message"]["content"] == "ok"


def test_sleep_times_the_client_out(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load([{"fault": "sleep", "seconds": 3, "then": {"content": "late"}}, {"content": "next"}])
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        chat(url, USER, timeout=0.3)
    assert chat(url, USER)["choices"][0]["message"]["content"] == "next"


def test_invalid_json_and_truncated_bodies(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load([{"fault": "invalid_json"}, {"fault": "truncated"}])
    with pytest.raises(json.JSONDecodeError):
        chat(url, USER)
    with pytest.raises(http.client.IncompleteRead):
        chat(url, USER)


def test_malformed_tool_call(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load(
        [
            {"fault": "malformed_tool_call"},
            {"fault": "malformed_tool_call", "name": "bash", "arguments": "ls -l"},
        ]
    )
    for name in ("write_file", "bash"):
        c = chat(url, USER)["choices"][0]
        assert c["finish_reason"] == "tool_calls"
        call = c["message"]["tool_calls"][0]
        assert call["function"]["name"] == name
        with pytest.raises(json.JSONDecodeError):
            json.loads(call["function"]["arguments"])


def test_token_ids_and_logprobs_only_when_asked(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load({"turns": [{"content": "hello world, a reply"}], "on_exhausted": "repeat"})
    plain = chat(url, USER)
    assert "prompt_token_ids" not in plain and plain["choices"][0]["logprobs"] is None
    ids = chat(url, USER, return_token_ids=True)
    c = ids["choices"][0]
    assert len(ids["prompt_token_ids"]) == ids["usage"]["prompt_tokens"]
    assert len(c["token_ids"]) == ids["usage"]["completion_tokens"] and c["logprobs"] is None
    lp = chat(url, USER, logprobs=True, top_logprobs=2)
    c = lp["choices"][0]
    assert "token_ids" not in c and "prompt_token_ids" not in lp
    content = c["logprobs"]["content"]
    assert len(content) == lp["usage"]["completion_tokens"]
    assert "".join(t["token"] for t in content) == "hello world, a reply"
    assert all(t["logprob"] <= 0 and len(t["top_logprobs"]) == 2 for t in content)
    both = chat(url, USER, logprobs=True, return_token_ids=True)
    assert len(both["choices"][0]["token_ids"]) == len(both["choices"][0]["logprobs"]["content"])
    assert both["choices"][0]["token_ids"] == ids["choices"][0]["token_ids"]  # deterministic


def test_max_tokens_cuts_the_reply(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load([{"content": "x" * 400, "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}])
    c = chat(url, USER, max_tokens=10)["choices"][0]
    assert c["finish_reason"] == "length" and len(c["message"]["content"]) == 40
    assert "tool_calls" not in c["message"]


def test_exhausted_modes_bad_requests_and_key(fake: tuple[str, Handle]) -> None:
    url, h = fake
    h.load({"turns": [{"content": "again"}], "on_exhausted": "repeat"})
    assert [chat(url, USER)["choices"][0]["message"]["content"] for _ in range(3)] == ["again"] * 3
    h.load({"turns": [], "on_exhausted": "error"})
    with pytest.raises(urllib.error.HTTPError) as e:
        chat(url, USER)
    assert e.value.code == 500
    h.load({"turns": [{"content": "ok"}], "api_key": "sk-other"})
    with pytest.raises(urllib.error.HTTPError) as e:
        chat(url, USER)
    assert e.value.code == 401
    h.load([{"content": "ok"}])
    req = urllib.request.Request(url + "/v1/chat/completions", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400
    assert [r["turn"] for r in h.requests()] == [None]


def test_command_line(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"content": "from the cli"}]))
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "server.py"), "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("fakellm: listening on http://127.0.0.1:")
        url = line.split(" on ", 1)[1]
        assert chat(url, USER)["choices"][0]["message"]["content"] == "from the cli"
    finally:
        proc.terminate()
        proc.wait(timeout=5)


# -- the good episode -----------------------------------------------------------------------------

KNOWN_ARGS = {
    "bash": {"command"},
    "read_file": {"path"},
    "write_file": {"path", "content"},
    "edit_file": {"path", "old", "new"},
    "glob": {"pattern"},
    "grep": {"pattern", "path"},
    "compile": set(),
    "verify": set(),
    "profile": set(),
    "submit": set(),
}


def apply_file_tools(turns: list[dict[str, Any]], root: Path) -> None:
    """Replays the episode's write_file and edit_file calls into root, as the loop would."""
    for turn in turns:
        for call in turn.get("tool_calls") or []:
            args = call["arguments"]
            if call["name"] == "write_file":
                (root / args["path"]).parent.mkdir(parents=True, exist_ok=True)
                (root / args["path"]).write_text(args["content"])
            elif call["name"] == "edit_file":
                text = (root / args["path"]).read_text()
                assert text.count(args["old"]) == 1, f"edit_file: {args['old']!r} must match exactly once"
                (root / args["path"]).write_text(text.replace(args["old"], args["new"]))


def test_good_episode_is_well_formed(fake: tuple[str, Handle]) -> None:
    script = json.loads(GOOD.read_text())
    ids = []
    for turn in script["turns"]:
        for call in turn.get("tool_calls") or []:
            assert set(call["arguments"]) <= KNOWN_ARGS[call["name"]], call
            ids.append(call["id"])
    assert len(ids) == len(set(ids))
    names = [c["name"] for t in script["turns"] for c in t.get("tool_calls") or []]
    assert (
        names.index("read_file") < names.index("write_file") < names.index("compile") < names.index("verify")
    )
    assert names[-1] == "submit" and "profile" in names
    url, h = fake
    h.load(script)
    replies = [chat(url, USER)["choices"][0] for _ in script["turns"]]
    assert [r["finish_reason"] for r in replies][-2:] == ["tool_calls", "stop"]


def test_good_episode_passes_the_harness(tmp_path: Path, kforge_cache: Path) -> None:
    script = json.loads(GOOD.read_text())
    cand = tmp_path / "candidate"
    cand.mkdir()
    apply_file_tools(script["turns"], cand)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workers" / "harness"), KFORGE_CACHE=str(kforge_cache))
    python = ROOT / ".venv" / "bin" / "python"
    p = subprocess.run(
        [str(python if python.exists() else sys.executable), "-m", "kforge_harness", "evaluate", "--no-jail"]
        + ["--task", str(ROOT / script["task"]), "--candidate", str(cand), "--backend", "cpu"]
        + ["--no-compile", "--budget", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "ok", (verdict["message"], verdict["flags"], verdict.get("build"))
    assert verdict["reward"] >= 1 and verdict["flags"] == []
