"""``kforge_harness pool``: keeps warm runners for the evaluations of one kind (backend, jail, GPU,
memory limit), so that an evaluation need not wait for a runner's start (Python, PyTorch's
import, torch._dynamo's, the CUDA context: seven to ten seconds on the H200 host).

A runner waits in standby (``runner --standby``): started like any other, in its jail, with
nothing of any candidate's; it is handed to one evaluation only, which copies its candidate into
the runner's transfer directory and tells it where (kforge_harness.launch). The pool stays the
runner's parent: it reports the runner's exit to the judge, and kills it when the judge's
connection closes first. Protocol: kforge_harness.poolclient. Owned by whoever started it (the
worker starts one per job slot); SIGTERM, SIGINT or its parent's death stop it and every runner
it started.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

from kforge_harness import launch as launchmod
from kforge_harness.poolclient import MAX_LINE
from kforge_harness.proc import PR_SET_PDEATHSIG, prctl, spawn_runner

# A runner that dies in standby is replaced after this pause, doubled per death in a row.
RESPAWN_PAUSE_S = 2.0


@dataclass
class Standby:
    proc: subprocess.Popen[bytes]
    xfer: str
    out_r: int
    err_r: int
    started: float = field(default_factory=time.monotonic)

    def discard(self) -> None:
        _kill_group(self.proc)
        for fd in (self.out_r, self.err_r):
            os.close(fd)
        shutil.rmtree(self.xfer, ignore_errors=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


class Pool:
    """``size`` runners in standby for evaluations whose options match ``opts``."""

    def __init__(self, sock_path: str, opts: launchmod.Options, size: int, max_age_s: float) -> None:
        self.sock_path = sock_path
        self.opts = opts
        self.key = json.loads(json.dumps(launchmod.pool_key(opts)))
        self.size = size
        self.max_age_s = max_age_s
        self.standby: list[Standby] = []
        self.handed: dict[int, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()
        self.deaths = 0
        self.next_spawn = 0.0
        self.stopping = False

    def _spawn(self) -> None:
        o = self.opts
        xfer = launchmod.xfer_dir(o.jail)
        # its jail lives as long as it may wait plus the longest evaluation
        lifetime = self.max_age_s + o.init_timeout + 20 * o.run_timeout + 60
        env, wrap, mem = launchmod.runner_env_wrap(o, xfer, [], lifetime)
        tail = ["--xfer", xfer, "--backend", o.backend, "--standby"]
        try:
            proc, out_r, err_r = spawn_runner(tail, env, xfer, mem, wrap)
        except OSError:
            shutil.rmtree(xfer, ignore_errors=True)
            raise
        self.standby.append(Standby(proc, xfer, out_r, err_r))

    def _tend(self) -> None:
        """Drops dead and old runners and starts new ones up to ``size``."""
        now = time.monotonic()
        for s in list(self.standby):
            if s.proc.poll() is not None:
                self.standby.remove(s)
                s.discard()
                self.deaths += 1
                self.next_spawn = now + RESPAWN_PAUSE_S * 2 ** min(self.deaths - 1, 5)
            elif now - s.started > self.max_age_s:
                self.standby.remove(s)
                s.discard()
        while len(self.standby) < self.size and now >= self.next_spawn:
            self._spawn()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        try:
            buf = b""
            while b"\n" not in buf and len(buf) < MAX_LINE:
                chunk = conn.recv(MAX_LINE)
                if not chunk:
                    break
                buf += chunk
            request = json.loads(buf.partition(b"\n")[0])
        except (OSError, ValueError):
            conn.close()
            return
        ready = [s for s in self.standby if s.proc.poll() is None]
        if not isinstance(request, dict) or request.get("take") != self.key or not ready:
            why = "no runner of that kind" if ready else "no runner in standby"
            try:
                conn.sendall(json.dumps({"none": why}).encode() + b"\n")
            except OSError:
                pass
            conn.close()
            return
        s = ready[0]  # the oldest: the warmest
        line = json.dumps({"xfer": s.xfer, "pid": s.proc.pid}).encode() + b"\n"
        try:
            socket.send_fds(conn, [line], [s.out_r, s.err_r])
        except OSError:
            conn.close()
            return  # it stays in standby
        self.standby.remove(s)
        self.deaths = 0
        for fd in (s.out_r, s.err_r):
            os.close(fd)
        with self.lock:
            self.handed[s.proc.pid] = s.proc
        threading.Thread(target=self._watch, args=(conn, s.proc), daemon=True).start()

    def _watch(self, conn: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """Tells the judge when its runner ends; kills the runner when the judge goes first."""
        conn.settimeout(None)
        while True:
            code = proc.poll()
            if code is not None:
                try:
                    conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
                except OSError:
                    pass
                break
            ready, _, _ = select.select([conn], [], [], 0.25)
            if ready:
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    _kill_group(proc)
                    break
        conn.close()
        with self.lock:
            self.handed.pop(proc.pid, None)

    def stop(self, *_: object) -> None:
        self.stopping = True

    def serve(self) -> None:
        parent = os.getppid()
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        if os.path.exists(self.sock_path):
            os.unlink(self.sock_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket: this user's alone
        try:
            listener.bind(self.sock_path)
        finally:
            os.umask(old)
        listener.listen(16)
        print(json.dumps({"pool": self.sock_path, "key": self.key, "size": self.size}), flush=True)
        try:
            while not self.stopping and os.getppid() == parent:
                self._tend()
                try:
                    ready, _, _ = select.select([listener], [], [], 0.5)
                except InterruptedError:
                    continue
                if ready:
                    conn, _ = listener.accept()
                    self._handle(conn)
                    self._tend()  # a new runner starts at once
        finally:
            listener.close()
            try:
                os.unlink(self.sock_path)
            except OSError:
                pass
            for s in self.standby:
                s.discard()
            with self.lock:
                handed = list(self.handed.values())
            for proc in handed:
                _kill_group(proc)


def run_pool(sock_path: str, opts: launchmod.Options, size: int, max_age_s: float) -> None:
    Pool(sock_path, opts, size, max_age_s).serve()
