"""The worker's pool of warm runners (workers/runner_pool.c): started beside the worker with a
runner in standby, started again when it dies (its runner dying with it), gone with the worker;
pool_runners=0 runs none. A real worker on the real stack, cpu backend."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from servicekit import Stack, descendants


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def pools_below(pid: int) -> list[int]:
    """The worker's pools: its children running `-m kforge_harness pool` (a process the pool has
    just forked carries the pool's command line until it execs: one CI run counted it as a second
    pool)."""
    return [
        p
        for p in descendants(pid)
        if parent(p) == pid and cmdline(p)[1:4] == ["-m", "kforge_harness", "pool"]
    ]


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def standby_below(pool: int) -> list[int]:
    """The pool's runners in standby (its children: kforge-jail, or the runner itself)."""
    return [p for p in descendants(pool) if parent(p) == pool and "--standby" in cmdline(p)]


def wait_for(what: Callable[[], list[int]], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.2)
    return []


def gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and "kforge" in " ".join(cmdline(p)) for p in pids):
            return True
        time.sleep(0.2)
    return False


def test_the_worker_keeps_restarts_and_stops_its_pool(stack: Stack, workers) -> None:
    w = workers()
    pools = wait_for(lambda: pools_below(w.pid), 30)
    assert len(pools) == 1, w.log.read_text()[-3000:]
    runners = wait_for(lambda: standby_below(pools[0]), 30)
    assert len(runners) == 1

    inside = descendants(runners[0])  # the jail's processes
    os.kill(pools[0], signal.SIGKILL)  # the pool crashes: its runner dies with it
    assert gone(runners + inside, 15), "a standby runner outlived its pool"
    again = wait_for(lambda: [p for p in pools_below(w.pid) if p != pools[0]], 30)
    assert len(again) == 1, w.log.read_text()[-3000:]
    assert "runner pool exited" in w.log.read_text()
    fresh = wait_for(lambda: standby_below(again[0]), 30)
    assert len(fresh) == 1

    below = descendants(again[0])
    assert w.stop(timeout=20) == 0
    assert gone(again + below, 15), "the pool or its runner outlived the worker"


def test_pool_runners_zero_runs_no_pool(stack: Stack, workers) -> None:
    w = workers(pool_runners=0)
    deadline = time.monotonic() + 30
    while "ready" not in w.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "ready" in w.log.read_text(), w.log.read_text()[-3000:]
    time.sleep(1)
    assert pools_below(w.pid) == [] and "runner pool" not in w.log.read_text()
