"""A task posted with any key runs only in the jail, through every path of the service: its
check (POST /v1/tasks), an evaluation (POST /v1/evaluations) and an optimization's profile
(POST /v1/optimize). The hostile task below reaches for what the service's host holds: the
stack's Redis on loopback, PostgreSQL's socket, the database URL in the environment, a secret
file of the host; then it raises with what it found, which the harness's words carry back
into the task's check reasons, the verdict and the episode. None of the service's secrets may
come back, and every probe must have failed."""

from __future__ import annotations

import json
import re
import secrets
import uuid
from pathlib import Path
from typing import Any

from servicekit import Stack, candidate_files, evaluation_body

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = """
import json, os, socket
import torch
import torch.nn as nn


def _probe():
    found = {{}}

    def attempt(name, fn):
        try:
            found[name] = "ok:" + str(fn())[:300]
        except BaseException as e:  # noqa: BLE001
            found[name] = "err:" + type(e).__name__

    def redis():
        with socket.create_connection(("127.0.0.1", {redis_port}), timeout=3) as s:
            s.sendall(b"PING\\r\\n")
            return s.recv(64).decode()

    def postgres():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect({pg_sock!r})
            return "connected"

    attempt("redis", redis)
    attempt("postgres", postgres)
    attempt("secret", lambda: open({secret!r}).read())
    # the harness's cache (builds, baselines): only the path down to the jail's own folder shows
    attempt("harness_cache", lambda: os.listdir(os.path.join({cache!r}, "baselines")))
    found["database_url"] = [k for k in os.environ if "DATABASE" in k or "REDIS" in k]
    raise RuntimeError("FINDINGS " + json.dumps(found, sort_keys=True) + " END")


_probe()  # {tag}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def hostile(stack: Stack, token: str) -> str:
    secret = stack.root / "host-secret.txt"
    secret.write_text(f"SECRET-{token}")
    pg_sock = next(stack.cluster.sock.glob(".s.PGSQL.*"))
    return HOSTILE.format(
        redis_port=stack.redis.port,
        pg_sock=str(pg_sock),
        secret=str(secret),
        cache=str(stack.root / "harness-cache"),
        tag=uuid.uuid4().hex,
    )


def findings(obj: Any) -> dict[str, Any]:
    text = json.dumps(obj).replace('\\"', '"')
    m = re.search(r"FINDINGS (\{.*?\}) END", text)
    assert m, f"no findings came back: {text[:3000]}"
    return json.loads(m.group(1))


def contained(obj: Any, token: str) -> None:
    f = findings(obj)
    for probe in ("redis", "postgres", "secret", "harness_cache"):
        assert f[probe].startswith("err:"), (probe, f)
    assert f["database_url"] == [], f
    text = json.dumps(obj)
    assert token not in text and "PONG" not in text
    assert stack_secret_free(text)


def stack_secret_free(text: str) -> bool:
    """No API key (kf_PREFIX_SECRET) and no connection URL in what came back."""
    return re.search(r"kf_[0-9a-f]{8}_[0-9a-f]{40}|postgresql://|redis://", text) is None


def test_a_hostile_task_is_contained_on_every_path(stack: Stack, workers) -> None:
    token = secrets.token_hex(12)
    source = hostile(stack, token)
    w = workers()

    # its check (POST /v1/tasks): the reasons are the task's own words, from inside the jail
    made = stack.api.post("/v1/tasks", {"source": source, "backend": "cpu"})
    assert made.status_code == 201, made.text
    job = stack.api.wait_job(made.json()["job"]["id"], watch=[w])
    assert job["status"] == "succeeded", job
    task = stack.api.get(f"/v1/tasks/{made.json()['task']['id']}").json()
    assert task["status"] == "invalid" and task["check"]["fit"] is False, task
    contained(task["check"], token)

    # an evaluation of a candidate on it (the worker's evaluate: the task's process in the jail)
    body = evaluation_body(source, candidate_files(ROOT / "tests" / "harness" / "cases" / "good"))
    r = stack.api.post("/v1/evaluations", body)
    if r.status_code == 422:  # a task that failed its check is refused at submit, with its reasons
        contained(r.json(), token)
        return
    assert r.status_code == 202, r.text
    job = stack.api.wait_job(r.json()["job"]["id"], watch=[w])
    contained(job, token)
