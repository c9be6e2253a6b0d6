"""The judge's handle on a runner process: start, request with a deadline, capture, kill."""

from __future__ import annotations

import os
import resource
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from kforge_harness import framing

OUTPUT_LIMIT = 64 << 10


class Drain(threading.Thread):
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


PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36


def prctl(*args: int) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(*[ctypes.c_ulong(a) for a in args])


def drop_capabilities() -> None:
    """Empties the capability bounding set and forbids new privileges, so that a runner started
    by root keeps no capability across exec (no ptrace of the judge, no reading its memory).
    Runs in the child between fork and exec; errors are ignored where there is nothing to drop."""
    for cap in range(64):
        if prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def make_undumpable() -> None:
    """Marks the calling process (the judge) non-dumpable: /proc/<pid>/mem and ptrace are then
    closed to processes without CAP_SYS_PTRACE, the runner included."""
    prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def become_subreaper() -> None:
    """Makes the calling process (the judge) the reaper of its descendants' orphans: a process a
    runner or task's process started, that left their session and outlived them, becomes the
    judge's child, which ``end_orphans`` then ends."""
    prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children() -> list[int]:
    """The pids of this process's children (from /proc: every process whose parent it is)."""
    me, out = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == me:
            out.append(int(entry))
    return out


def end_orphans(keep: set[int]) -> list[int]:
    """Kills (SIGKILL) and reaps every child of this process whose pid is not in ``keep``, until
    none is left (a child may have made children of its own, which then come to this process);
    returns their pids. With ``become_subreaper`` these are whatever the runner left behind."""
    ended: list[int] = []
    for _ in range(20):
        found = [pid for pid in children() if pid not in keep]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        ended += found
    return ended


class RunnerDied(Exception):
    def __init__(self, message: str, signal_no: int | None = None) -> None:
        super().__init__(message)
        self.signal_no = signal_no


def spawn_runner(
    argv_tail: list[str],
    env: dict[str, str],
    xfer: str,
    mem_limit_mib: int | None,
    wrap: list[str] | None = None,
    module: str = "kforge_harness.runner",
) -> tuple[subprocess.Popen[bytes], int, int]:
    """Makes the channel's two FIFOs in ``xfer`` and starts ``python -m MODULE`` (the candidate's
    runner, or the task's: kforge_harness.refrunner) inside ``wrap``, the jail's prefix, when
    given, in a session of its own. Returns the child and the read ends of its stdout and
    stderr pipes (the caller owns them)."""
    cmd_path = os.path.join(xfer, "cmd.fifo")
    reply_path = os.path.join(xfer, "reply.fifo")
    os.mkfifo(cmd_path, 0o600)
    os.mkfifo(reply_path, 0o600)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    argv = [
        *(wrap or []),
        os.path.abspath(sys.executable),
        "-m",
        module,
        "--cmd-fifo",
        cmd_path,
        "--reply-fifo",
        reply_path,
        *argv_tail,
    ]
    jailed = bool(wrap)

    def limits() -> None:
        # it dies with the thread that started it (a judge, a pool) even when that is SIGKILLed;
        # inside the jail, kforge-jail's child dies with kforge-jail in turn
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if mem_limit_mib and not jailed:
            lim = mem_limit_mib << 20
            resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
        os.setsid()
        if not jailed:  # the jail drops every capability of the command itself
            drop_capabilities()

    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            env=env,
            preexec_fn=limits,
            close_fds=True,
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w):
            os.close(fd)
    return proc, out_r, err_r


class ForkedProc:
    """A child made by ``fork_runner``, as Popen shows one: ``pid``, ``returncode``, ``poll()``,
    ``wait()``, ``kill()``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked runner", timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def fork_runner(
    argv_tail: list[str], env: dict[str, str], xfer: str, mem_limit_mib: int | None, module: str
) -> tuple[ForkedProc, int, int]:
    """As ``spawn_runner`` without a jail, but the child is a fork of this process running
    ``MODULE.main``, not a new interpreter: it starts with what this process has imported
    (PyTorch: a second and a half of CPU on a small machine, per evaluation). The caller has
    drawn no secret yet (the child holds a copy of its memory) and made no CUDA context (a
    fork cannot use one). The child gets the same limits, session, empty capability set and
    environment as a spawned one."""
    cmd_path = os.path.join(xfer, "cmd.fifo")
    reply_path = os.path.join(xfer, "reply.fifo")
    os.mkfifo(cmd_path, 0o600)
    os.mkfifo(reply_path, 0o600)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    argv = ["--cmd-fifo", cmd_path, "--reply-fifo", reply_path, *argv_tail]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if mem_limit_mib:
                lim = mem_limit_mib << 20
                resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
            os.setsid()
            drop_capabilities()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            os.environ.clear()
            os.environ.update(env)
            sys.argv = [module, *argv]
            import importlib

            code = importlib.import_module(module).main(argv)
        except BaseException:  # noqa: BLE001 - said on the child's stderr, which the judge keeps
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code if isinstance(code, int) else 1)
    for fd in (out_w, err_w):
        os.close(fd)
    return ForkedProc(pid), out_r, err_r


class RunnerProcess:
    """Owns the runner child, the two FIFOs of its channel and its output drains.

    The channel is a pair of FIFOs in the transfer directory (``cmd`` and ``reply``), opened by
    path on both sides, so it crosses a jail that passes no file descriptors. The judge holds
    both FIFOs open read-write, so opening never blocks and a reply is awaited while the child
    is polled for its death. Call ``close()`` when done.
    """

    def __init__(
        self,
        argv_tail: list[str],
        env: dict[str, str],
        xfer: str,
        mem_limit_mib: int | None,
        wrap: list[str] | None = None,
        module: str = "kforge_harness.runner",
        fork: bool = False,
    ) -> None:
        """``fork``: a fork of this process (fork_runner) instead of a new interpreter, where
        no jail is asked for."""
        if fork and not wrap:
            forked, out_r, err_r = fork_runner(argv_tail, env, xfer, mem_limit_mib, module)
            self._attach(xfer, forked, out_r, err_r)
            return
        proc, out_r, err_r = spawn_runner(argv_tail, env, xfer, mem_limit_mib, wrap, module)
        self._attach(xfer, proc, out_r, err_r)

    @classmethod
    def adopt(cls, xfer: str, proc: Any, out_r: int, err_r: int) -> RunnerProcess:
        """A runner started by someone else (a pool's, kforge_harness.pool): its FIFOs in
        ``xfer``, ``proc`` something with Popen's pid, poll(), wait() and returncode, and the
        read ends of its output pipes, which this object then owns."""
        self = cls.__new__(cls)
        self._attach(xfer, proc, out_r, err_r)
        return self

    def _attach(self, xfer: str, proc: Any, out_r: int, err_r: int) -> None:
        self.cmd_w = os.open(os.path.join(xfer, "cmd.fifo"), os.O_RDWR | os.O_CLOEXEC)
        self.reply_r = os.open(os.path.join(xfer, "reply.fifo"), os.O_RDWR | os.O_CLOEXEC)
        self.proc = proc
        self.stdout = Drain(out_r, OUTPUT_LIMIT)
        self.stderr = Drain(err_r, OUTPUT_LIMIT)
        self.stdout.start()
        self.stderr.start()
        self.seq = 0
        self.posted: tuple[int, str, float] | None = None

    def _await_reply(self, timeout: float) -> None:
        """Waits until the reply FIFO is readable, or raises: ChannelTimeout, RunnerDied."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise framing.ChannelTimeout("timed out waiting for the runner")
            ready, _, _ = select.select([self.reply_r], [], [], min(left, 0.25))
            if ready:
                return
            if self.proc.poll() is not None:
                raise self._death("the runner exited")

    def _send(self, msg: dict[str, Any]) -> tuple[int, str]:
        self.seq += 1
        nonce = secrets.token_hex(16)
        try:
            framing.send(self.cmd_w, dict(msg, seq=self.seq, nonce=nonce))
        except (BrokenPipeError, OSError) as e:
            raise self._death(str(e)) from e
        return self.seq, nonce

    def _exchange(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._reply(*self._send(msg), timeout)

    def _reply(self, seq: int, nonce: str, timeout: float) -> dict[str, Any]:
        try:
            self._await_reply(timeout)
            reply = framing.recv(self.reply_r, 30.0)
        except (framing.ChannelTimeout, framing.ChannelTampered, RunnerDied):
            raise
        except (framing.ChannelClosed, BrokenPipeError, OSError) as e:
            raise self._death(str(e)) from e
        except framing.ChannelError as e:
            raise framing.ChannelTampered(f"malformed reply: {e}") from e
        if reply.get("seq") != seq or reply.get("nonce") != nonce:
            raise framing.ChannelTampered("a reply out of sequence: the result channel was tampered with")
        return reply

    def request(self, msg: dict[str, Any], timeout: float, window: Any = None) -> dict[str, Any]:
        """Sends a command and waits for its reply, then makes one more round trip (a ping):
        a forged message written by the candidate shifts the real reply onto the ping, which
        then fails. With ``window`` (kforge_harness.windows.Window), its ``open()`` comes just
        before the command is sent and its ``close()`` just after the reply is read (the ping
        is outside). Raises framing.ChannelTimeout, framing.ChannelTampered or RunnerDied."""
        self.settle()
        if window is not None:
            window.open()
        reply = self._exchange(msg, timeout)
        if window is not None:
            window.close()
        self._ping()
        return reply

    def _ping(self) -> None:
        pong = self._exchange({"cmd": "ping"}, 30.0)
        if pong.get("pong") is not True:
            raise framing.ChannelTampered("the ping after a reply was not answered in order")

    def post(self, msg: dict[str, Any], timeout: float) -> None:
        """Sends a command without waiting (one at a time): its reply is awaited, within
        ``timeout``, by the next ``request``, and a reply with an error raises RunnerDied there."""
        assert self.posted is None, "one posted command at a time"
        self.posted = (*self._send(msg), timeout)

    def settle(self) -> None:
        """Awaits the posted command's reply, then pings (see ``request``)."""
        if self.posted is None:
            return
        posted, self.posted = self.posted, None
        reply = self._reply(*posted)
        if "error" in reply:
            raise RunnerDied(f"the runner refused a command: {str(reply['error'])[:500]}")
        self._ping()

    def accept(self, listener: socket.socket, timeout: float) -> socket.socket:
        """The runner's connection to ``listener`` (the devshare socket). Raises ChannelTimeout
        when it does not connect in time, RunnerDied when it exits first."""
        deadline = time.monotonic() + timeout
        listener.settimeout(0.25)
        while True:
            try:
                conn, _ = listener.accept()
                conn.settimeout(None)
                return conn
            except TimeoutError:
                pass
            if self.proc.poll() is not None:
                raise self._death("the runner exited")
            if time.monotonic() > deadline:
                raise framing.ChannelTimeout("the runner did not connect its device channel")

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
            framing.send(self.cmd_w, {"cmd": "exit", "seq": self.seq + 1})
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def detach(self) -> None:
        """Lets go of a pooled process without ending it (a task's process returned to its
        pool): closes this side's channel and output ends. The pool owns the process."""
        self._close_ends()
        conn = getattr(self.proc, "conn", None)
        if conn is not None:
            conn.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        self._close_ends()

    def _close_ends(self) -> None:
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
