"""/healthz, /readyz, /metrics, and the server's start and stop as the contract has them."""

from __future__ import annotations

import re

from servicekit import Stack, unique_task

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def test_health_and_ready(stack: Stack) -> None:
    h = stack.api.get("/healthz")
    assert h.status_code == 200 and h.json() == {"status": "ok"}
    assert h.headers["Content-Type"].startswith("application/json")
    r = stack.api.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ready", "database": "ok", "redis": "ok", "classes": {}}


def _metrics(stack: Stack) -> dict[str, float]:
    r = stack.api.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].replace(" ", "").startswith("text/plain;version=0.0.4"), r.headers
    out: dict[str, float] = {}
    for line in r.text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def test_metrics_count_requests_and_jobs(stack: Stack) -> None:
    for _ in range(3):
        assert stack.api.get("/healthz").status_code == 200
    r = stack.api.post("/v1/tasks", {"source": unique_task("metrics"), "backend": "cpu"})
    assert r.status_code == 201
    m = _metrics(stack)
    names = {k.split("{")[0] for k in m}
    for want in (
        "kforge_http_requests_total",
        "kforge_http_request_duration_seconds_bucket",
        "kforge_http_request_duration_seconds_count",
        "kforge_queue_depth",
        "kforge_jobs",
    ):
        assert want in names, (want, sorted(names))
    health = [
        v
        for k, v in m.items()
        if k.startswith("kforge_http_requests_total{")
        and "healthz" in k
        and 'status="200"' in k
        and "GET" in k
    ]
    assert health and sum(health) >= 3, health
    queued = [v for k, v in m.items() if k.startswith("kforge_jobs{") and 'status="queued"' in k]
    assert queued and queued[0] >= 1, "the check job of the task just made is queued (no worker here)"
    depth = [v for k, v in m.items() if k.startswith("kforge_queue_depth{") and 'class="cpu"' in k]
    assert depth and depth[0] >= 1


def test_second_server_and_sigterm(stack: Stack) -> None:
    """--port 0 picks another free port; SIGTERM stops the server with exit 0."""
    s = stack.start_server()
    assert s.url != stack.server.url
    assert stack.api.s.get(s.url + "/healthz", timeout=5).status_code == 200
    assert s.stop(timeout=15) == 0, s.log.read_text()[-2000:]
    assert s.first_line and s.out.read_text().count("\n") == 1, "one line on stdout, logs on stderr"
