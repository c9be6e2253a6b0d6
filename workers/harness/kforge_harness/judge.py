"""The judge: evaluates a candidate against a task and reaches a verdict.

Owns the secret seed, the comparison and the verdict. It runs no user code: the candidate runs
in its runner (``proc.RunnerProcess``), the task in a process of its own
(``reference.Reference``), and the judge compares its own copies of what the two send.
"""

from __future__ import annotations

import itertools
import secrets
import shutil
import time
from typing import Any

import torch

from kforge_harness import REWARD_VERSION, baseline, compare, inputs, jailwrap, windows, wire
from kforge_harness.envinfo import env_info
from kforge_harness.launch import Launch, Options, prepare, progress
from kforge_harness.proc import RunnerDied, end_orphans
from kforge_harness.reference import Reference, TaskFailed
from kforge_harness.reward import reward
from kforge_harness.transport import Transport, connect_devshare

__all__ = ["Options", "evaluate", "evaluate_launched"]


# Flags that make a verdict ``rejected`` (a hack or an irregular candidate). Others inform.
REJECTING = {
    "torch_compute",
    "torch_compile",
    "torch_internals",
    "torch_extension",
    "kernel_not_launched",
    "inherits_reference",
    "imports_reference",
    "mutates_input",
    "aliases_input",
    "tensor_subclass",
    "wrong_device",
    "background_work",
    "escaped_timer",
    "side_stream",
    "harness_tamper",
    "guard_tamper",
    "timing_forged",
    "timed_output_mismatch",
    "channel_tamper",
    "foreign_compute",
    "introspection",
    "native_escape",
    "process_escape",
    "background_thread",
    "network",
    "harness_access",
    "environment_access",
    "torch_in_native",
    "dynamic_loading",
    "native_process",
    "forbidden_library",
    "shape_specialized",
}


class Verdict:
    """Accumulates the result object; ``finish`` fills the reward."""

    def __init__(self, backend: str) -> None:
        self.r: dict[str, Any] = {
            "status": None,
            "reward": -1,
            "reward_version": REWARD_VERSION,
            "correct": False,
            "flags": [],
            "flag_details": [],
            "speedup_vs_eager": None,
            "speedup_vs_compile": None,
            "timing": None,
            "checks": [],
            "build": None,
            "env": env_info(backend),
            "message": "",
        }

    def flag(self, *names: str) -> None:
        for n in names:
            if n not in self.r["flags"]:
                self.r["flags"].append(n)

    def finish(self, status: str, message: str = "") -> dict[str, Any]:
        if status == "ok" and any(f in REJECTING for f in self.r["flags"]):
            status = "rejected"
        # a refused operator can end the run as an error (one that stops the timed calls)
        if status in ("incorrect", "runtime_error") and any(f in REJECTING for f in self.r["flags"]):
            status = "rejected"
        self.r["status"] = status
        if message:
            self.r["message"] = message
        self.r["correct"] = status == "ok" and self.r.get("phase", "full") != "build"
        self.r["reward"] = reward(status, self.r["speedup_vs_eager"], self.r["speedup_vs_compile"])
        if status == "ok" and self.r.get("phase", "full") != "full":
            self.r["reward"] = None  # not timed: no reward yet
        return self.r


def device_for(backend: str) -> torch.device:
    if backend == "cuda":
        if not torch.cuda.is_available():
            raise TaskFailed("backend cuda requested but no CUDA device is visible")
        return torch.device("cuda")
    return torch.device("cpu")


class Evaluation:
    """One evaluate run, after its first stage (kforge_harness.launch): owns the transfer
    directory, the runner and the GPU lock from there on; ``close()`` frees them."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.opts = launch.opts
        self.t0 = launch.t0
        self.v = Verdict(launch.opts.backend)
        # false only under --no-jail (a development switch): the code ran as the judge's user
        self.v.r["env"]["jailed"] = bool(launch.opts.jail)
        # each output's slack from a near miss's float64 reference (compare.conditioned), which
        # the timed outputs' check keeps
        self._slack: list[float] = []
        self.ref: Reference | None = launch.ref  # the task's process
        self.tolerance: dict[str, float] | None = None
        # where the wall time goes: seconds from the judge's start to the end of each phase
        # ("started_s": the process's age then, its imports)
        self.v.r["phases"] = {"started_s": launch.started_s, **launch.marks}
        self.xfer = launch.xfer
        self.runner = launch.runner
        self.transport = Transport(self.xfer)
        self.dev_listener = launch.dev_listener
        self.lock = launch.lock
        if launch.runner is not None:
            self.v.r["runner_start"] = launch.runner_start  # "cold", or "pooled": started ahead
        self.secret = self.opts.seed if self.opts.seed is not None else secrets.randbits(62)
        self.flush: windows.Flush | None = None  # the judge's cache flush (timing)
        self.runner_path_ms = 0.0  # windows.path_overhead of the runner, before its candidate
        self.layouts: Any = None  # windows.prepare's (template, inputs' and outputs' layouts)

    def close(self) -> None:
        self._close_runner()
        if self.ref is not None:
            self.ref.close()
            self.ref = None
        end_orphans(set())  # and whatever the task's process left
        if self.lock is not None:
            self.lock.release()
        shutil.rmtree(self.xfer, ignore_errors=True)

    def _close_runner(self) -> None:
        """Ends the candidate's runner and everything it started (before the baselines are
        timed: no process of the candidate's exists then)."""
        self.transport.release()
        for s in (self.transport.sock, self.dev_listener):
            if s is not None:
                s.close()
        self.dev_listener = None
        if self.runner is not None:
            self.runner.close()
            self.v.r["runner_log"] = self.runner.log()
            self.runner = None
            # whatever the runner started and left running (outside a jail, a child that left
            # its session) is the judge's child now (launch.prepare made it the subreaper)
            keep = {self.ref.proc.proc.pid} if self.ref is not None else set()
            left = end_orphans(keep)
            if left:
                self.v.flag("process_escape")
                self.v.r["flag_details"].append(
                    f"{len(left)} process(es) of the candidate outlived its runner"
                )
        self.transport.sock = None

    def mark(self, phase: str) -> None:
        self.v.r["phases"][phase] = round(time.monotonic() - self.t0, 3)

    def _seed(self, label: str) -> int:
        import hashlib

        h = hashlib.sha256(f"{self.secret}:{label}".encode()).digest()
        return int.from_bytes(h[:8], "little") >> 2

    def _request(
        self, msg: dict[str, Any], timeout: float | None = None, window: Any = None
    ) -> dict[str, Any]:
        assert self.runner is not None
        try:
            reply = self.runner.request(msg, timeout or self.opts.init_timeout, window)
        finally:
            self.transport.release()  # the runner copied what it was sent (or is gone)
        for f in reply.get("flags", []) or []:
            if isinstance(f, str) and len(f) < 64:
                self.v.flag(f)
        if reply.get("tampered"):
            self.v.r["flag_details"].append(f"changed by the candidate: {str(reply['tampered'])[:500]}")
        details = reply.get("details")
        for d in details[:8] if isinstance(details, list) else []:
            if str(d)[:300] not in self.v.r["flag_details"]:
                self.v.r["flag_details"].append(str(d)[:300])
        return reply

    def _progress(self, phase: str) -> None:
        progress(self.opts, phase)

    def run(self) -> dict[str, Any]:
        o, launch = self.opts, self.launch
        if launch.cand is not None:
            self.v.r["format"] = launch.cand.format
        self.v.flag(*launch.flags)
        self.v.r["flag_details"] += launch.details
        if launch.build is not None:
            self.v.r["build"] = launch.build
        if launch.status is not None:
            return self.v.finish(launch.status, launch.message)
        if o.phase != "full":
            self.v.r["phase"] = o.phase
        if o.phase == "build":
            if any(f in REJECTING for f in self.v.r["flags"]):
                return self.v.finish("rejected", "a hack or irregularity was detected")
            return self.v.finish("ok", "built (not run: phase build)")
        if launch.lock_wait_s is not None:
            self.v.r["gpu_lock_wait_s"] = launch.lock_wait_s
        # the runner is starting (Python, PyTorch, the CUDA context) while the task's process
        # loads the task and builds the reference
        if launch.task_error is not None or self.ref is None:
            return self.v.finish("infra_error", f"task: {launch.task_error or 'no task process'}")
        init_seed = self._seed("init")
        try:
            device = device_for(o.backend)
            self.ref.attach(self.secret)
            meta = self.ref.load(init_seed, device)
        except TaskFailed as e:
            return self.v.finish("infra_error", f"task: {e}")
        self.tolerance = meta["tolerance"]
        self.v.r["reference"] = {"transfer": self.ref.transfer, "start": self.ref.start}
        try:
            return self._judge(meta, device, init_seed)
        except TaskFailed as e:  # the task's process failed under a check: not the candidate's doing
            return self.v.finish("infra_error", f"task: {e}")
        except wire.ChannelTimeout:
            return self.v.finish("timeout", "the candidate did not answer within its time limit")
        except RunnerDied as e:
            log = self.runner.log() if self.runner else ""
            if (
                o.jail
                and self.runner
                and self.runner.proc.returncode == jailwrap.JAIL_SETUP_FAILED
                and "kforge-jail:" in log
            ):
                return self.v.finish("infra_error", f"jail: {log.strip().splitlines()[-1]}")
            over = jailwrap.disk_limit(log) if o.jail else None
            if over:  # the candidate's own writes passed the quota: its failure, said as such
                return self.v.finish("runtime_error", f"{over} (the candidate's disk quota): {e}")
            return self.v.finish("runtime_error", str(e))
        except wire.ChannelError as e:
            self.v.flag("channel_tamper")
            return self.v.finish("rejected", str(e))
        except windows.Infra as e:
            return self.v.finish("infra_error", str(e))

    def _connect_devshare(self, timeout: float) -> None:
        """Takes the runner's device-channel connection and proves it with a probe arena; on any
        failure the evaluation goes on with files (``transport.sock`` stays None)."""
        assert self.runner is not None and self.dev_listener is not None
        try:
            conn = self.runner.accept(self.dev_listener, timeout)
        except wire.ChannelTimeout:
            self.v.r["transfer"] = "files (the runner did not connect its device channel)"
            return
        self.v.r["transfer"] = connect_devshare(
            self.transport, conn, self.secret, lambda m: self._request(m, timeout)
        )

    def _judge(self, meta: dict[str, Any], device: torch.device, init_seed: int) -> dict[str, Any]:
        o = self.opts
        t0 = time.monotonic()
        if self.dev_listener is not None:
            self._connect_devshare(o.init_timeout)
        if o.phase == "full":
            # the inputs' layout, then the runner's own path (its GPU turn, its messages), before
            # anything of the candidate's is imported into it: what its timed calls' windows
            # are reduced by
            assert self.ref is not None
            self.layouts = windows.prepare(self.ref, self._seed("prepare"), o.init_timeout)
            self.flush = windows.Flush(device, self.layouts[1].size if device.type == "cuda" else 0)
            self.runner_path_ms = windows.path_overhead(self._request, self.flush, o.init_timeout)
        counter = [0]
        arenas: list[dict[str, int]] = []
        msg = {
            "cmd": "init",
            "seed": init_seed,
            "allow_tf32": meta["allow_tf32"],
            "init_args": self.transport.encode("init_", meta.pop("init_args"), counter, arenas),
            "state": self.transport.encode("state_", meta.pop("state"), counter, arenas),
            "state_names": meta["state_names"],
            "arenas": arenas,
        }
        reply = self._request(msg, o.init_timeout)
        wire.clear(self.xfer)
        self.v.r["build"]["init_seconds"] = round(time.monotonic() - t0, 3)
        if reply.get("guard") in ("native", "python"):  # the runner's word (informative)
            self.v.r["env"]["guard"] = reply["guard"]
            if reply.get("guard_note"):
                self.v.r["env"]["guard_note"] = str(reply["guard_note"])[:200]
        self.mark("runner_ready")
        if "error" in reply:
            return self.v.finish(
                "runtime_error", f"ModelNew could not be built: {reply['error']}" + _tb(reply)
            )

        self._progress("verifying")
        kinds = inputs.BASE_KINDS + [f"shape:{i}" for i in range(meta["test_inputs"])]
        if not self._correctness(kinds, device):
            if any(f in REJECTING for f in self.v.r["flags"]):
                return self.v.finish("rejected", "a hack or irregularity was detected")
            failing = [c for c in self.v.r["checks"] if c.get("error")]
            if failing:
                return self.v.finish("runtime_error", failing[0]["error"])
            return self.v.finish("incorrect", "outputs differ from the reference")
        if any(f in REJECTING for f in self.v.r["flags"]):
            return self.v.finish("rejected", "a hack or irregularity was detected")
        self.v.r["correct"] = True
        self.mark("verified")
        if o.phase == "verify":
            return self.v.finish("ok", "correct on every trial (not timed: phase verify)")
        self._progress("timing")
        err = self._timing(device)
        if err:
            return self.v.finish("runtime_error", err)
        return self.v.finish("ok")

    # -- correctness --------------------------------------------------------------------
    def _correctness(self, kinds: list[str], device: torch.device) -> bool:
        """Runs every trial: the task's process draws its inputs (slot ``check``, one trial's
        at a time) and the reference's outputs on them, and the candidate's runner gets a copy
        of the inputs."""
        o = self.opts
        assert self.ref is not None
        all_pass = True
        main_pass = None
        for kind in kinds:
            args, ref = self.ref.draw("check", kind, self._seed(f"check:{kind}"), device, forward=True)
            check: dict[str, Any] = {"kind": kind}
            counter = [0]
            arenas: list[dict[str, int]] = []
            msg = {
                "cmd": "run",
                "inputs": self.transport.encode(f"in_{kind}_", args, counter, arenas),
                "reuse": kind == "same_buffers",
                "arenas": arenas,
            }
            del args
            t0 = time.monotonic()
            reply = self._request(msg, o.run_timeout)
            check["seconds"] = round(time.monotonic() - t0, 3)
            if "error" in reply:
                wire.clear(self.xfer)
                check.update({"pass": False, "error": reply["error"] + _tb(reply)})
                self.v.r["checks"].append(check)
                return False
            limit = 2 * inputs.nbytes(ref) + (1 << 20)
            if kind not in ("task", "same_buffers") and not inputs.all_finite(ref):
                try:  # the outputs' arenas are taken off the channel unread, or the next are not
                    self.transport.discard(reply, max_bytes=limit)
                except wire.ChannelError as e:
                    check.update({"pass": False, "reason": f"unreadable outputs: {e}"})
                    self.v.r["checks"].append(check)
                    return False
                finally:
                    wire.clear(self.xfer)
                check.update({"pass": None, "skipped": "reference is not finite on these inputs"})
                self.v.r["checks"].append(check)
                continue
            try:
                (out,) = self.transport.decode_all(
                    reply, [reply.get("outputs")], max_bytes=limit, device=device
                )
            except wire.ChannelError as e:
                check.update({"pass": False, "reason": f"unreadable outputs: {e}"})
                self.v.r["checks"].append(check)
                return False
            finally:
                wire.clear(self.xfer)
            check.update(compare.compare(out, ref, self.tolerance, o.strict))
            if check.get("near_miss"):
                self._within_reference_error(check, out, ref, device)
            del out, ref
            if check.get("near_miss"):
                self.v.flag("precision_loss")
            self.v.r["checks"].append(check)
            if kind == "task":
                main_pass = check["pass"]
            if not check["pass"]:
                all_pass = False
                if kind.startswith("shape:") and main_pass:
                    self.v.flag("shape_specialized")
        return all_pass

    def _within_reference_error(
        self, check: dict[str, Any], out: Any, ref: Any, device: torch.device
    ) -> None:
        """A near miss of float32 outputs checked again against the reference computed in
        float64 on the same inputs (compare.conditioned): it passes when it is as close as the
        float32 reference's own rounding error allows. A reference that does not run in float64
        (one that makes a float32 tensor inside forward) leaves the check failed."""
        assert self.ref is not None
        floats = [
            r for r in compare.flatten(ref) if isinstance(r, torch.Tensor) and r.dtype.is_floating_point
        ]
        if not floats or any(r.dtype != torch.float32 for r in floats):
            return
        try:
            ref64 = self.ref.outputs("check", device, wide=True, max_bytes=4 * inputs.nbytes(ref) + (1 << 20))
        except TaskFailed as e:  # any failure of the task's own code keeps the miss
            check["float64_reference"] = {"error": str(e)[:300]}
            return
        try:
            rec = compare.conditioned(out, ref, ref64, self.tolerance, self.opts.strict)
        except (TypeError, ValueError, RuntimeError) as e:  # a float64 reference of another structure
            check["float64_reference"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            return
        del ref64
        check["float64_reference"] = rec
        if rec["pass"]:
            check.update({"pass": True, "near_miss": False, "within_reference_error": True})
            check.pop("reason", None)
            self._slack = [
                max(a, b) for a, b in itertools.zip_longest(self._slack, rec["slack"], fillvalue=0.0)
            ]

    # -- timing -------------------------------------------------------------------------
    def _timing(self, device: torch.device) -> str | None:
        """Times the candidate by the judge's windows (kforge_harness.windows: inputs drawn for
        each call, every call's outputs verified), then, with the candidate's runner gone, the
        baselines unless cached; returns an error or None."""
        o = self.opts
        assert self.ref is not None
        pol = o.timing_policy
        t0 = time.monotonic()
        assert self.layouts is not None
        tpl, in_l, out_l = self.layouts
        task = windows.Side("task", self.ref.request, self.ref.transport, in_l, out_l, tpl, device)
        try:
            cand = windows.Side("cand", self._request, self.transport, in_l, out_l, tpl, device)
        except windows.CallFailed as e:
            task.close()
            return f"timing failed: {e}"
        except BaseException:
            task.close()
            raise
        try:
            flush = self.flush
            assert flush is not None
            self.ref.request({"cmd": "wdraw", "seed": self._seed("null"), "ref": False})
            # the copy of the outputs into their buffer costs every subject the same; the path
            # to the subject is the runner's own (measured before its candidate was imported)
            task_path = windows.path_overhead(self.ref.request, flush, o.init_timeout)
            put = max(0.0, windows.null_overhead(self.ref, task, flush, o.init_timeout) - task_path)
            ovh = self.runner_path_ms + put
            k = [0]
            unverified = [0]

            def one(warm: bool) -> tuple[float, dict[str, Any]]:
                assert self.ref is not None
                # the warm-up's calls count for nothing: not verified (every timed call is)
                drawn = self.ref.request(
                    {"cmd": "wdraw", "seed": self._seed(f"call:{k[0]}"), "ref": not warm}
                )
                k[0] += 1
                flush(lambda: cand.inp.copy_from(task.inp, in_l.size))
                w = windows.Window(cand.out.probe)
                reply = self._request({"cmd": "wcall"}, o.run_timeout, window=w)
                if "error" in reply:
                    raise windows.CallFailed(str(reply["error"]) + _tb(reply))
                if not warm and drawn.get("finite") is True:
                    windows.check(
                        cand.outputs(device), task.outputs(device), self.tolerance, o.strict, self._slack
                    )
                elif not warm:  # a reference that is not finite on these inputs checks nothing
                    unverified[0] += 1
                self._request({"cmd": "wdone"}, o.run_timeout)  # and the runner's integrity check
                return w.ms, reply.get("own") or {}

            cand_t = windows.loop(one, pol, ovh)
        except windows.CallFailed as e:
            return f"timing failed: {e}"
        except windows.Mismatch as e:
            self.v.flag("timed_output_mismatch")
            self.v.r["flag_details"].append(f"a timed call's outputs: {str(e)[:300]}")
            return None
        finally:
            # the judge's side of the buffers; the runner is closed next, and the task's
            # process drops its mappings at its next phase or its release
            cand.close()
            task.close()
        wall = time.monotonic() - t0
        self.mark("timed")
        self.v.r["phases"]["timing_loop"] = {k: cand_t.get(k) for k in ("warmup_s", "loop_s")}
        cand_t["verified_calls"] = cand_t["trials"] - unverified[0]
        med = cand_t["median_ms"]
        if cand_t["own_over_window"]:
            self.v.flag("timing_forged")
        own, host, tail = (
            cand_t.get("own_median_ms"),
            cand_t.get("host_median_ms"),
            cand_t.get("tail_median_ms"),
        )
        if (
            device.type == "cuda"
            and isinstance(own, float)
            and isinstance(host, float)
            and host > 1.5 * own + 0.05
        ):
            self.v.flag("escaped_timer")
        # the device still busy after the timed stream's closing event: work on another stream
        # (an honest call leaves only a synchronisation's few microseconds)
        elif (
            device.type == "cuda"
            and isinstance(own, float)
            and isinstance(tail, float)
            and tail > 0.05 + 0.1 * own
        ):
            self.v.flag("escaped_timer")
        self.mark("timed_checked")
        # no process of the candidate's is left while the baselines are timed
        self._close_runner()

        env = self.v.r["env"]
        path = baseline.cache_path(self.ref.sha256, env)
        base = baseline.load_cached(path) if o.use_baseline_cache else None
        if base is not None and o.with_compile and base.get("compile_error") == "not requested":
            base = None
        cached = base is not None
        if base is None:
            base = windows.baselines(
                self.ref, device, pol, o.with_compile, lambda i: self._seed(f"base:{i}"), o.init_timeout
            )
            if o.use_baseline_cache:
                baseline.store(path, base)
        self.mark("baselines")
        eager = base["eager"]["median_ms"]
        comp = base["compile"]["median_ms"] if base.get("compile") else None
        self.v.r["timing"] = {
            "candidate": _timing_view(cand_t),
            "eager": _timing_view(base["eager"]),
            "compile": _timing_view(base["compile"]) if base.get("compile") else None,
            "compile_error": base.get("compile_error"),
            "baseline_cached": cached,
            "method": cand_t.get("method"),
            "device": env.get("gpu") if device.type == "cuda" else env.get("cpu"),
            "wall_seconds": round(wall, 3),
            "verified_calls": cand_t["verified_calls"],
            "overheads_ms": {
                "runner_path": round(self.runner_path_ms, 4),
                "task_path": round(task_path, 4),
                "output_copy": round(put, 4),
            },
        }
        self.v.r["speedup_vs_eager"] = eager / med
        self.v.r["speedup_vs_compile"] = comp / med if comp else None
        return None


def _dtype(name: str) -> torch.dtype:
    """A dtype by the name the task's process gave (float32 when it names none PyTorch has)."""
    dt = getattr(torch, name, None) if name.isidentifier() else None
    return dt if isinstance(dt, torch.dtype) else torch.float32


def _timing_view(t: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "median_ms",
        "p25_ms",
        "p75_ms",
        "min_ms",
        "max_ms",
        "spread",
        "trials",
        "host_median_ms",
        "tail_median_ms",
        "own_median_ms",
        "window_median_ms",
        "overhead_ms",
        "put_median_ms",
        "handler_median_ms",
        "switch_median_ms",
    )
    return {k: t.get(k) for k in keys}


def _tb(reply: dict[str, Any]) -> str:
    tb = reply.get("traceback")
    return f"\n{tb[-1500:]}" if isinstance(tb, str) and tb else ""


def evaluate(task_path: str, cand_path: str, opts: Options) -> dict[str, Any]:
    return evaluate_launched(prepare(task_path, cand_path, opts))


def evaluate_launched(launch: Launch) -> dict[str, Any]:
    """The evaluation whose first stage ``launch`` is (kforge_harness.launch.prepare)."""
    ev = Evaluation(launch)
    try:
        verdict = ev.run()
        held = ev.lock.held_s() if ev.lock is not None else None
        if held is not None:
            verdict["gpu_lock_held_s"] = round(held, 3)  # this job's time alone on the GPU
        return verdict
    finally:
        ev.close()
        ev.mark("closed")
