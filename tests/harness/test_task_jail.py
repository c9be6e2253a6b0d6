"""A task is user code: it runs only in its own process, never in the judge's, and with --jail
only inside kforge-jail, whichever of its parts runs (module-level code, __init__,
get_init_inputs, get_inputs, forward) and whichever harness command runs it (check-task,
evaluate, baseline, inspect).

Each hostile task here probes what a task posted by any key could reach on the worker's host: a
secret file of the host, /etc/shadow, a TCP service on the host's loopback (PostgreSQL, Redis), a
Unix socket in a host directory (PostgreSQL's), a host path to write, the judge's process (its
modules, its environment) and the harness's cache. It then raises with what it found, and the
harness's own words carry that text back: the test reads it from the verdict."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
JAIL = ROOT / "build" / "kforge-jail"
CASES = Path(__file__).parent / "cases"
FAST = ["--backend", "cpu", "--no-compile", "--budget", "0.3"]

needs_jail = pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")

# The probes a hostile task runs where PLACE says, then raises with its findings (FINDINGS {json}).
HOSTILE = """
import json, os, socket, sys
import torch
import torch.nn as nn

PLACE = {place!r}


def _probe():
    found = {{}}

    def attempt(name, fn):
        try:
            found[name] = "ok:" + str(fn())[:300]
        except BaseException as e:  # noqa: BLE001
            found[name] = "err:" + type(e).__name__

    def tcp():
        with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
            return s.recv(64).decode()

    def unix():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect({sock!r})
            return s.recv(64).decode()

    def write():
        with open({out!r}, "w") as f:
            f.write("written by a task")
        return "written"

    attempt("secret", lambda: open({secret!r}).read())
    attempt("shadow", lambda: open("/etc/shadow").read()[:40] or 1 / 0)  # hidden: empty
    attempt("tcp", tcp)
    attempt("unix", unix)
    attempt("write", write)
    # the harness's cache (builds, baselines): only the path down to the jail's own folder shows
    attempt("cache", lambda: sorted(os.listdir(os.path.join({cache!r}, "baselines"))))
    attempt("cache_write", lambda: open(os.path.join({cache!r}, "planted.json"), "w").write("{{}}"))
    attempt("parent_environ", lambda: open(f"/proc/{{os.getppid()}}/environ").read()[:200])
    # the judge's verdict code: never where a task runs (its process is a new interpreter, or,
    # without the jail on the cpu backend, a fork of the judge made before any secret is drawn)
    found["judge_in_process"] = "kforge_harness.judge" in sys.modules
    found["key_in_environ"] = any("KEY" in k or "PASSWORD" in k for k in os.environ)
    raise RuntimeError("FINDINGS " + json.dumps(found, sort_keys=True) + " END")


if PLACE == "module":
    _probe()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        if PLACE == "init":
            _probe()

    def forward(self, x):
        if PLACE == "forward":
            _probe()
        return torch.relu(x) * 2.0


def get_inputs():
    if PLACE == "get_inputs":
        _probe()
    return [torch.randn(64, 256)]


def get_init_inputs():
    if PLACE == "get_init_inputs":
        _probe()
    return []
"""

PLACES = ["module", "init", "get_init_inputs", "get_inputs", "forward"]


class Host:
    """What a hostile task reaches for on the host: a secret file, a TCP and a Unix-socket
    service that answer with a secret, a path to write. Owned by the test; close() stops it."""

    def __init__(self, root: Path, cache: Path) -> None:
        self.token = secrets.token_hex(16)
        self.secret = root / "secret.txt"
        self.secret.write_text(f"SECRET-{self.token}")
        self.out = root / "written-by-task.txt"
        self.sock_path = root / "svc.sock"
        self.cache = cache
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(str(self.sock_path))
        os.chmod(self.sock_path, 0o777)
        self.unix.listen(8)
        self.served: list[str] = []
        self.stop = False
        for s in (self.tcp, self.unix):
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, listener: socket.socket) -> None:
        listener.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            self.served.append(listener.family.name)
            with conn:
                conn.sendall(f"SECRET-{self.token}".encode())

    def task(self, root: Path, place: str) -> Path:
        path = root / f"hostile_{place}.py"
        path.write_text(
            HOSTILE.format(
                place=place,
                port=self.tcp.getsockname()[1],
                sock=str(self.sock_path),
                out=str(self.out),
                secret=str(self.secret),
                cache=str(self.cache),
            )
        )
        return path

    def close(self) -> None:
        self.stop = True
        self.tcp.close()
        self.unix.close()


@pytest.fixture()
def host(tmp_path: Path, kforge_cache: Path):
    h = Host(tmp_path, kforge_cache)
    yield h
    h.close()


def findings(verdict: Any) -> dict[str, Any]:
    text = json.dumps(verdict)
    m = re.search(r"FINDINGS (\{.*?\}) END", text.replace('\\"', '"'))
    assert m, f"no findings in the verdict: {text[:2000]}"
    return json.loads(m.group(1))


def assert_contained(host: Host, verdict: Any) -> None:
    """Nothing of the host reached the task: every probe failed, and no secret is in the verdict."""
    f = findings(verdict)
    for probe in ("secret", "shadow", "tcp", "unix", "write", "cache", "parent_environ"):
        assert f[probe].startswith("err:"), (probe, f)
    # a write under the cache's path lands, if anywhere, in the jail's own tmpfs (the tests' cache
    # is under /tmp, which the jail makes anew): never in the host's cache
    assert not (host.cache / "planted.json").exists()
    assert f["judge_in_process"] is False and f["key_in_environ"] is False, f
    assert host.token not in json.dumps(verdict)
    assert not host.out.exists()
    assert host.served == [], host.served


@needs_jail
@pytest.mark.parametrize("place", PLACES)
def test_check_task_runs_every_part_of_a_task_in_the_jail(harness, host, tmp_path, place):
    code, v, err = harness(
        "check-task", "--task", str(host.task(tmp_path, place)), "--backend", "cpu", "--jail", str(JAIL)
    )
    assert code == 0, err
    assert v["fit"] is False
    assert_contained(host, v)


@needs_jail
@pytest.mark.parametrize("place", ["module", "get_inputs", "forward"])
def test_evaluate_runs_the_task_in_the_jail(harness, host, tmp_path, place):
    task = host.task(tmp_path, place)
    code, v, err = harness(
        "evaluate", "--task", str(task), "--candidate", str(CASES / "good"), *FAST, "--jail", str(JAIL)
    )
    assert code == 0, err
    assert v["status"] == "infra_error" and v["reward"] == -1 and v["message"].startswith("task: "), v
    assert_contained(host, v)


@needs_jail
def test_baseline_and_inspect_run_the_task_in_the_jail(harness, host, tmp_path):
    task = str(host.task(tmp_path, "module"))
    code, v, err = harness("baseline", "--task", task, "--backend", "cpu", "--no-cache", "--jail", str(JAIL))
    assert code == 0 and "error" in v, (code, v, err)
    assert_contained(host, v)
    code, v, err = harness("inspect", "--task", task, "--backend", "cpu", "--jail", str(JAIL))
    assert code == 1 and "error" in v, (code, v, err)
    assert_contained(host, v)


def test_without_the_jail_the_task_still_never_runs_in_the_judge(harness, host, tmp_path):
    """The judge's own process runs no task code even without --jail (a development setting): the
    task's process is a separate one (a fork made before the seed is drawn), where the judge's
    verdict code was never loaded."""
    for place in ("module", "forward"):
        task = host.task(tmp_path, place)
        code, v, err = harness("evaluate", "--task", str(task), "--candidate", str(CASES / "good"), *FAST)
        assert code == 0, err
        assert v["status"] == "infra_error", v
        f = findings(v)
        assert f["judge_in_process"] is False, f
        # without the jail the host is open to it: that is what --jail is for
        assert f["secret"] == f"ok:SECRET-{host.token}", f


CUDA_HOSTILE_PLACES = ["module", "forward"]


@needs_jail
@pytest.mark.gpu
@pytest.mark.parametrize("place", CUDA_HOSTILE_PLACES)
def test_on_the_gpu_the_task_runs_in_the_jail_with_gpu_0_alone(harness, host, tmp_path, place):
    """The task's process in the run profile with GPU 0's device nodes: check-task and evaluate
    (the task's tensors cross as device arenas) reach nothing of the host either."""
    task = str(host.task(tmp_path, place))
    jail = ["--jail", str(JAIL), "--gpu", "0"]
    code, v, err = harness("check-task", "--task", task, "--backend", "cuda", *jail)
    assert code == 0 and v["fit"] is False, (code, v, err)
    assert_contained(host, v)
    code, v, err = harness(
        "evaluate",
        "--task",
        task,
        "--candidate",
        str(CASES / "cuda_good"),
        "--backend",
        "cuda",
        "--no-compile",
        *jail,
    )
    assert code == 0 and v["status"] == "infra_error", (code, v, err)
    assert_contained(host, v)
