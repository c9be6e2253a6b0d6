"""The judge's side of a runner pool (kforge_harness.pool): takes one warm runner, and stands in
for its process (the pool is its parent: only the pool can wait for it). Free of PyTorch.

Protocol, on the pool's Unix stream socket, one JSON object per line:
  judge -> pool: {"take": KEY}                KEY: what the runner must have been started with
  pool -> judge: {"xfer": DIR, "pid": PID}    with the read ends of the runner's stdout and
                                              stderr attached (SCM_RIGHTS)
             or: {"none": WHY}
  pool -> judge: {"exit": STATUS}             when the runner ends (Popen's returncode)
Closing the connection before the runner has ended makes the pool kill it.

A task's process (kforge_harness.refrunner), kept by the task's SHA-256:
  judge -> pool: {"take_ref": KEY, "sha": SHA, "task": PATH}
  pool -> judge: {"xfer": DIR, "pid": PID, "uses": N}   (no descriptors: the pool drains its
                                              output, and sends its tail with the exit status)
             or: {"none": WHY}                (the pool then starts one for SHA from PATH)
  pool -> judge: {"exit": STATUS, "log": TAIL} when it ends
  judge -> pool: {"return": true}             it is done and fit to be used again; closing
                                              the connection without this has it killed
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any

# How long the judge waits for the pool's answer before starting a runner of its own.
TAKE_TIMEOUT_S = 5.0
MAX_LINE = 1 << 16


class PooledProc:
    """A pooled runner's process as Popen shows one: ``pid``, ``returncode``, ``poll()``,
    ``wait()``; the exit status comes over the pool connection ``conn``, which this owns."""

    def __init__(self, conn: socket.socket, pid: int, rest: bytes = b"") -> None:
        self.conn = conn
        self.pid = pid
        self.returncode: int | None = None
        self.log = ""  # a task's process's output tail, sent with its exit status
        self._buf = rest

    def _take_status(self) -> bool:
        """Reads what the pool sent; True once the status is known (EOF without one: the pool
        is gone, and its runners with it, so the runner counts as killed)."""
        while b"\n" not in self._buf:
            try:
                chunk = self.conn.recv(MAX_LINE)
            except BlockingIOError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self.returncode = -signal.SIGKILL
                return True
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
            self.returncode = int(msg["exit"])
            self.log = str(msg.get("log") or "")[-2000:]
        except (ValueError, KeyError, TypeError):
            self.returncode = -signal.SIGKILL
        return True

    def give_back(self) -> bool:
        """Returns a task's process to the pool (before closing the connection)."""
        try:
            self.conn.setblocking(True)
            self.conn.sendall(b'{"return": true}\n')
            return True
        except OSError:
            return False

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self.conn], [], [], 0)
            if ready:
                self._take_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.conn], [], [], left)
            if not ready:
                raise subprocess.TimeoutExpired("pooled runner", timeout or 0.0)
            self._take_status()
        self.conn.close()
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class Taken:
    xfer: str
    proc: PooledProc
    out_r: int
    err_r: int


def _ask(
    sock_path: str, request: dict[str, Any], max_fds: int
) -> tuple[socket.socket, dict[str, Any], bytes, list[int]] | None:
    """Sends ``request`` to the pool and reads its answer: (the connection, the answer, what came
    after its line, descriptors attached), or None when the pool is not there or does not answer
    in time."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(TAKE_TIMEOUT_S)
    buf, fds = b"", []
    try:
        conn.connect(sock_path)
        conn.sendall(json.dumps(request).encode() + b"\n")
        while b"\n" not in buf and len(buf) < MAX_LINE:
            data, got, _, _ = socket.recv_fds(conn, MAX_LINE, max(1, max_fds))
            fds += got
            if not data:
                break
            buf += data
    except OSError:
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    line, _, rest = buf.partition(b"\n")
    try:
        answer = json.loads(line)
    except ValueError:
        answer = {}
    return conn, answer if isinstance(answer, dict) else {}, rest, fds


def take_ref(sock_path: str, key: dict[str, Any], sha: str, task_path: str) -> tuple[str, PooledProc] | None:
    """The pool's idle process of the task whose source hashes to ``sha`` (its transfer
    directory and process), or None: the pool has none (it then starts one from ``task_path``
    for the next evaluation), is not there, or does not answer in time."""
    got = _ask(sock_path, {"take_ref": key, "sha": sha, "task": task_path}, 0)
    if got is None:
        return None
    conn, answer, rest, fds = got
    for fd in fds:  # none is sent for a task's process
        os.close(fd)
    if "xfer" not in answer:
        conn.close()
        return None
    conn.settimeout(None)
    conn.setblocking(False)
    return str(answer["xfer"]), PooledProc(conn, int(answer["pid"]), rest)


def take(sock_path: str, key: dict[str, Any]) -> Taken | None:
    """One warm runner from the pool at ``sock_path`` that was started with ``key``; None when
    the pool is not there, has none of that kind, or does not answer in time (the caller then
    starts its own)."""
    got = _ask(sock_path, {"take": key}, 2)
    if got is None:
        return None
    conn, answer, rest, fds = got
    if "xfer" not in answer or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    conn.settimeout(None)
    conn.setblocking(False)
    proc = PooledProc(conn, int(answer["pid"]), rest)
    return Taken(str(answer["xfer"]), proc, fds[0], fds[1])
