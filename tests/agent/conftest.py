"""Fixtures of the agent tests: the probes under build/agent-probes, the scripted fakellm, and a
canned HTTP server for replies that fakellm never sends (ids missing, odd shapes, huge bodies).

KFORGE_BUILD=DIR tests another build (e.g. a sanitizer one made with
``make -C lib BUILD=DIR SANITIZE=address,undefined`` and the same for workers)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve()
PROBES = BUILD / "agent-probes"


def probe_path(name: str) -> Path:
    """build/agent-probes/NAME; fails (never skips) when it was not built."""
    path = PROBES / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make build` (or make -C workers BUILD={BUILD}) first")
    return path


class Canned:
    """A server answering POSTs with canned (status, headers, body) replies in turn, the last one
    again once they run out; ``bodies`` records the request bodies it received."""

    def __init__(self, replies: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.replies = replies
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        canned = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base name
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with canned.lock:
                    n = len(canned.bodies)
                    canned.bodies.append(body)
                status, headers, data = canned.replies[min(n, len(canned.replies) - 1)]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture()
def canned() -> Iterator[Callable[..., Canned]]:
    """start(replies) -> a running Canned server (replies: (status, headers, body) or a JSON
    value for a 200); closed after the test."""
    servers: list[Canned] = []

    def start(*replies: Any) -> Canned:
        norm = []
        for r in replies:
            if isinstance(r, tuple):
                norm.append(r)
            else:
                norm.append((200, {}, r if isinstance(r, bytes) else json.dumps(r).encode()))
        s = Canned(norm)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


@pytest.fixture()
def closed_port() -> int:
    """A local port that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def run_probe(tmp_path: Path) -> Callable[..., tuple[int, Any, str]]:
    """run(ARGS..., messages=[...], tools=[...] or None, timeout=S) -> (exit code, the one JSON
    object printed or None, stderr) of build/agent-probes/openai_probe."""
    exe = probe_path("openai_probe")
    counter = iter(range(1_000_000))

    def run(
        *args: str, messages: Any = None, tools: Any = None, timeout: float = 120
    ) -> tuple[int, Any, str]:
        n = next(counter)
        cmd = [str(exe), *args]
        if messages is not None:
            mpath = tmp_path / f"messages{n}.json"
            mpath.write_text(json.dumps(messages), encoding="utf-8")
            cmd += ["--messages", str(mpath)]
        if tools is not None:
            tpath = tmp_path / f"tools{n}.json"
            tpath.write_text(json.dumps(tools), encoding="utf-8")
            cmd += ["--tools", str(tpath)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        data = None
        if p.returncode == 0:
            assert len(lines) == 1, f"the probe printed {len(lines)} lines: {p.stdout!r}"
            data = json.loads(lines[0])
        return p.returncode, data, p.stderr

    return run
