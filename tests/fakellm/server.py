"""fakellm: a scripted OpenAI-compatible chat-completions server for tests.

Speaks ``POST /v1/chat/completions`` (no streaming) and answers each request with the next turn
of a script: a reply (content and/or tool calls) or a fault (an HTTP error, a stall, a body that
is not JSON, a body cut short, tool-call arguments that are not JSON). Every request is recorded.

Script: a JSON object ``{"turns": [...], "model": "...", "api_key": "...", "on_exhausted": ...}``
or a bare list of turns. A turn is one of::

    {"content": "text", "tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}],
     "finish_reason": "length"}            # optional: default tool_calls when there are calls, else stop
    {"fault": "status", "code": 500}       # or 429, 503...; "retry_after": N adds a Retry-After header
    {"fault": "sleep", "seconds": 5, "then": {turn}}   # stall, then answer "then" (default: a stop reply)
    {"fault": "invalid_json"}              # 200, application/json, body that does not parse
    {"fault": "truncated"}                 # Content-Length promises more than is sent; then close
    {"fault": "malformed_tool_call", "name": "write_file", "arguments": "{\\"path\\": "}

Tool-call ``arguments`` given as an object are sent as its JSON string; a string is sent verbatim.
``on_exhausted``: ``"stop"`` (default: a plain assistant reply saying so), ``"repeat"`` (serve
the last turn again, forever: a policy that loops), or ``"error"`` (HTTP 500).

With ``return_token_ids: true`` the response carries vLLM's ``prompt_token_ids`` (top level) and
``token_ids`` (in the choice); with ``logprobs: true`` the choice carries
``logprobs.content[{token, logprob, bytes, top_logprobs}]`` (``top_logprobs`` entries per token).
The token ids are fake but deterministic (4-character chunks hashed). ``max_completion_tokens``
or ``max_tokens`` below the reply's length cuts it: content truncated, no tool calls, ``length``.

Control: ``GET /_requests`` (every request received, in order), ``POST /_reset`` (forget requests,
rewind the script), ``POST /_script`` (load a new script, then reset). ``GET /v1/models`` lists
the model.

Command line: ``python tests/fakellm/server.py --port 0 --script FILE`` prints
``fakellm: listening on http://127.0.0.1:PORT``. In Python: ``start_fake_llm(script)`` returns
``(url, handle)``; ``handle.close()`` stops it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODEL = "fakellm-1"
CHARS_PER_TOKEN = 4
VOCAB = 50000


def tokenize(text: str) -> list[str]:
    """Fake tokenizer: 4-character chunks."""
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode("utf-8")) % VOCAB


def normalize_script(script: Any) -> dict[str, Any]:
    """Accepts a list of turns or ``{"turns": [...], ...}``; checks the shape."""
    if isinstance(script, list):
        script = {"turns": script}
    if not isinstance(script, dict) or not isinstance(script.get("turns"), list):
        raise ValueError("a script is a list of turns or an object with a list 'turns'")
    for i, turn in enumerate(script["turns"]):
        if not isinstance(turn, dict):
            raise ValueError(f"turn {i} is not an object")
        fault = turn.get("fault")
        if fault not in (None, "status", "sleep", "invalid_json", "truncated", "malformed_tool_call"):
            raise ValueError(f"turn {i}: unknown fault {fault!r}")
    if script.get("on_exhausted", "stop") not in ("stop", "repeat", "error"):
        raise ValueError("on_exhausted is stop, repeat or error")
    return script


class FakeLLM:
    """The server's state: the script, the cursor and the recorded requests (thread-safe)."""

    def __init__(self, script: Any) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.script = normalize_script(script)
        self.cursor = 0
        self.log: list[dict[str, Any]] = []

    def load(self, script: Any) -> None:
        s = normalize_script(script)
        with self.lock:
            self.script = s
            self.cursor = 0
            self.log = []

    def reset(self) -> None:
        with self.lock:
            self.cursor = 0
            self.log = []

    def requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return json.loads(json.dumps(self.log))

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            entry["index"] = len(self.log)
            self.log.append(entry)

    def next_turn(self) -> tuple[int | None, dict[str, Any] | None]:
        """(turn index, turn), or (None, None) when the script is spent and not repeating."""
        with self.lock:
            turns = self.script["turns"]
            if self.cursor < len(turns):
                self.cursor += 1
                return self.cursor - 1, turns[self.cursor - 1]
            if self.script.get("on_exhausted") == "repeat" and turns:
                return len(turns) - 1, turns[-1]
            return None, None


def _tool_call(spec: dict[str, Any]) -> dict[str, Any]:
    args = spec.get("arguments", {})
    return {
        "id": spec.get("id") or f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {
            "name": spec.get("name", ""),
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


def build_completion(turn: dict[str, Any], request: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat.completion object for a reply turn (or a malformed_tool_call fault)."""
    if turn.get("fault") == "malformed_tool_call":
        bad = {"name": turn.get("name", "write_file"), "arguments": turn.get("arguments", '{"path": ')}
        turn = {"content": turn.get("content"), "tool_calls": [bad]}
    content = turn.get("content")
    calls = [_tool_call(c) for c in turn.get("tool_calls") or []]
    finish = turn.get("finish_reason") or ("tool_calls" if calls else "stop")
    emitted = (content or "") + "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
    pieces = tokenize(emitted)
    limit = request.get("max_completion_tokens") or request.get("max_tokens")
    if isinstance(limit, int) and 0 < limit < len(pieces):
        pieces = pieces[:limit]
        content, calls, finish = "".join(pieces), [], "length"
    prompt_pieces = tokenize(json.dumps(request.get("messages", []), sort_keys=True))
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    choice["stop_reason"] = None
    out: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt_pieces),
            "completion_tokens": len(pieces),
            "total_tokens": len(prompt_pieces) + len(pieces),
        },
    }
    if request.get("return_token_ids"):
        out["prompt_token_ids"] = [token_id(p) for p in prompt_pieces]
        choice["token_ids"] = [token_id(p) for p in pieces]
    if request.get("logprobs"):
        top = int(request.get("top_logprobs") or 0)
        choice["logprobs"] = {"content": [_logprob(p, i, top) for i, p in enumerate(pieces)]}
    return out


def _logprob(piece: str, position: int, top: int) -> dict[str, Any]:
    lp = -((zlib.crc32(f"{position}:{piece}".encode()) % 1000) / 400.0)
    entry: dict[str, Any] = {"token": piece, "logprob": lp, "bytes": list(piece.encode("utf-8"))}
    alts = [{"token": piece, "logprob": lp, "bytes": list(piece.encode("utf-8"))}]
    for k in range(1, top):
        alt = f"<alt{k}>"
        alts.append({"token": alt, "logprob": lp - k, "bytes": list(alt.encode())})
    entry["top_logprobs"] = alts[:top]
    return entry


class Handler(BaseHTTPRequestHandler):
    server_version = "fakellm/1"
    protocol_version = "HTTP/1.1"

    @property
    def llm(self) -> FakeLLM:
        return self.server.llm  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        self._send(code, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)

    def _read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/_requests":
            self._send(200, self.llm.requests())
        elif self.path == "/v1/models":
            model = self.llm.script.get("model", DEFAULT_MODEL)
            self._send(
                200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "fakellm"}]}
            )
        else:
            self._error(404, f"no route {self.path}", "not_found_error")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        raw = self._read_body()
        if self.path == "/_reset":
            self.llm.reset()
            self._send(200, {"ok": True})
        elif self.path == "/_script":
            try:
                self.llm.load(json.loads(raw or b"null"))
            except (ValueError, TypeError) as e:
                self._error(400, str(e), "invalid_request_error")
                return
            self._send(200, {"ok": True})
        elif self.path in ("/v1/chat/completions", "/chat/completions"):
            self._chat(raw)
        else:
            self._error(404, f"no route {self.path}", "not_found_error")

    def _chat(self, raw: bytes) -> None:
        entry: dict[str, Any] = {
            "path": self.path,
            "headers": dict(self.headers.items()),
            "time": time.time(),
        }
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        entry["body"] = body if body is not None else raw.decode("utf-8", "replace")
        key = self.llm.script.get("api_key")
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            entry["turn"] = None
            self.llm.record(entry)
            self._error(401, "invalid API key", "authentication_error")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            entry["turn"] = None
            self.llm.record(entry)
            self._error(
                400, "the body must be a JSON object with model and messages", "invalid_request_error"
            )
            return
        index, turn = self.llm.next_turn()
        entry["turn"] = index
        self.llm.record(entry)
        self._serve(turn, body)

    def _serve(self, turn: dict[str, Any] | None, body: dict[str, Any]) -> None:
        model = self.llm.script.get("model", DEFAULT_MODEL)
        if turn is None:
            if self.llm.script.get("on_exhausted") == "error":
                self._error(500, "fakellm: the script is exhausted", "server_error")
            else:
                self._send(
                    200, build_completion({"content": "(fakellm: the script is exhausted)"}, body, model)
                )
            return
        fault = turn.get("fault")
        if fault == "status":
            code = int(turn.get("code", 500))
            headers = {"Retry-After": str(turn["retry_after"])} if "retry_after" in turn else None
            kind = "rate_limit_error" if code == 429 else "server_error"
            self._error(code, turn.get("message", f"fakellm: scripted {code}"), kind, headers)
        elif fault == "sleep":
            if self.llm.stopping.wait(float(turn.get("seconds", 30))):
                return
            self._serve(turn.get("then") or {"content": "(fakellm: slept)"}, body)
        elif fault == "invalid_json":
            self._send(
                200, b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"index": 0, "mess'
            )
        elif fault == "truncated":
            data = json.dumps(build_completion({"content": "this reply is cut short"}, body, model)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(200, build_completion(turn, body, model))


class Handle:
    """A running fakellm: ``url``, ``requests()``, ``reset()``, ``load(script)``, ``close()``."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.llm: FakeLLM = server.llm  # type: ignore[attr-defined]
        self.port = server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"

    def requests(self) -> list[dict[str, Any]]:
        return self.llm.requests()

    def chat_requests(self) -> list[dict[str, Any]]:
        """The recorded chat-completion request bodies, in order."""
        return [r["body"] for r in self.llm.requests()]

    def reset(self) -> None:
        self.llm.reset()

    def load(self, script: Any) -> None:
        self.llm.load(script)

    def close(self) -> None:
        self.llm.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def make_server(script: Any, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.llm = FakeLLM(script)  # type: ignore[attr-defined]
    return server


def start_fake_llm(script: Any, port: int = 0) -> tuple[str, Handle]:
    """Starts a fakellm on 127.0.0.1 in a background thread; returns (url, handle)."""
    server = make_server(script, port)
    thread = threading.Thread(target=server.serve_forever, name="fakellm", daemon=True)
    thread.start()
    handle = Handle(server, thread)
    return handle.url, handle


def load_script(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="fakellm", description="scripted OpenAI-compatible test server")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--script", help="JSON script file (default: an empty script)")
    args = p.parse_args(argv)
    server = make_server(load_script(args.script) if args.script else [], args.port, args.host)
    print(f"fakellm: listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.llm.stopping.set()  # type: ignore[attr-defined]
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
