"""``kforge_harness pool``: keeps warm runners for the evaluations of one kind (backend, jail, GPU,
memory limit), so that an evaluation need not wait for a runner's start (Python, PyTorch's
import, torch._dynamo's, the CUDA context: seven to ten seconds on the H200 host), and keeps the
task's processes (kforge_harness.refrunner) of the last tasks evaluated, for the next
evaluation of the same task (an episode evaluates one task a dozen times).

A runner waits in standby (``runner --standby``): started like any other, in its jail, with
nothing of any candidate's; it is handed to one evaluation only, which copies its candidate into
the runner's transfer directory and tells it where (kforge_harness.launch). The pool stays the
runner's parent: it reports the runner's exit to the judge, and kills it when the judge's
connection closes first. Protocol: kforge_harness.poolclient. Owned by whoever started it (the
worker starts one per job slot); SIGTERM, SIGINT or its parent's death stop it and every runner
it started.

A task's process (``TaskProc``) is kept by the task's SHA-256: a judge that asks for one the pool
does not have is told so and starts its own, and the pool starts one for that task in the
background (its source read from the judge's path, checked against the hash). A judge that is
done sends ``return``: the process (told by the judge to drop everything of the evaluation)
goes back to the pool, **stopped** (SIGSTOP on every process of its tree, its jail's supervisor
aside) until the next judge of that task takes it, so no task code runs between evaluations,
when another evaluation may hold the GPU. A judge that closes without returning it (an error,
a timeout, a malformed reply) has it killed. At most ``refs`` are kept; the least recently used
go first, and none is handed out past half its jail's lifetime. On the cpu backend only: a
process holding a CUDA context did not survive being stopped and resumed (its next CUDA call
failed with cudaErrorOperatingSystem on an H100), so on cuda every evaluation starts its own.
"""

from __future__ import annotations

import hashlib
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
from typing import Callable

from kforge_harness import launch as launchmod
from kforge_harness.poolclient import MAX_LINE
from kforge_harness.proc import PR_SET_PDEATHSIG, Drain, prctl, spawn_runner

# The largest task source the pool copies for a task's process.
MAX_TASK_BYTES = 4 << 20

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


@dataclass
class TaskProc:
    """A task's process the pool owns: its jail (or the process itself), transfer directory and
    output drains. ``handed``: a judge has it; ``frozen``: stopped between evaluations."""

    proc: subprocess.Popen[bytes]
    xfer: str
    sha: str
    out: Drain
    err: Drain
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    handed: bool = False
    frozen: bool = False
    uses: int = 0

    def log(self) -> str:
        out, err = self.out.text(), self.err.text()
        return (out + ("\n" if out and err else "") + err)[-2000:]

    def discard(self) -> None:
        _kill_group(self.proc)
        shutil.rmtree(self.xfer, ignore_errors=True)


def tree(pid: int, jailed: bool) -> list[int]:
    """The processes to stop of a task's process started as ``pid``: the jail's tree below its
    supervisor (which keeps its clocks), or the process and its descendants without a jail."""
    out: list[int] = [] if jailed else [pid]
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def freeze(pid: int, jailed: bool) -> bool:
    """Stops every process of the tree (SIGSTOP, which no process can catch), again until a pass
    finds none that is not stopped: a process forked while the last pass ran is stopped by the
    next. Returns whether the whole tree stopped."""
    for _ in range(20):
        pids = tree(pid, jailed)
        running = [p for p in pids if _state(p) not in ("T", "t", "Z", "X")]
        if not running:
            return True
        for p in running:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        time.sleep(0.005)
    return False


def thaw(pid: int, jailed: bool) -> None:
    for p in tree(pid, jailed):
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass


def _follow(
    conn: socket.socket, proc: subprocess.Popen[bytes], log: Callable[[], str] | None = None
) -> bytes | None:
    """Follows a handed process and its judge's connection until one ends: when the process
    ends first, tells the judge its exit status (and its output's tail, ``log``) and returns
    None; when the judge closes first, returns all it sent. Closes ``conn``."""
    conn.settimeout(None)
    said = b""
    while True:
        code = proc.poll()
        if code is not None:
            msg: dict[str, object] = {"exit": code}
            if log is not None:
                msg["log"] = log()
            try:
                conn.sendall(json.dumps(msg).encode() + b"\n")
            except OSError:
                pass
            conn.close()
            return None
        ready, _, _ = select.select([conn], [], [], 0.25)
        if ready:
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            if not data:
                conn.close()
                return said
            said = (said + data)[-4096:]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


class Pool:
    """``size`` runners in standby for evaluations whose options match ``opts``."""

    def __init__(
        self, sock_path: str, opts: launchmod.Options, size: int, max_age_s: float, refs: int = 2
    ) -> None:
        self.sock_path = sock_path
        # task's processes are kept on the cpu backend only: stopping a process that holds a
        # CUDA context and resuming it made its next CUDA call fail (cudaErrorOperatingSystem,
        # on an H100), and one left running could use the GPU while another evaluation is timed
        self.refs = refs if opts.backend == "cpu" else 0
        self.tasks: list[TaskProc] = []
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

    def _ref_lifetime(self) -> float:
        o = self.opts
        return self.max_age_s + o.init_timeout + 40 * o.run_timeout + 40 * o.timing_policy.budget_s

    def _spawn_task(self, sha: str, path: str) -> None:
        """Starts a task's process for the task at ``path`` when its bytes hash to ``sha``."""
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_TASK_BYTES + 1)
        except OSError:
            return
        if len(data) > MAX_TASK_BYTES or hashlib.sha256(data).hexdigest() != sha:
            return
        o = self.opts
        xfer = launchmod.xfer_dir(o.jail)
        try:
            os.mkdir(os.path.join(xfer, "task"))
            task_file = os.path.join(xfer, "task", "task.py")
            with open(task_file, "wb") as f:
                f.write(data)
            env, wrap, mem = launchmod.runner_env_wrap(o, xfer, [], self._ref_lifetime())
            tail = ["--xfer", xfer, "--task", task_file, "--backend", o.backend, "--pooled"]
            proc, out_r, err_r = spawn_runner(tail, env, xfer, mem, wrap, module="kforge_harness.refrunner")
        except OSError:
            shutil.rmtree(xfer, ignore_errors=True)
            return
        out, err = Drain(out_r, 8192), Drain(err_r, 8192)
        out.start()
        err.start()
        with self.lock:
            self.tasks.append(TaskProc(proc, xfer, sha, out, err))

    def _tend_tasks(self) -> None:
        """Drops dead and old task processes, and the least recently used past ``refs``."""
        now = time.monotonic()
        with self.lock:
            idle = [t for t in self.tasks if not t.handed]
            drop = [t for t in idle if t.proc.poll() is not None or now - t.started > self.max_age_s / 2]
            keep = sorted((t for t in idle if t not in drop), key=lambda t: t.last_used)
            drop += keep[: max(0, len(keep) - self.refs)]
            for t in drop:
                self.tasks.remove(t)
        for t in drop:
            t.discard()

    def _handle_task(self, conn: socket.socket, request: dict[str, object]) -> None:
        """``take_ref``: the task's process for ``sha``, when the pool has an idle one."""
        sha, path = request.get("sha"), request.get("task")
        if request.get("take_ref") != self.key or not isinstance(sha, str) or not isinstance(path, str):
            self._refuse(conn, "no task process of that kind")
            return
        with self.lock:
            mine = [t for t in self.tasks if t.sha == sha]
            ready = [t for t in mine if not t.handed and t.proc.poll() is None]
            t = ready[0] if ready else None
            if t is not None:
                t.handed = True
        if t is None:
            self._refuse(conn, "no task process for that task yet")
            if not mine and self.refs > 0:
                self._spawn_task(sha, path)  # for the next evaluation of this task
            return
        if t.frozen:
            thaw(t.proc.pid, bool(self.opts.jail))
            t.frozen = False
        t.uses += 1
        try:
            conn.sendall(json.dumps({"xfer": t.xfer, "pid": t.proc.pid, "uses": t.uses}).encode() + b"\n")
        except OSError:
            conn.close()
            with self.lock:
                self.tasks.remove(t)
            t.discard()
            return
        threading.Thread(target=self._watch_task, args=(conn, t), daemon=True).start()

    def _refuse(self, conn: socket.socket, why: str) -> None:
        try:
            conn.sendall(json.dumps({"none": why}).encode() + b"\n")
        except OSError:
            pass
        conn.close()

    def _watch_task(self, conn: socket.socket, t: TaskProc) -> None:
        """Tells the judge when the task's process ends (with its output's tail); takes it back,
        stopped, when the judge returns it; kills it when the judge goes without."""
        said = _follow(conn, t.proc, t.log)
        returned = said is not None and b'"return"' in said
        if returned and t.proc.poll() is None and freeze(t.proc.pid, bool(self.opts.jail)):
            with self.lock:
                t.frozen, t.handed, t.last_used = True, False, time.monotonic()
            return
        with self.lock:
            if t in self.tasks:
                self.tasks.remove(t)
        t.discard()

    def _tend(self) -> None:
        """Drops dead and old runners and starts new ones up to ``size``."""
        self._tend_tasks()
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
        if isinstance(request, dict) and "take_ref" in request:
            self._handle_task(conn, request)
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
        if _follow(conn, proc) is not None:
            _kill_group(proc)
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
                tasks, self.tasks = list(self.tasks), []
            for proc in handed:
                _kill_group(proc)
            for t in tasks:
                if t.frozen:
                    thaw(t.proc.pid, bool(self.opts.jail))  # a stopped process dies of SIGKILL all the same
                t.discard()


def run_pool(sock_path: str, opts: launchmod.Options, size: int, max_age_s: float, refs: int = 2) -> None:
    Pool(sock_path, opts, size, max_age_s, refs).serve()
