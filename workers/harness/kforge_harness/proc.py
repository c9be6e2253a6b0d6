"""The judge's handle on a runner process: start, request with a deadline, capture, kill."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from kforge_harness import wire

OUTPUT_LIMIT = 64 << 10


class _Drain(threading.Thread):
    """Reads a pipe to its end, keeping the first and last bytes up to a limit."""

    def __init__(self, fd: int, limit: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            room = self.limit // 2 - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail = (self.tail + chunk)[-self.limit // 2 :]
        os.close(self.fd)

    def text(self) -> str:
        body = bytes(self.head)
        if self.total > len(self.head) + len(self.tail):
            body += f"\n... [{self.total - len(self.head) - len(self.tail)} bytes cut] ...\n".encode()
        body += bytes(self.tail)
        return body.decode(errors="replace")


class RunnerDied(Exception):
    def __init__(self, message: str, signal_no: int | None = None) -> None:
        super().__init__(message)
        self.signal_no = signal_no


class RunnerProcess:
    """Owns the runner child, its pipes and its output drains. Call ``close()`` when done."""

    def __init__(
        self,
        argv_tail: list[str],
        env: dict[str, str],
        mem_limit_mib: int | None,
        wrap: list[str] | None = None,
    ) -> None:
        cmd_r, self.cmd_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        argv = [
            *(wrap or []),
            sys.executable,
            "-m",
            "kforge_harness.runner",
            "--cmd-fd",
            str(cmd_r),
            "--reply-fd",
            str(reply_w),
            *argv_tail,
        ]

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if mem_limit_mib:
                lim = mem_limit_mib << 20
                resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
            os.setsid()

        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            env=env,
            pass_fds=(cmd_r, reply_w),
            preexec_fn=limits,
            close_fds=True,
        )
        for fd in (cmd_r, reply_w, out_w, err_w):
            os.close(fd)
        self.stdout = _Drain(out_r, OUTPUT_LIMIT)
        self.stderr = _Drain(err_r, OUTPUT_LIMIT)
        self.stdout.start()
        self.stderr.start()
        self.seq = 0

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Sends a command and waits for its reply. Raises wire.ChannelTimeout or RunnerDied."""
        self.seq += 1
        msg = dict(msg, seq=self.seq)
        try:
            wire.send(self.cmd_w, msg)
            reply = wire.recv(self.reply_r, timeout)
        except wire.ChannelTimeout:
            raise
        except (wire.ChannelError, BrokenPipeError, OSError) as e:
            raise self._death(str(e)) from e
        if reply.get("seq") != self.seq:
            raise wire.ChannelError("reply out of sequence: the result channel was tampered with")
        return reply

    def _death(self, why: str) -> RunnerDied:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return RunnerDied(f"runner stopped answering: {why}")
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return RunnerDied(f"runner killed by signal {name}", -code)
        return RunnerDied(f"runner exited with status {code}")

    def close(self) -> None:
        try:
            wire.send(self.cmd_w, {"cmd": "exit", "seq": self.seq + 1})
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        for fd in (self.cmd_w, self.reply_r):
            try:
                os.close(fd)
            except OSError:
                pass
        deadline = time.monotonic() + 2
        for d in (self.stdout, self.stderr):
            d.join(max(0.0, deadline - time.monotonic()))

    def log(self) -> str:
        out, err = self.stdout.text(), self.stderr.text()
        return (out + ("\n" if out and err else "") + err)[-4000:]
