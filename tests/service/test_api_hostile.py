"""Hostile clients (server/conn_guard.c, server/http_head.c, server/job_events_get.c): a
slowloris of a few hundred connections dribbling header lines, stream exhaustion by one key,
and heads libmicrohttpd would refuse with HTML. Throughout, a normal client is still answered,
and every refusal is the registry's JSON error with a request id.

The attackers connect from 127.0.0.3 and the normal client from 127.0.0.2 (Linux routes all of
127/8 to the loopback), so that the per-client limit tells them apart as it would tell apart
two hosts."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from servicekit import Api, PgCluster, Stack, assert_error, cli, registry, unique_task, wait_until

ATTACKER = "127.0.0.3"
NORMAL = "127.0.0.2"
PER_CLIENT = 40
HEADER_TIMEOUT_S = 2
SETTINGS = {
    "per_client_connections": PER_CLIENT,
    "header_timeout_s": HEADER_TIMEOUT_S,
    "max_header_bytes": 8192,
    "max_streams": 6,
    "max_streams_per_key": 2,
    "max_streams_anonymous": 2,
    "stream_max_s": 6,
    # kept connections, to show the header deadline on a kept connection's next head (off by
    # default: test_without_keep_alive_no_later_head_reaches_libmicrohttpd)
    "keep_alive": True,
}


@pytest.fixture(scope="module")
def hostile(pg_cluster: PgCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """This module's stack, its server with small limits and a 2 s header deadline."""
    s = Stack(pg_cluster, tmp_path_factory.mktemp("stack-hostile"), **SETTINGS)
    yield s
    s.close()


def _addr(stack: Stack) -> tuple[str, int]:
    host, port = stack.server.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def _connect(stack: Stack, source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(_addr(stack))
    return s


def _reply(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one raw HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, headers, body


def _read_all(s: socket.socket, deadline_s: float) -> bytes:
    """Everything until the server closes (or the deadline passes)."""
    out = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except (TimeoutError, socket.timeout):
            break
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


def _assert_json_error(raw: bytes, name: str) -> dict:
    """raw is one response with the registry's error `name`, with a request id in both places."""
    assert raw, f"no reply where {name} was expected"
    status, headers, body = _reply(raw)
    code, http_status = registry()[name]
    assert status == http_status, (status, raw[:300])
    assert headers.get("content-type", "").startswith("application/json"), raw[:300]
    err = json.loads(body)["error"]
    assert err["name"] == name and err["code"] == code, err
    assert err["request_id"] and err["request_id"] == headers.get("x-request-id"), (err, headers)
    return err


class Normal:
    """The well-behaved client, from its own address: one connection per request."""

    def __init__(self, stack: Stack) -> None:
        self.host, self.port = _addr(stack)
        self.key = stack.key

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        c = http.client.HTTPConnection(self.host, self.port, timeout=10, source_address=(NORMAL, 0))
        try:
            headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"{}")
        finally:
            c.close()


def test_slowloris_is_cut_and_others_are_served(hostile: Stack) -> None:
    """300 connections from one address each send a request line and then one header line every
    0.5 s, never ending their heads. The address gets PER_CLIENT connections (the others a JSON
    429 at once); those are cut with a JSON 408 once HEADER_TIMEOUT_S passed since they started,
    though bytes kept coming. Meanwhile another client is answered, reads and a write."""
    n_attack = 300
    socks: list[socket.socket] = []
    refused: list[bytes] = []
    for _ in range(n_attack):
        s = _connect(hostile, ATTACKER)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    started = time.monotonic()
    stop = threading.Event()
    served: list[int] = []

    def normal_client() -> None:
        normal = Normal(hostile)
        while not stop.is_set():
            served.append(normal.request("GET", "/healthz")[0])
            time.sleep(0.1)

    t = threading.Thread(target=normal_client)
    t.start()
    try:
        # dribble a header line every 0.5 s on every socket still open
        open_socks = {s.fileno(): s for s in socks}
        closed_at: dict[int, float] = {}
        replies: dict[int, bytes] = {}
        while open_socks and time.monotonic() - started < HEADER_TIMEOUT_S + 4:
            for fd, s in list(open_socks.items()):
                try:
                    s.sendall(b"X-Dribble: 1\r\n")
                    s.settimeout(0.001)
                    data = s.recv(65536)
                except (BlockingIOError, TimeoutError, socket.timeout):
                    continue
                except OSError:
                    data = b""
                replies[fd] = replies.get(fd, b"") + data
                if not data or data.endswith(b"}"):
                    closed_at[fd] = time.monotonic() - started
                    del open_socks[fd]
            time.sleep(0.5)
        assert not open_socks, f"{len(open_socks)} dribbling connections outlived the header deadline"
        by_name: dict[str, int] = {}
        for raw in replies.values():
            if not raw:
                continue
            status, _, body = _reply(raw)
            name = json.loads(body)["error"]["name"]
            by_name[name] = by_name.get(name, 0) + 1
            if name == "too_many_connections":
                refused.append(raw)
        # the client got its PER_CLIENT connections, cut by the deadline, the others refused
        assert by_name.get("request_timeout", 0) >= PER_CLIENT - 2, by_name
        assert by_name.get("too_many_connections", 0) >= n_attack - PER_CLIENT - 10, by_name
        _assert_json_error(refused[0], "too_many_connections")
        late = [at for fd, at in closed_at.items() if replies.get(fd, b"").find(b"request_timeout") >= 0]
        assert late and max(late) < HEADER_TIMEOUT_S + 2, f"cut after {max(late):.1f} s"
        for raw in (r for r in replies.values() if b"request_timeout" in r):
            _assert_json_error(raw, "request_timeout")
            break
        # a write from the normal client, while the attack held its connections
        status, body = Normal(hostile).request(
            "POST", "/v1/tasks", {"source": unique_task("hostile"), "backend": "cpu"}
        )
        assert status == 201, body
    finally:
        stop.set()
        t.join(15)
        for s in socks:
            s.close()
    assert served and all(code == 200 for code in served), served[:20]
    assert len(served) >= 5, f"the normal client got only {len(served)} answers"


def test_kept_alive_connection_dribbling_its_next_head_is_cut(hostile: Stack) -> None:
    """After one answered request, a kept-alive connection that dribbles its next head is shut
    down HEADER_TIMEOUT_S after the answer (libmicrohttpd alone would wait forever)."""
    s = _connect(hostile, ATTACKER)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    while b'{"status":"ok"}' not in first:
        chunk = s.recv(4096)
        assert chunk, first
        first += chunk
    t0 = time.monotonic()
    s.sendall(b"GET /healthz HTTP/1.1\r\n")
    closed = False
    while time.monotonic() - t0 < HEADER_TIMEOUT_S + 3:
        try:
            s.sendall(b"X-Dribble: 1\r\n")
            s.settimeout(0.5)
            if s.recv(4096) == b"":
                closed = True
                break
        except (TimeoutError, socket.timeout):
            continue
        except OSError:
            closed = True
            break
    s.close()
    assert closed, "the kept-alive connection still reads header lines"
    assert time.monotonic() - t0 < HEADER_TIMEOUT_S + 2


@pytest.mark.parametrize(
    "head,name",
    [
        # libmicrohttpd's own 413 (a Content-Length past 2^64), 400, 431, 414 and 505 were HTML
        (
            b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "body_too_large",
        ),
        (b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n", "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", "headers_too_large"),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Many: aaaaaaaaaa\r\n" * 600 + b"\r\n",
            "headers_too_large",
        ),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "uri_too_long"),
        (b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", "http_version_not_supported"),
        (b"GARBAGE\r\n\r\n", "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\n folded: x\r\n\r\n", "malformed_request"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "malformed_request"),
        (
            b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
            "malformed_request",
        ),
        # a chunked body whose framing is garbage: libmicrohttpd answered it itself
        (
            b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            "length_required",
        ),
    ],
    ids=[
        "content-length-overflow",
        "content-length-junk",
        "long-header",
        "many-headers",
        "long-url",
        "http2",
        "garbage",
        "folded",
        "two-hosts",
        "te-and-cl",
        "chunked-garbage",
    ],
)
def test_heads_libmicrohttpd_would_refuse_get_json(hostile: Stack, head: bytes, name: str) -> None:
    s = _connect(hostile, NORMAL)
    try:
        s.sendall(head)
        raw = _read_all(s, 5)
    finally:
        s.close()
    _assert_json_error(raw, name)


@pytest.mark.parametrize(
    "second",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\n folded: x\r\n\r\n",
        b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n",
        b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",  # even a good one: one request, one answer
    ],
    ids=["garbage", "two-hosts", "folded", "http2", "chunked-garbage", "good"],
)
def test_without_keep_alive_no_later_head_reaches_libmicrohttpd(hostile: Stack, second: bytes) -> None:
    """With the default settings (keep_alive off) a connection carries one request: its answer
    says Connection: close and the connection ends, so a second head sent behind the first
    (pipelined, whatever it holds) is never parsed by libmicrohttpd, which would answer a bad
    one with HTML and no request id. The client sends it again on a new connection, through
    the door's check."""
    server = hostile.start_server(keep_alive=False)
    try:
        host, port = server.url.split("//", 1)[1].rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + second)
            raw = _read_all(s, 5)
        finally:
            s.close()
        assert raw.count(b"HTTP/1.") == 1, raw[:600]
        status, headers, body = _reply(raw)
        assert status == 200 and headers.get("connection") == "close", raw[:600]
        assert json.loads(body)["status"] == "ok" and b"<html" not in raw.lower()
    finally:
        server.stop()


def test_client_request_id_is_kept_at_the_door(hostile: Stack) -> None:
    s = _connect(hostile, NORMAL)
    try:
        s.sendall(b"GET /healthz HTTP/3.0\r\nX-Request-Id: door-check.1\r\n\r\n")
        err = _assert_json_error(_read_all(s, 5), "http_version_not_supported")
    finally:
        s.close()
    assert err["request_id"] == "door-check.1"


def test_body_over_the_limit_is_json_413(hostile: Stack) -> None:
    """Both ways a body passes max_body_bytes: announced (Content-Length) and streamed."""
    limit = hostile.settings["max_body_bytes"]
    r = hostile.api.post("/v1/tasks", data=b"x" * (limit + 1), headers={"Content-Type": "application/json"})
    assert_error(r, "body_too_large")

    def chunks() -> Iterator[bytes]:
        for _ in range(limit // 8192 + 2):
            yield b" " * 8192

    # streamed (chunked): refused before any of it is read (bodies come with Content-Length)
    r = hostile.api.post("/v1/tasks", data=chunks(), headers={"Content-Type": "application/json"})
    assert_error(r, "length_required")


def _open_stream(stack: Stack, job_id: str, key: str | None) -> requests.Response:
    headers = {"Accept": "text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return requests.get(
        f"{stack.server.url}/v1/jobs/{job_id}/events", headers=headers, stream=True, timeout=10
    )


def test_one_key_cannot_take_every_stream(hostile: Stack) -> None:
    """A key holds at most max_streams_per_key event streams (a queued job's stream stays open:
    no worker here); the next is 503 too_many_streams naming the per-key limit, while another
    key still gets a stream and the first key's ordinary reads are answered. A closed stream
    gives its slot back."""
    first_key = hostile.key
    other_key = cli(hostile.env(), "keys", "create", "--name", f"other-{uuid.uuid4().hex[:6]}").strip()
    r = hostile.api.post("/v1/tasks", {"source": unique_task("streams"), "backend": "cpu"})
    assert r.status_code == 201, r.text
    job_id = r.json()["job"]["id"]
    r2 = requests.post(
        f"{hostile.server.url}/v1/tasks",
        json={"source": unique_task("streams other"), "backend": "cpu"},
        headers={"Authorization": f"Bearer {other_key}"},
        timeout=10,
    )
    assert r2.status_code == 201, r2.text
    other_job = r2.json()["job"]["id"]
    held = [_open_stream(hostile, job_id, first_key) for _ in range(SETTINGS["max_streams_per_key"])]
    try:
        for h in held:
            assert h.status_code == 200, h.text
        over = _open_stream(hostile, job_id, first_key)
        err = assert_error(over, "too_many_streams")
        assert "max_streams_per_key" in err["message"], err
        assert over.headers.get("Retry-After"), over.headers
        theirs = _open_stream(hostile, other_job, other_key)
        assert theirs.status_code == 200, theirs.text
        theirs.close()
        assert hostile.api.get(f"/v1/jobs/{job_id}").status_code == 200
    finally:
        for h in held:
            h.close()

    def slot_back() -> bool:
        r = _open_stream(hostile, job_id, first_key)
        ok = r.status_code == 200
        r.close()
        return ok

    wait_until(slot_back, 10, "a closed stream to give its slot back")


def test_clients_without_a_key_share_their_streams(hostile: Stack) -> None:
    """The clients without a key hold max_streams_anonymous streams together (here of a published
    episode's job, which anyone may follow); the next is 503 naming that limit, while a key (of
    its own: the stack key's slots may still be held by the streams the tests before closed)
    still gets a stream."""
    body = {"task": {"source": unique_task("anonymous streams")}, "backend": "cpu", "publish": "results"}
    r = hostile.api.post("/v1/optimize", body)
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    held = [_open_stream(hostile, job_id, None) for _ in range(SETTINGS["max_streams_anonymous"])]
    try:
        for h in held:
            assert h.status_code == 200, h.text
        err = assert_error(_open_stream(hostile, job_id, None), "too_many_streams")
        assert "max_streams_anonymous" in err["message"], err
        key = cli(hostile.env(), "keys", "create", "--name", f"keyed-{uuid.uuid4().hex[:6]}").strip()
        keyed = _open_stream(hostile, job_id, key)
        assert keyed.status_code == 200, keyed.text
        keyed.close()
    finally:
        for h in held:
            h.close()


def test_a_stream_ends_after_stream_max_s(hostile: Stack) -> None:
    """A stream of a job that never ends (no worker here) is closed stream_max_s after it began,
    so that it holds its slot no longer; the client reconnects with Last-Event-ID. (A key of its
    own: the stack key's slots may still be held by the streams the test before closed.)"""
    api = Api(
        hostile.server.url,
        cli(hostile.env(), "keys", "create", "--name", f"ends-{uuid.uuid4().hex[:6]}").strip(),
    )
    r = api.post("/v1/tasks", {"source": unique_task("stream end"), "backend": "cpu"})
    assert r.status_code == 201, r.text
    t0 = time.monotonic()
    events = list(api.events(r.json()["job"]["id"], deadline_s=60))
    took = time.monotonic() - t0
    assert [e["event"] for e in events] == ["queued"], events
    assert SETTINGS["stream_max_s"] - 1 <= took < SETTINGS["stream_max_s"] + 10, took


def test_guard_metrics(hostile: Stack) -> None:
    text = hostile.api.get("/metrics").text
    assert "kforge_connections_open " in text, text[-2000:]
    refused = [ln for ln in text.splitlines() if ln.startswith("kforge_connections_refused_total{")]
    assert any('reason="timeout"' in ln and not ln.endswith(" 0") for ln in refused), refused
    assert Path(hostile.server.log).exists()
