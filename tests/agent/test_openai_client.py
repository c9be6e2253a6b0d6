"""The `openai` policy's HTTP client (workers/agent/openai.c) through its probe,
build/agent-probes/openai_probe, against the scripted fakellm and a canned server: the request it
sends, the reply normalised, the retries and their back-offs, the failures each with its status,
and the abort hook. Times are only bounded from below, except where an abort must cut a stall."""

from __future__ import annotations

import json
from typing import Any

from fakellm.server import token_id, tokenize

MESSAGES = [
    {"role": "system", "content": "You write CUDA kernels."},
    {"role": "user", "content": "Optimise model.py"},
]
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
FAST = ("--backoff", "0.01")  # back-offs of 10 ms, so retries cost no time
READ_CALL = {
    "content": "Let me look.",
    "tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}],
}


def chat(run_probe: Any, base_url: str, *args: str, **kw: Any) -> dict[str, Any]:
    """One probe call with the default messages and tools; the printed object."""
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("tools", TOOLS)
    code, data, stderr = run_probe("--url", base_url, "--model", "fakellm-1", *args, **kw)
    assert code == 0, stderr
    return data


def assert_failed(data: dict[str, Any], status: str, attempts: int) -> None:
    assert data["status"] == status, data
    assert data["attempts"] == attempts, data
    assert isinstance(data["error"], str) and data["error"] and "\n" not in data["error"]
    assert data["message"] is None and data["finish_reason"] is None


# --- the reply ------------------------------------------------------------------------------


def test_tool_call_reply_is_normalised(run_probe, fake):
    llm = fake([READ_CALL])
    data = chat(run_probe, llm.base_url, *FAST)
    assert data["status"] == "ok" and data["error"] is None
    assert data["attempts"] == 1 and data["http_status"] == 200
    msg = data["message"]
    assert set(msg) == {"role", "content", "tool_calls"}
    assert msg["role"] == "assistant" and msg["content"] == "Let me look."
    [call] = msg["tool_calls"]
    assert set(call) == {"id", "type", "function"}
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "read_file", "arguments": json.dumps({"path": "model.py"})}
    assert isinstance(call["function"]["arguments"], str)
    assert data["finish_reason"] == "tool_calls"
    # usage as fakellm counts it: 4-character chunks of the request's messages and the reply
    [sent] = llm.chat_requests()
    emitted = "Let me look." + "read_file" + json.dumps({"path": "model.py"})
    prompt = len(tokenize(json.dumps(sent["messages"], sort_keys=True)))
    assert data["usage"] == {"prompt_tokens": prompt, "completion_tokens": len(tokenize(emitted))}
    assert data["prompt_token_ids"] is None and data["token_ids"] is None and data["logprobs"] is None
    assert data["seconds"] > 0


def test_plain_reply_has_no_tool_calls(run_probe, fake):
    llm = fake([{"content": "Done.", "finish_reason": "stop"}])
    data = chat(run_probe, llm.base_url)
    assert data["status"] == "ok"
    assert data["message"] == {"role": "assistant", "content": "Done."}
    assert data["finish_reason"] == "stop"


def test_malformed_tool_call_arguments_kept_verbatim(run_probe, fake):
    raw = '{"path": "kernels/a.cu", "content": "__global__ void k(" '
    llm = fake([{"fault": "malformed_tool_call", "name": "write_file", "arguments": raw}])
    data = chat(run_probe, llm.base_url)
    assert data["status"] == "ok" and data["attempts"] == 1
    [call] = data["message"]["tool_calls"]
    assert call["function"] == {"name": "write_file", "arguments": raw}


def test_token_ids_and_logprobs_captured(run_probe, fake):
    llm = fake([READ_CALL])
    data = chat(run_probe, llm.base_url, "--token-ids", "--logprobs", "3")
    assert data["status"] == "ok"
    [sent] = llm.chat_requests()
    assert sent["return_token_ids"] is True
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2
    prompt = tokenize(json.dumps(sent["messages"], sort_keys=True))
    emitted = tokenize("Let me look." + "read_file" + json.dumps({"path": "model.py"}))
    assert data["prompt_token_ids"] == [token_id(p) for p in prompt]
    assert data["token_ids"] == [token_id(p) for p in emitted]
    content = data["logprobs"]["content"]
    assert [c["token"] for c in content] == emitted
    assert all(len(c["top_logprobs"]) == 2 and isinstance(c["logprob"], float) for c in content)
    assert data["usage"]["completion_tokens"] == len(data["token_ids"])


def test_logprobs_one_asks_for_no_alternatives(run_probe, fake):
    llm = fake([{"content": "Done."}])
    data = chat(run_probe, llm.base_url, "--logprobs", "1")
    assert data["status"] == "ok"
    [sent] = llm.chat_requests()
    assert sent["logprobs"] is True and "top_logprobs" not in sent
    assert [c["token"] for c in data["logprobs"]["content"]] == tokenize("Done.")


def test_missing_tool_call_ids_are_generated_unique(run_probe, canned):
    calls = [
        {"type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
        {"id": "call_0", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
        {"id": "", "type": "function", "function": {"name": "glob", "arguments": {"pattern": "*.cu"}}},
        {"type": "function", "function": {"name": "submit", "arguments": None}},
    ]
    body = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": calls},
                "finish_reason": "tool_calls",
            }
        ]
    }
    server = canned(body)
    data = chat(run_probe, server.base_url)
    assert data["status"] == "ok"
    msg = data["message"]
    assert msg["content"] is None
    ids = [c["id"] for c in msg["tool_calls"]]
    assert ids[1] == "call_0"  # the server's own id is kept
    assert len(set(ids)) == 4 and all(i.startswith("call_") for i in ids)
    args = [c["function"]["arguments"] for c in msg["tool_calls"]]
    # a string verbatim, an object as its compact dump, a null as "{}"
    assert args == ['{"path": "a.py"}', "{}", '{"pattern":"*.cu"}', "{}"]
    assert all(c["type"] == "function" for c in msg["tool_calls"])
    assert data["usage"] == {"prompt_tokens": None, "completion_tokens": None}


def test_content_parts_are_joined(run_probe, canned):
    parts = [{"type": "text", "text": "first, "}, {"type": "text", "text": "second"}]
    server = canned(
        {"choices": [{"message": {"role": "assistant", "content": parts}, "finish_reason": "stop"}]}
    )
    data = chat(run_probe, server.base_url)
    assert data["status"] == "ok"
    assert data["message"] == {"role": "assistant", "content": "first, second"}


# --- the request ----------------------------------------------------------------------------


def test_request_body_and_headers(run_probe, fake):
    llm = fake({"turns": [READ_CALL], "api_key": "sk-test"})
    sampling = {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 4096,
        "max_completion_tokens": 4096,
        "seed": 7,
        "stop": ["</s>"],
        "model": "not-this-one",  # the client's own members are never taken from sampling
        "stream": True,
    }
    data = chat(
        run_probe,
        llm.base_url + "/",  # one trailing slash is dropped
        "--key",
        "sk-test",
        "--sampling",
        json.dumps(sampling),
        "--token-ids",
        "--logprobs",
        "5",
    )
    assert data["status"] == "ok", data
    [req] = llm.requests()
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["body"]
    assert body["model"] == "fakellm-1"
    assert body["messages"] == MESSAGES
    assert body["tools"] == TOOLS
    assert body["tool_choice"] == "auto"
    for key in ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop"):
        assert body[key] == sampling[key], key
    assert "stream" not in body
    assert body["return_token_ids"] is True
    assert body["logprobs"] is True and body["top_logprobs"] == 4


def test_request_without_key_tools_or_extras(run_probe, fake):
    llm = fake([{"content": "a"}, {"content": "b"}])
    assert chat(run_probe, llm.base_url, tools=None)["status"] == "ok"
    assert chat(run_probe, llm.base_url, tools=[])["status"] == "ok"
    for req in llm.requests():
        assert "Authorization" not in req["headers"]
        body = req["body"]
        assert set(body) == {"model", "messages"}, body


def test_sampling_may_choose_tool_choice(run_probe, fake):
    llm = fake([{"content": "a"}])
    data = chat(run_probe, llm.base_url, "--sampling", '{"tool_choice": "required"}')
    assert data["status"] == "ok"
    assert llm.chat_requests()[0]["tool_choice"] == "required"


# --- retries --------------------------------------------------------------------------------


def test_500_then_success(run_probe, fake):
    llm = fake([{"fault": "status", "code": 500}, READ_CALL])
    data = chat(run_probe, llm.base_url, *FAST)
    assert data["status"] == "ok" and data["error"] is None
    assert data["attempts"] == 2 and data["http_status"] == 200
    assert data["message"]["tool_calls"][0]["function"]["name"] == "read_file"
    assert len(llm.requests()) == 2


def test_429_retry_after_is_honoured(run_probe, fake):
    llm = fake([{"fault": "status", "code": 429, "retry_after": 1}, READ_CALL])
    data = chat(run_probe, llm.base_url, *FAST)  # the back-off alone would be 10 ms
    assert data["status"] == "ok" and data["attempts"] == 2
    assert data["seconds"] >= 1.0
    first, second = llm.requests()
    assert second["time"] - first["time"] >= 0.95  # the server's clock agrees


def test_503_retry_after_is_honoured(run_probe, fake):
    llm = fake([{"fault": "status", "code": 503, "retry_after": 1}, {"content": "ok"}])
    data = chat(run_probe, llm.base_url, *FAST)
    assert data["status"] == "ok" and data["attempts"] == 2 and data["seconds"] >= 1.0


def test_backoff_grows(run_probe, fake):
    # 3 retries from 0.2 s, doubled, -25% at worst: at least 0.15 + 0.3 + 0.6 s
    llm = fake({"turns": [], "on_exhausted": "error"})
    data = chat(run_probe, llm.base_url, "--retries", "3", "--backoff", "0.2")
    assert_failed(data, "server_error", 4)
    times = [r["time"] for r in llm.requests()]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps[0] >= 0.14 and gaps[1] >= 0.29 and gaps[2] >= 0.59, gaps


def test_persistent_500_is_server_error(run_probe, fake):
    llm = fake({"turns": [], "on_exhausted": "error"})
    data = chat(run_probe, llm.base_url, "--retries", "2", *FAST)
    assert_failed(data, "server_error", 3)
    assert data["http_status"] == 500
    assert "HTTP 500" in data["error"] and "script is exhausted" in data["error"]
    assert "3 attempts" in data["error"]
    assert len(llm.requests()) == 3


def test_persistent_429_is_rate_limited(run_probe, fake):
    llm = fake({"turns": [{"fault": "status", "code": 429}], "on_exhausted": "repeat"})
    data = chat(run_probe, llm.base_url, "--retries", "1", *FAST)
    assert_failed(data, "rate_limited", 2)
    assert data["http_status"] == 429 and len(llm.requests()) == 2


def test_default_retries_are_four(run_probe, fake):
    llm = fake({"turns": [], "on_exhausted": "error"})
    data = chat(run_probe, llm.base_url, *FAST)
    assert_failed(data, "server_error", 5)


def test_stall_past_the_timeout(run_probe, fake):
    llm = fake({"turns": [{"fault": "sleep", "seconds": 20}], "on_exhausted": "repeat"})
    data = chat(run_probe, llm.base_url, "--timeout", "0.5", "--retries", "1", *FAST)
    assert_failed(data, "timeout", 2)
    assert data["http_status"] == 0
    assert data["seconds"] >= 1.0
    assert len(llm.requests()) == 2


def test_invalid_json_retried_then_bad_response(run_probe, fake):
    llm = fake({"turns": [{"fault": "invalid_json"}], "on_exhausted": "repeat"})
    data = chat(run_probe, llm.base_url, "--retries", "2", *FAST)
    assert_failed(data, "bad_response", 3)
    assert data["http_status"] == 200 and "not JSON" in data["error"]
    assert '"chatcmpl-x"' in data["error"]  # the body's first bytes are quoted


def test_invalid_json_then_success(run_probe, fake):
    llm = fake([{"fault": "invalid_json"}, {"content": "fine"}])
    data = chat(run_probe, llm.base_url, *FAST)
    assert data["status"] == "ok" and data["attempts"] == 2
    assert data["message"]["content"] == "fine"


def test_truncated_body_retried_then_bad_response(run_probe, fake):
    llm = fake({"turns": [{"fault": "truncated"}], "on_exhausted": "repeat"})
    data = chat(run_probe, llm.base_url, "--retries", "2", *FAST)
    assert_failed(data, "bad_response", 3)
    assert "cut short" in data["error"]
    assert len(llm.requests()) == 3


def test_body_without_choices_is_bad_response(run_probe, canned):
    server = canned({"error": {"message": "the engine fell over"}})
    data = chat(run_probe, server.base_url, "--retries", "1", *FAST)
    assert_failed(data, "bad_response", 2)
    assert "choices[0].message" in data["error"] and "the engine fell over" in data["error"]


def test_oversized_body_is_bad_response_at_once(run_probe, canned):
    huge = b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * (17 << 20) + b'"}}]}'
    server = canned((200, {}, huge))
    data = chat(run_probe, server.base_url, "--retries", "3", *FAST)
    assert_failed(data, "bad_response", 1)
    assert "passed 16777216 bytes" in data["error"]


# --- failures that are not retried ----------------------------------------------------------


def test_401_is_http_error_at_once(run_probe, fake):
    llm = fake({"turns": [READ_CALL], "api_key": "sk-right"})
    data = chat(run_probe, llm.base_url, "--key", "sk-wrong", "--retries", "3", *FAST)
    assert_failed(data, "http_error", 1)
    assert data["http_status"] == 401 and "invalid API key" in data["error"]
    [req] = llm.requests()
    assert req["headers"]["Authorization"] == "Bearer sk-wrong"


def test_404_is_http_error_at_once(run_probe, fake):
    llm = fake([READ_CALL])
    data = chat(run_probe, llm.url + "/v2", "--retries", "3", *FAST)
    assert_failed(data, "http_error", 1)
    assert data["http_status"] == 404 and "HTTP 404" in data["error"]


def test_422_is_http_error_at_once(run_probe, canned):
    server = canned((422, {}, b'{"detail": "bad field"}'))
    data = chat(run_probe, server.base_url, "--retries", "3", *FAST)
    assert_failed(data, "http_error", 1)
    assert data["http_status"] == 422 and "bad field" in data["error"]
    assert len(server.bodies) == 1


def test_closed_port_is_unreachable(run_probe, closed_port):
    url = f"http://127.0.0.1:{closed_port}/v1"
    data = chat(run_probe, url, "--retries", "1", *FAST)
    assert_failed(data, "unreachable", 2)
    assert data["http_status"] == 0


def test_bad_url_is_unreachable_at_once(run_probe):
    data = chat(run_probe, "ftp://127.0.0.1/v1", "--retries", "3", *FAST)
    assert_failed(data, "unreachable", 1)
    assert "bad URL" in data["error"]


# --- abort ----------------------------------------------------------------------------------


def test_abort_during_a_stall(run_probe, fake):
    llm = fake([{"fault": "sleep", "seconds": 60}])
    data = chat(run_probe, llm.base_url, "--timeout", "120", "--abort-after", "0.5", timeout=60)
    assert data["status"] == "aborted" and data["attempts"] == 1
    assert "aborted during attempt 1" in data["error"]
    assert 0.5 <= data["seconds"] < 30  # cut short: the stall alone is 60 s


def test_abort_during_a_backoff(run_probe, fake):
    llm = fake({"turns": [{"fault": "status", "code": 503, "retry_after": 50}], "on_exhausted": "repeat"})
    data = chat(run_probe, llm.base_url, "--abort-after", "0.5", timeout=60)
    assert data["status"] == "aborted" and data["attempts"] == 1
    assert data["http_status"] == 503 and "back-off" in data["error"]
    assert 0.5 <= data["seconds"] < 25  # cut short: the Retry-After alone is 50 s
    assert len(llm.requests()) == 1


# --- the probe's usage ----------------------------------------------------------------------


def test_probe_bad_usage_exits_2(run_probe, fake):
    llm = fake([])
    code, data, stderr = run_probe("--url", llm.base_url, messages=MESSAGES)  # no --model
    assert code == 2 and data is None and "usage" in stderr
    code, _, _ = run_probe("--url", llm.base_url, "--model", "m", "--retries", "x", messages=MESSAGES)
    assert code == 2
    code, _, _ = run_probe("--url", llm.base_url, "--model", "m", "--sampling", "[1]", messages=MESSAGES)
    assert code == 2
    assert llm.requests() == []
