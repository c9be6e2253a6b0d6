"""The judge: evaluates a candidate against a task and reaches a verdict.

Owns the secret seed, the comparison and the verdict. It runs no user code: the candidate runs
in its runner (``proc.RunnerProcess``), the task in a process of its own
(``reference.Reference``), and the judge compares its own copies of what the two send.
"""

from __future__ import annotations

import itertools
import random
import secrets
import shutil
import time
from typing import Any

import torch

from kforge_harness import REWARD_VERSION, baseline, compare, inputs, jailwrap, timing, wire
from kforge_harness.envinfo import env_info
from kforge_harness.launch import Launch, Options, prepare, progress
from kforge_harness.proc import RunnerDied, end_orphans
from kforge_harness.reference import Reference, TaskFailed
from kforge_harness.reward import reward
from kforge_harness.transport import Transport, connect_devshare

__all__ = ["Options", "evaluate", "evaluate_launched"]

# Timed calls whose outputs are verified after timing, chosen at random, plus the last.
VERIFIED_REPS = 8

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


# The timed calls' inputs are rescaled (so a candidate that keys a cache on its input buffers
# returns stale outputs, which their fingerprints catch) by a factor drawn from the first of
# these ranges that keeps the reference finite (RefRunner.scale_range); the narrowest still
# moves the outputs of most tasks by ten times the float32 tolerance.
SCALE_RANGES = ((0.5, 2.0), (0.9, 1.1), (0.99, 1.01), (0.999, 1.001))


class Evaluation:
    """One evaluate run, after its first stage (kforge_harness.launch): owns the transfer
    directory, the runner and the GPU lock from there on; ``close()`` frees them."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.opts = launch.opts
        self.t0 = launch.t0
        self.v = Verdict(launch.opts.backend)
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

    def _request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.runner is not None
        try:
            reply = self.runner.request(msg, timeout)
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
        """Times the candidate, then (with the candidate's runner gone) the baselines unless
        cached; returns an error or None."""
        o = self.opts
        assert self.ref is not None
        pol = o.timing_policy
        counter = [0]
        arenas: list[dict[str, int]] = []
        first = self.ref.draw("time:0", "task", self._seed("time:0"), device)
        # Inputs change on every timed call anyway (rescaled in place), so large inputs, which
        # overflow every cache by themselves, need fewer sets: memory stays bounded.
        n_sets = max(1, min(o.timing_sets, (2 << 30) // max(1, inputs.nbytes(first))))
        enc = [self.transport.encode("t0_", first, counter, arenas)]
        del first
        for i in range(1, n_sets):
            s = self.ref.draw(f"time:{i}", "task", self._seed(f"time:{i}"), device)
            enc.append(self.transport.encode(f"t{i}_", s, counter, arenas))
            del s
        slots = [f"time:{i}" for i in range(n_sets)]
        rng = random.Random(self._seed("scales"))
        lo, hi = self.ref.scale_range("time:0", list(SCALE_RANGES))
        scales = [rng.uniform(lo, hi) for _ in range(pol.max_reps)]
        fp_seed = self._seed("fingerprint") % (1 << 31)
        policy = {
            "budget_s": pol.budget_s,
            "min_reps": pol.min_reps,
            "max_reps": pol.max_reps,
            "target_spread": pol.target_spread,
            "warmup_s": pol.warmup_s,
            "warmup_min": pol.warmup_min,
        }
        t0 = time.monotonic()
        msg = {
            "cmd": "time",
            "input_sets": enc,
            "policy": policy,
            "scales": scales,
            "fingerprint_seed": fp_seed,
            "arenas": arenas,
        }
        reply = self._request(msg, o.run_timeout + 10 * pol.budget_s)
        wall = time.monotonic() - t0
        wire.clear(self.xfer)
        self.mark("timed")
        said = reply.get("timing")
        if isinstance(said, dict):  # where the runner says its time went (informative)
            keys = ("decode_s", "warmup_s", "loop_s", "measure_s")
            self.v.r["phases"]["runner_timing"] = {k: said.get(k) for k in keys}
        if "error" in reply:
            return f"timing failed: {reply['error']}{_tb(reply)}"
        cand = reply.get("timing") or {}
        med, trials = cand.get("median_ms"), cand.get("trials")
        if not isinstance(med, (int, float)) or not isinstance(trials, int) or med <= 0 or trials <= 0:
            self.v.flag("timing_forged")
            return None
        if med * trials / 1000.0 > wall * 1.05 + 0.01:
            self.v.flag("timing_forged")
        if not self._verify_timed_outputs(device, n_sets, scales, fp_seed, cand.get("reps"), trials, rng):
            self.v.flag("timed_output_mismatch")
        self.mark("timed_checked")
        host, tail = cand.get("host_median_ms"), cand.get("tail_median_ms")
        if device.type == "cuda" and isinstance(host, (int, float)) and host > 1.5 * med + 0.05:
            self.v.flag("escaped_timer")
        # the device still busy after the timed stream's closing event: work on another stream
        # (an honest call leaves only a synchronisation's few microseconds)
        elif device.type == "cuda" and isinstance(tail, (int, float)) and tail > 0.05 + 0.1 * med:
            self.v.flag("escaped_timer")
        # no process of the candidate's is left while the baselines are timed
        self._close_runner()

        env = self.v.r["env"]
        path = baseline.cache_path(self.ref.sha256, env)
        base = baseline.load_cached(path) if o.use_baseline_cache else None
        if base is not None and o.with_compile and base.get("compile_error") == "not requested":
            base = None
        cached = base is not None
        if base is None:
            base = self.ref.baselines(slots, policy, o.with_compile, scales, o.init_timeout)
            if o.use_baseline_cache:
                baseline.store(path, base)
        self.mark("baselines")
        eager = base["eager"]["median_ms"]
        comp = base["compile"]["median_ms"] if base.get("compile") else None
        self.v.r["timing"] = {
            "candidate": _timing_view(cand),
            "eager": _timing_view(base["eager"]),
            "compile": _timing_view(base["compile"]) if base.get("compile") else None,
            "compile_error": base.get("compile_error"),
            "baseline_cached": cached,
            "method": cand.get("method"),
            "device": env.get("gpu") if device.type == "cuda" else env.get("cpu"),
            "wall_seconds": round(wall, 3),
            "scale_range": [lo, hi],
            "verified_reps": self.v.r.get("verified_reps"),
        }
        self.v.r.pop("verified_reps", None)
        self.v.r["speedup_vs_eager"] = eager / med
        self.v.r["speedup_vs_compile"] = comp / med if comp else None
        return None

    def _verify_timed_outputs(
        self,
        device: torch.device,
        n: int,
        scales: list[float],
        fp_seed: int,
        reps: Any,
        trials: int,
        rng: random.Random,
    ) -> bool:
        """Checks the fingerprints of timed calls of the judge's choosing, chosen after timing
        (so the candidate cannot know which calls count), against the reference's on the same
        scaled inputs (computed by the task's process from its slots ``time:I``)."""
        assert self.ref is not None
        if not isinstance(reps, list) or len(reps) != trials:
            return False
        chosen = sorted(set(rng.sample(range(trials), min(VERIFIED_REPS, trials))) | {trials - 1})
        for r in chosen:
            entry = reps[r]
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and entry[0] == r % n
                and isinstance(entry[1], list)
            ):
                return False
        summaries = self.ref.fingerprints([(f"time:{r % n}", scales[r]) for r in chosen], fp_seed)
        for r, want in zip(chosen, summaries):
            got = reps[r][1]
            if len(got) != len(want):
                return False
            # a slack found in the checks (compare.conditioned) grows with the inputs' scale
            slack = [s * max(1.0, scales[r]) ** 2 for s in self._slack]
            for i, (g, w) in enumerate(zip(got, want)):
                if w is None or g is None:
                    if g is not w:
                        return False
                    continue
                atol, rtol = compare.tolerance_for(_dtype(w["dtype"]), self.tolerance, self.opts.strict)
                bound = timing.fingerprint_bound(w, atol, rtol, slack[i] if i < len(slack) else 0.0)
                if not isinstance(g, (int, float)) or not abs(g - w["fp"]) <= bound:
                    return False
        self.v.r["verified_reps"] = len(chosen)
        return True


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
