"""The judge's handle on the task's process (kforge_harness.refrunner): the task is user code,
so the judge never imports it; it asks this process for the reference model's state, each
trial's inputs, the reference outputs, the baselines and the graph.

``Reference.start`` is free of PyTorch (the launch stage calls it before the judge imports
PyTorch, so the task's process starts beside the candidate's runner); ``attach`` then makes the
tensor transport, and every other method needs it. The task's source is copied into a transfer
directory of the reference's own, which is the only place its jail can write; with ``--jail``
the process runs in kforge-jail's run profile (GPU N's device nodes alone, no network, no host
path but the harness and that directory), and without one in a session of its own with no
capabilities, as the candidate's runner does.

A failure of the task's process (an exception in the task's code, a crash, a timeout, a
malformed reply) raises ``TaskFailed``: the task is broken, or a neighbour broke it, never the
candidate.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import socket
from typing import Any, Callable

from kforge_harness import framing, poolclient
from kforge_harness.proc import RunnerDied, RunnerProcess

REFRUNNER = "kforge_harness.refrunner"


class TaskFailed(Exception):
    """The task's process failed or refused a command; the message says why (task's words)."""


def _marks_unfit(method: Callable[..., Any]) -> Callable[..., Any]:
    """A Reference method whose TaskFailed leaves the process unfit to go back to a pool."""

    @functools.wraps(method)
    def run(self: Reference, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except TaskFailed:
            self.healthy = False
            raise

    return run


def _listen(xfer: str) -> tuple[socket.socket, str]:
    """The judge's end of a device channel: a Unix socket of a fresh name in ``xfer``."""
    path = os.path.join(xfer, f"dev-{os.urandom(4).hex()}.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    return listener, path


def read_task(path: str) -> bytes:
    """The task file's bytes (the judge hashes and copies them; it never runs them)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise TaskFailed(f"cannot read task: {e}") from e


class Reference:
    """Owns the task's process, its transfer directory and, on cuda, the device channel's
    listener. ``close()`` frees them all; the owner calls it exactly once."""

    def __init__(
        self, proc: RunnerProcess, xfer: str, listener: socket.socket | None, timeout: float, sha256: str
    ) -> None:
        self.proc = proc
        self.sha256 = sha256  # of the task's source, as the judge read it
        self.xfer = xfer
        self.listener = listener
        self.timeout = timeout
        self.transport: Any = None
        self.transfer = "files"
        self.start = "cold"  # or "pooled": a task's process kept by the runner pool
        self.pooled: poolclient.PooledProc | None = None
        self.healthy = True  # every command answered as it should: fit to go back to its pool

    @classmethod
    def start(cls, task_path: str, opts: Any, device: bool = True) -> Reference:
        """The task's process for an evaluation with ``opts`` (launch.Options): the runner pool's
        idle one for this task when ``opts.pool`` has one, else a new one, started on a copy of
        the task file in a fresh transfer directory (``device=False``: for inspect alone, which
        needs no CUDA context and no device channel). Raises TaskFailed when the file cannot be
        read."""
        from kforge_harness import launch

        data = read_task(task_path)
        sha = hashlib.sha256(data).hexdigest()
        if opts.pool and device:
            taken = poolclient.take_ref(opts.pool, launch.pool_key(opts), sha, os.path.abspath(task_path))
            if taken is not None:
                return cls._adopt(taken[0], taken[1], opts, sha)
        xfer = launch.xfer_dir(opts.jail)
        listener = None
        try:
            # in a folder of its own: framing.clear empties the directory's top level
            os.mkdir(os.path.join(xfer, "task"))
            task_file = os.path.join(xfer, "task", "task.py")
            with open(task_file, "wb") as f:
                f.write(data)
            tail = ["--xfer", xfer, "--task", task_file, "--backend", opts.backend]
            if not device:
                tail.append("--no-device")
            elif opts.backend == "cuda":
                listener, path = _listen(xfer)
                tail += ["--dev-sock", path]
            lifetime = opts.init_timeout + 40 * opts.run_timeout + 40 * opts.timing_policy.budget_s
            env, wrap, mem = launch.runner_env_wrap(opts, xfer, [], lifetime)
            # without a jail on the cpu backend, a fork of this process (PyTorch imported, no
            # secret drawn yet, no CUDA context) starts in a fraction of an interpreter's time
            fork = wrap is None and opts.backend == "cpu"
            if fork:
                import torch  # noqa: F401 - before the fork, so the child need not import it

            proc = RunnerProcess(tail, env, xfer, mem, wrap, module=REFRUNNER, fork=fork)
        except BaseException:
            if listener is not None:
                listener.close()
            shutil.rmtree(xfer, ignore_errors=True)
            raise
        return cls(proc, xfer, listener, opts.init_timeout, sha)

    @classmethod
    def _adopt(cls, xfer: str, pooled: poolclient.PooledProc, opts: Any, sha: str) -> Reference:
        """Takes over the pool's process of this task: its output stays with the pool (which
        sends its tail with the exit status), so the ends handed to RunnerProcess are closed
        pipes; on cuda the judge's device channel is a new socket in its transfer directory,
        which ``attach`` tells it to connect to."""
        ends = []
        for _ in range(2):
            r, w = os.pipe()
            os.close(w)
            ends.append(r)
        proc = RunnerProcess.adopt(xfer, pooled, ends[0], ends[1])
        listener = _listen(xfer)[0] if opts.backend == "cuda" else None
        ref = cls(proc, xfer, listener, opts.init_timeout, sha)
        ref.start, ref.pooled = "pooled", pooled
        return ref

    def attach(self, token: int) -> None:
        """Makes the tensor transport (the caller has imported PyTorch by now) and, on cuda,
        takes the process's device-channel connection and proves it with a probe arena."""
        from kforge_harness.transport import Transport, connect_devshare

        self.transport = Transport(self.xfer)
        if self.listener is None:
            return
        if self.pooled is not None:  # it connects when told where (it has served other judges)
            self.request({"cmd": "attach", "dev_sock": self.listener.getsockname()})
        try:
            conn = self.proc.accept(self.listener, self.timeout)
        except framing.ChannelTimeout:
            self.transfer = "files (the task's process did not connect its device channel)"
            return
        except RunnerDied as e:
            raise TaskFailed(self._died(e)) from e
        self.transfer = connect_devshare(self.transport, conn, token, lambda m: self.request(m, self.timeout))

    def _died(self, e: Exception) -> str:
        log = (self.pooled.log if self.pooled is not None else self.proc.log()).strip()
        last = log.splitlines()[-1] if log else ""
        return f"the task's process ended: {e}" + (f": {last[:300]}" if last else "")

    @_marks_unfit
    def request(
        self, msg: dict[str, Any], timeout: float | None = None, window: Any = None
    ) -> dict[str, Any]:
        """One command; its reply, or TaskFailed with the task's error (the process is then no
        longer fit to be used again). ``window``: see RunnerProcess.request."""
        return self._request(msg, timeout, window)

    def _request(self, msg: dict[str, Any], timeout: float | None, window: Any = None) -> dict[str, Any]:
        try:
            reply = self.proc.request(msg, timeout or self.timeout, window)
        except framing.ChannelTimeout as e:
            raise TaskFailed(f"the task did not answer in time ({msg.get('cmd')})") from e
        except RunnerDied as e:
            raise TaskFailed(self._died(e)) from e
        except framing.ChannelError as e:
            raise TaskFailed(f"the task's process broke the channel: {e}") from e
        finally:
            if self.transport is not None:
                self.transport.release()
        if "error" in reply:
            tb = reply.get("traceback")
            tail = f"\n{str(tb)[-1500:]}" if isinstance(tb, str) and tb else ""
            raise TaskFailed(f"{str(reply['error'])[:2000]}{tail}")
        return reply

    @_marks_unfit
    def decode(
        self, reply: dict[str, Any], keys: list[str], device: Any, max_bytes: int | None = None
    ) -> list[Any]:
        """The tensors of ``reply[key]`` for each key, as private copies on ``device``; a
        malformed value raises TaskFailed. The tensor files are removed either way."""
        try:
            return self.transport.decode_all(reply, [reply.get(k) for k in keys], max_bytes, device)
        except framing.ChannelError as e:
            raise TaskFailed(f"the task's process sent a malformed value: {e}") from e
        finally:
            framing.clear(self.xfer)

    # -- the task's commands ------------------------------------------------------------------
    @_marks_unfit
    def load(self, init_seed: int, device: Any) -> dict[str, Any]:
        """Loads the task and builds its model after manual_seed(init_seed). Returns the task's
        settings (``tolerance``, ``allow_tf32``, ``test_inputs``: how many further shapes) and
        what the candidate's model is built from (``init_args``, ``state`` as tensors on
        ``device``, ``state_names``)."""
        reply = self.request({"cmd": "load", "init_seed": init_seed})
        init_args, state = self.decode(reply, ["init_args", "state"], device)
        tol = reply.get("tolerance")
        if tol is not None and not (
            isinstance(tol, dict) and all(isinstance(tol.get(k), (int, float)) for k in ("atol", "rtol"))
        ):
            raise TaskFailed("TOLERANCE must be a dict with numeric atol and rtol")
        n = reply.get("test_inputs")
        names = reply.get("state_names")
        if not isinstance(n, int) or not 0 <= n <= 64 or not isinstance(names, list):
            raise TaskFailed("the task's process sent a malformed description")
        if not isinstance(init_args, list) or not isinstance(state, list) or len(state) != len(names):
            raise TaskFailed("the task's process sent a malformed model state")
        return {
            "tolerance": {k: float(tol[k]) for k in ("atol", "rtol")} if tol else None,
            "allow_tf32": reply.get("allow_tf32") is True,
            "test_inputs": n,
            "init_args": init_args,
            "state": state,
            "state_names": names,
        }

    @_marks_unfit
    def draw(
        self, slot: str, kind: str, seed: int, device: Any, forward: bool = False, send: bool = True
    ) -> Any:
        """Draws a trial's inputs into ``slot`` of the task's process and returns them (a list,
        on ``device``); with ``forward``, returns ``(inputs, reference outputs)``; with
        ``send=False`` only draws them (for the baselines) and returns None."""
        msg = {"cmd": "draw", "slot": slot, "kind": kind, "seed": seed, "forward": forward, "send": send}
        reply = self.request(msg)
        if not send:
            return None
        keys = ["inputs", "outputs"] if forward else ["inputs"]
        got = self.decode(reply, keys, device)
        if not isinstance(got[0], list):
            raise TaskFailed("get_inputs() must return a list or tuple")
        return (got[0], got[1]) if forward else got[0]

    @_marks_unfit
    def outputs(self, slot: str, device: Any, wide: bool = False, max_bytes: int | None = None) -> Any:
        """The reference's outputs on ``slot`` (in float64 with ``wide``), on ``device``."""
        reply = self.request({"cmd": "forward", "slot": slot, "wide": wide})
        (out,) = self.decode(reply, ["outputs"], device, max_bytes)
        return out

    @_marks_unfit
    def eager(self, slot: str, policy: dict[str, Any], timeout: float) -> dict[str, Any]:
        reply = self.request({"cmd": "eager", "slot": slot, "policy": policy}, timeout)
        t = reply.get("timing")
        if not _timing_ok(t):
            raise TaskFailed("the task's process sent a malformed timing")
        return t

    @_marks_unfit
    def inspect(self) -> dict[str, Any]:
        reply = self.request({"cmd": "inspect"})
        graph = reply.get("graph")
        if not isinstance(graph, dict):
            raise TaskFailed("the task's process sent no graph")
        return graph

    def drop(self, slots: list[str]) -> None:
        self.request({"cmd": "drop", "slots": slots})

    def log(self) -> str:
        return self.proc.log()

    def close(self) -> None:
        """Ends the task's process (its whole process group) and removes its directory; or, for
        the pool's process of a task that answered everything as it should, has it drop all of
        this evaluation (``release``) and gives it back to the pool."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self.pooled is not None and self.healthy:
            try:
                self._request({"cmd": "release"}, 30.0)
                returned = self.pooled.give_back()
            except TaskFailed:
                returned = False
            if self.transport is not None:
                self.transport.release()
                if self.transport.sock is not None:
                    self.transport.sock.close()
            if returned:
                framing.clear(self.xfer)
                self.proc.detach()
                return
        self.proc.close()
        if self.transport is not None and self.transport.sock is not None:
            self.transport.sock.close()
        if self.pooled is None:
            shutil.rmtree(self.xfer, ignore_errors=True)


def open_task(task_path: str, opts: Any, token: int) -> Reference:
    """A started and attached Reference for a command that has no candidate (check-task,
    baseline, inspect, profile-reference): the caller has imported PyTorch. Raises TaskFailed;
    the caller closes the Reference."""
    ref = Reference.start(task_path, opts)
    try:
        ref.attach(token)
    except BaseException:
        ref.close()
        raise
    return ref


def inspect(task_path: str, opts: Any) -> dict[str, Any]:
    """The task's graph for policies (kforge_harness.inspect_graph), made in its own process;
    raises TaskFailed. Needs no PyTorch in the caller."""
    ref = Reference.start(task_path, opts, device=False)
    try:
        return ref.inspect()
    finally:
        ref.close()


def _timing_ok(t: Any) -> bool:
    """A timing summary as timing.measure makes it: a positive median and trial count."""
    if not isinstance(t, dict):
        return False
    med, trials = t.get("median_ms"), t.get("trials")
    return (
        isinstance(med, (int, float))
        and med > 0
        and med == med
        and isinstance(trials, int)
        and trials > 0
        and all(isinstance(t.get(k), (int, float)) for k in ("p25_ms", "p75_ms", "spread"))
    )
