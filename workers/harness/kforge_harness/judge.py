"""The judge: evaluates a candidate against a task and reaches a verdict.

Owns the secret seed, the reference model and its outputs, and the comparison; runs the
candidate only through a separate runner process (``proc.RunnerProcess``).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kforge_harness import REWARD_VERSION, baseline, build, compare, devshare, inputs, jailwrap, timing, wire
from kforge_harness.candidate import CandidateError, detect
from kforge_harness.envinfo import env_info
from kforge_harness.gpulock import GpuLock
from kforge_harness.proc import RunnerDied, RunnerProcess, make_undumpable
from kforge_harness.reward import reward
from kforge_harness.scan import scan_candidate_sources
from kforge_harness.task import Task, TaskError, load_task
from kforge_harness.transport import Transport

# Timed calls whose outputs are verified after timing, chosen at random, plus the last.
VERIFIED_REPS = 8

HARNESS_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


@dataclass
class Options:
    backend: str = "cuda"
    seed: int | None = None
    strict: bool = False
    use_baseline_cache: bool = True
    with_compile: bool = True
    timing_policy: timing.Policy = field(default_factory=timing.Policy)
    timing_sets: int = 3
    init_timeout: float = 600.0
    run_timeout: float = 120.0
    mem_limit_mib: int | None = None
    static_scan: bool = True
    jail: str | None = None
    gpu: int | None = None
    progress: bool = False
    gpu_lock: str | None = None
    phase: str = "full"  # build | verify | full: where the evaluation stops


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
        if status == "incorrect" and any(f in REJECTING for f in self.r["flags"]):
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
            raise TaskError("backend cuda requested but no CUDA device is visible")
        return torch.device("cuda")
    return torch.device("cpu")


def _set_precision(allow_tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32


def make_reference(task: Task, device: torch.device, init_seed: int) -> tuple[torch.nn.Module, list[Any]]:
    init_args = task.get_init_inputs()
    torch.manual_seed(init_seed)
    model = task.model_class()(*init_args).to(device)
    return model, init_args


def reference_outputs(model: torch.nn.Module, args: list[Any]) -> Any:
    """The reference's outputs, left on the device where they were computed."""
    with torch.no_grad():
        return model(*args)


class Evaluation:
    """One evaluate run. Owns the transfer directory and the runner; ``close()`` frees them."""

    def __init__(self, task_path: str, cand_path: str, opts: Options) -> None:
        self.task_path = task_path
        self.cand_path = cand_path
        self.opts = opts
        self.v = Verdict(opts.backend)
        if opts.jail:
            # The jail makes its own /dev/shm and /tmp, so the transfer directory lives elsewhere.
            base = os.path.join(build.cache_dir(), "xfer")
            os.makedirs(base, exist_ok=True)
        else:
            shm = "/dev/shm"
            base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
        self.xfer = tempfile.mkdtemp(prefix="kforge-xfer-", dir=base)
        self.runner: RunnerProcess | None = None
        self.transport = Transport(self.xfer)
        self.dev_listener: socket.socket | None = None
        self.lock = GpuLock(opts.gpu_lock) if opts.gpu_lock else None
        self.secret = opts.seed if opts.seed is not None else secrets.randbits(62)
        make_undumpable()

    def close(self) -> None:
        self.transport.release()
        for s in (self.transport.sock, self.dev_listener):
            if s is not None:
                s.close()
        if self.runner is not None:
            self.runner.close()
            self.v.r["runner_log"] = self.runner.log()
            self.runner = None
        if self.lock is not None:
            self.lock.release()
        shutil.rmtree(self.xfer, ignore_errors=True)

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
        return reply

    def _progress(self, phase: str) -> None:
        """With --progress: one line on stderr as the judge enters a phase (the worker's events)."""
        if self.opts.progress:
            sys.stderr.write(json.dumps({"progress": phase}) + "\n")
            sys.stderr.flush()

    def run(self) -> dict[str, Any]:
        o = self.opts
        try:
            task = load_task(self.task_path, o.backend)
            device = device_for(o.backend)
        except TaskError as e:
            return self.v.finish("infra_error", f"task: {e}")
        _set_precision(task.allow_tf32)
        try:
            cand = detect(self.cand_path, o.backend)
        except CandidateError as e:
            return self.v.finish("compile_error", str(e))
        self.v.r["format"] = cand.format
        try:
            with open(cand.model_file, encoding="utf-8") as f:
                compile(f.read(), cand.model_file, "exec")
        except (SyntaxError, UnicodeDecodeError, ValueError) as e:
            self.v.r["build"] = {"seconds": None, "cached": False, "diagnostics": str(e)}
            return self.v.finish("compile_error", f"{os.path.basename(cand.model_file)} does not parse: {e}")
        if o.static_scan:
            scan = scan_candidate_sources([cand.model_file], cand.format)
            self.v.flag(*scan["flags"])
            self.v.r["flag_details"] += scan["details"]

        self._progress("building")
        try:
            if cand.format == "native":
                b = build.build_native(cand, o.backend, jail=o.jail)
            elif cand.format == "cuda-agent":
                b = build.build_cuda_agent(cand, o.backend, jail=o.jail)
            else:
                b = build.BuildResult(command=["load_inline at import"])
        except build.JailError as e:
            return self.v.finish("infra_error", f"jail: {e}")
        except build.BuildError as e:
            self.v.r["build"] = {"seconds": None, "cached": False, "diagnostics": e.diagnostics}
            return self.v.finish("compile_error", str(e))
        self.v.r["build"] = b.as_json()
        self.v.flag(*b.flags)
        if o.phase != "full":
            self.v.r["phase"] = o.phase
        if o.phase == "build":
            if any(f in REJECTING for f in self.v.r["flags"]):
                return self.v.finish("rejected", "a hack or irregularity was detected")
            return self.v.finish("ok", "built (not run: phase build)")

        if self.lock is not None:
            # the build ran beside other jobs; from here on the GPU is this job's alone
            self.v.r["gpu_lock_wait_s"] = round(self.lock.acquire(), 3)
        env = dict(os.environ)
        env["PYTHONPATH"] = HARNESS_PARENT + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["KFORGE_BACKEND"] = o.backend
        env.pop("KFORGE_KERNEL_LIB", None)
        if o.jail:
            env["TORCH_EXTENSIONS_DIR"] = os.path.join(self.xfer, "torch_extensions")
        else:
            env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(build.cache_dir(), "torch_extensions"))
        tail = [
            "--xfer",
            self.xfer,
            "--candidate",
            cand.path,
            "--format",
            cand.format,
            "--backend",
            o.backend,
        ]
        if b.lib:
            tail += ["--lib", b.lib]
        if b.ext_dir:
            tail += ["--ext-dir", b.ext_dir]
        if device.type == "cuda" and devshare.available():
            self.dev_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.dev_listener.bind(os.path.join(self.xfer, "dev.sock"))
            self.dev_listener.listen(1)
            tail += ["--dev-sock", os.path.join(self.xfer, "dev.sock")]
        mem = o.mem_limit_mib if o.mem_limit_mib is not None else (16384 if o.backend == "cpu" else None)
        wrap: list[str] | None = None
        if o.jail:
            inner = {k: env[k] for k in ("PYTHONPATH", "KFORGE_BACKEND", "TORCH_EXTENSIONS_DIR")}
            if env.get("LD_LIBRARY_PATH"):
                inner["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]
            readable = [HARNESS_PARENT, cand.path if os.path.isdir(cand.path) else os.path.dirname(cand.path)]
            readable += [os.path.dirname(b.lib) if b.lib else "", b.ext_dir or ""]
            lifetime = o.init_timeout + 20 * o.run_timeout + 20 * o.timing_policy.budget_s
            gpu = o.gpu if o.gpu is not None or o.backend != "cuda" else 0
            wrap = jailwrap.run_prefix(o.jail, self.xfer, readable, inner, gpu, mem, lifetime)
        self.runner = RunnerProcess(tail, env, self.xfer, mem, wrap)
        # the reference is built while the runner starts (Python, PyTorch, the CUDA context)
        init_seed = self._seed("init")
        try:
            ref_model, init_args = make_reference(task, device, init_seed)
        except Exception as e:  # noqa: BLE001 - the task's constructor may raise anything
            return self.v.finish("infra_error", f"task: Model() raised {type(e).__name__}: {e}")

        try:
            return self._judge(task, device, ref_model, init_args, init_seed)
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
        self.transport.sock = conn
        probe = devshare.probe_tensor(self.secret)
        arenas: list[dict[str, int]] = []
        enc = self.transport.encode("probe_", probe.cuda(), [0], arenas)
        reply = self._request(
            {"cmd": "devprobe", "probe": enc, "arenas": arenas, "sum": int(probe.sum())}, timeout
        )
        if reply.get("dev") is True and arenas:
            self.v.r["transfer"] = "device"
        else:
            self.transport.sock = None
            conn.close()
            self.v.r["transfer"] = f"files ({str(reply.get('error', 'device probe failed'))[:200]})"

    def _judge(
        self,
        task: Task,
        device: torch.device,
        ref_model: torch.nn.Module,
        init_args: list[Any],
        init_seed: int,
    ) -> dict[str, Any]:
        o = self.opts
        t0 = time.monotonic()
        if self.dev_listener is not None:
            self._connect_devshare(o.init_timeout)
        counter = [0]
        state = ref_model.state_dict()
        names = list(state.keys())
        arenas: list[dict[str, int]] = []
        msg = {
            "cmd": "init",
            "seed": init_seed,
            "allow_tf32": task.allow_tf32,
            "init_args": self.transport.encode("init_", init_args, counter, arenas),
            "state": self.transport.encode("state_", [state[n] for n in names], counter, arenas),
            "state_names": [[n, list(state[n].shape)] for n in names],
            "arenas": arenas,
        }
        reply = self._request(msg, o.init_timeout)
        wire.clear(self.xfer)
        self.v.r["build"]["init_seconds"] = round(time.monotonic() - t0, 3)
        if "error" in reply:
            return self.v.finish(
                "runtime_error", f"ModelNew could not be built: {reply['error']}" + _tb(reply)
            )

        self._progress("verifying")
        if not self._correctness(task, device, ref_model):
            if any(f in REJECTING for f in self.v.r["flags"]):
                return self.v.finish("rejected", "a hack or irregularity was detected")
            failing = [c for c in self.v.r["checks"] if c.get("error")]
            if failing:
                return self.v.finish("runtime_error", failing[0]["error"])
            return self.v.finish("incorrect", "outputs differ from the reference")
        if any(f in REJECTING for f in self.v.r["flags"]):
            return self.v.finish("rejected", "a hack or irregularity was detected")
        self.v.r["correct"] = True
        if o.phase == "verify":
            return self.v.finish("ok", "correct on every trial (not timed: phase verify)")
        self._progress("timing")
        err = self._timing(task, device, ref_model)
        if err:
            return self.v.finish("runtime_error", err)
        return self.v.finish("ok")

    # -- correctness --------------------------------------------------------------------
    def _correctness(self, task: Task, device: torch.device, ref_model: torch.nn.Module) -> bool:
        """Runs every trial. The reference is computed only after the runner answered, so it is
        never in the judge's memory while candidate code runs."""
        o = self.opts
        all_pass = True
        main_pass = None
        for kind in inputs.kinds_for(task):
            args = inputs.draw(task, kind, self._seed(f"check:{kind}"), device)
            check: dict[str, Any] = {"kind": kind}
            counter = [0]
            arenas: list[dict[str, int]] = []
            msg = {
                "cmd": "run",
                "inputs": self.transport.encode(f"in_{kind}_", args, counter, arenas),
                "reuse": kind == "same_buffers",
                "arenas": arenas,
            }
            t0 = time.monotonic()
            reply = self._request(msg, o.run_timeout)
            check["seconds"] = round(time.monotonic() - t0, 3)
            if "error" in reply:
                wire.clear(self.xfer)
                check.update({"pass": False, "error": reply["error"] + _tb(reply)})
                self.v.r["checks"].append(check)
                return False
            ref = reference_outputs(ref_model, args)
            del args
            if kind not in ("task", "same_buffers") and not inputs.all_finite(ref):
                wire.clear(self.xfer)
                check.update({"pass": None, "skipped": "reference is not finite on these inputs"})
                self.v.r["checks"].append(check)
                continue
            limit = 2 * inputs.nbytes(ref) + (1 << 20)
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
            check.update(compare.compare(out, ref, task.tolerance, o.strict))
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

    # -- timing -------------------------------------------------------------------------
    def _timing(self, task: Task, device: torch.device, ref_model: torch.nn.Module) -> str | None:
        """Times the candidate (and the baselines unless cached); returns an error or None."""
        o = self.opts
        pol = o.timing_policy
        first = inputs.draw(task, "task", self._seed("time:0"), device)
        # Inputs change on every timed call anyway (rescaled in place), so large inputs, which
        # overflow every cache by themselves, need fewer sets: memory stays bounded.
        n_sets = max(1, min(o.timing_sets, (2 << 30) // max(1, inputs.nbytes(first))))
        sets = [first] + [
            inputs.draw(task, "task", self._seed(f"time:{i}"), device) for i in range(1, n_sets)
        ]
        rng = random.Random(self._seed("scales"))
        scales = [rng.uniform(0.5, 2.0) for _ in range(pol.max_reps)]
        fp_seed = self._seed("fingerprint") % (1 << 31)
        counter = [0]
        arenas: list[dict[str, int]] = []
        enc = [self.transport.encode(f"t{i}_", s, counter, arenas) for i, s in enumerate(sets)]
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
        if "error" in reply:
            return f"timing failed: {reply['error']}{_tb(reply)}"
        cand = reply.get("timing") or {}
        med, trials = cand.get("median_ms"), cand.get("trials")
        if not isinstance(med, (int, float)) or not isinstance(trials, int) or med <= 0 or trials <= 0:
            self.v.flag("timing_forged")
            return None
        if med * trials / 1000.0 > wall * 1.05 + 0.01:
            self.v.flag("timing_forged")
        if not self._verify_timed_outputs(
            task, ref_model, sets, scales, fp_seed, cand.get("reps"), trials, rng
        ):
            self.v.flag("timed_output_mismatch")
        host, tail = cand.get("host_median_ms"), cand.get("tail_median_ms")
        if device.type == "cuda" and isinstance(host, (int, float)) and host > 1.5 * med + 0.05:
            self.v.flag("escaped_timer")
        # the device still busy after the timed stream's closing event: work on another stream
        # (an honest call leaves only a synchronisation's few microseconds)
        elif device.type == "cuda" and isinstance(tail, (int, float)) and tail > 0.05 + 0.1 * med:
            self.v.flag("escaped_timer")

        env = self.v.r["env"]
        path = baseline.cache_path(task.sha256, env)
        base = baseline.load_cached(path) if o.use_baseline_cache else None
        if base is not None and o.with_compile and base.get("compile_error") == "not requested":
            base = None
        cached = base is not None
        if base is None:
            base = baseline.measure_baselines(ref_model, sets, device, pol, o.with_compile, scales)
            if o.use_baseline_cache:
                baseline.store(path, base)
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
            "verified_reps": self.v.r.get("verified_reps"),
        }
        self.v.r.pop("verified_reps", None)
        self.v.r["speedup_vs_eager"] = eager / med
        self.v.r["speedup_vs_compile"] = comp / med if comp else None
        return None

    def _verify_timed_outputs(
        self,
        task: Task,
        ref_model: torch.nn.Module,
        sets: list[list[Any]],
        scales: list[float],
        fp_seed: int,
        reps: Any,
        trials: int,
        rng: random.Random,
    ) -> bool:
        """Checks the fingerprints of timed calls of the judge's choosing, chosen after timing
        (so the candidate cannot know which calls count), against the reference's."""
        n = len(sets)
        if not isinstance(reps, list) or len(reps) != trials:
            return False
        chosen = sorted(set(rng.sample(range(trials), min(VERIFIED_REPS, trials))) | {trials - 1})
        fp = timing.Fingerprint(fp_seed)
        for r in chosen:
            entry = reps[r]
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and entry[0] == r % n
                and isinstance(entry[1], list)
            ):
                return False
            ref = reference_outputs(ref_model, timing.scaled_inputs(sets[r % n], scales[r]))
            refs = compare.flatten(ref)
            want = fp(ref)
            atol, rtol = (
                compare.tolerance_for(refs[0].dtype, task.tolerance, self.opts.strict)
                if isinstance(refs[0], torch.Tensor)
                else (0.0, 0.0)
            )
            bounds = fp.tolerance(ref, atol, rtol)
            got = entry[1]
            if len(got) != len(want):
                return False
            for g, w, b in zip(got, want, bounds):
                if w is None or g is None:
                    if g is not w:
                        return False
                    continue
                if not isinstance(g, (int, float)) or not abs(g - w) <= b:
                    return False
        self.v.r["verified_reps"] = len(chosen)
        return True


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
    ev = Evaluation(task_path, cand_path, opts)
    try:
        verdict = ev.run()
        held = ev.lock.held_s() if ev.lock is not None else None
        if held is not None:
            verdict["gpu_lock_held_s"] = round(held, 3)  # this job's time alone on the GPU
        return verdict
    finally:
        ev.close()
