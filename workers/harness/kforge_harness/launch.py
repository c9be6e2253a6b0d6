"""The judge's first stage, free of PyTorch: checks and scans the candidate, builds it, takes the
GPU lock and starts the runner.

The runner's start (Python, PyTorch's import, the CUDA context: seconds on a GPU host) then
overlaps the judge's own import of PyTorch and the building of its reference, which
kforge_harness.judge does next with what ``prepare`` returns. Nothing secret exists yet when
the runner starts: the seed is drawn by the judge afterwards, in its own process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from kforge_harness import build, jailwrap, nativeguard, poolclient
from kforge_harness.candidate import Candidate, CandidateError, detect
from kforge_harness.gpulock import GpuLock
from kforge_harness.policy import Policy
from kforge_harness.proc import RunnerProcess, become_subreaper, make_undumpable
from kforge_harness.reference import Reference, TaskFailed
from kforge_harness.scan import scan_candidate_sources

HARNESS_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Options:
    backend: str = "cuda"
    seed: int | None = None
    strict: bool = False
    use_baseline_cache: bool = True
    with_compile: bool = True
    timing_policy: Policy = field(default_factory=Policy)
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
    pool: str | None = None  # a runner pool's socket (kforge_harness.pool): take a warm runner
    disk_mib: int = jailwrap.DISK_MIB  # the most each jail's writable folder may hold


def progress(opts: Options, phase: str) -> None:
    """With --progress: one line on stderr as the evaluation enters a phase (the worker's job
    events)."""
    if opts.progress:
        sys.stderr.write(json.dumps({"progress": phase}) + "\n")
        sys.stderr.flush()


def process_age_s() -> float | None:
    """Seconds since this process started (from /proc; None where there is none): the share of a
    verdict's wall time spent before the judge's own clock started (Python's start, imports)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Launch:
    """What the first stage did. ``status`` set: it ended the evaluation (a compile_error or an
    infra_error, with ``message``). Otherwise ``runner`` runs (None only in phase build). The
    judge's Evaluation takes over every resource here (``xfer``, ``runner``, ``dev_listener``,
    ``lock``); ``abandon()`` frees them when there is no judge to hand them to."""

    task_path: str
    cand_path: str
    opts: Options
    t0: float
    started_s: float | None
    xfer: str
    marks: dict[str, float] = field(default_factory=dict)
    cand: Candidate | None = None
    build: dict[str, Any] | None = None
    flags: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    status: str | None = None
    message: str = ""
    runner: RunnerProcess | None = None
    dev_listener: socket.socket | None = None
    lock: GpuLock | None = None
    lock_wait_s: float | None = None
    runner_start: str = "cold"  # or "pooled": taken warm from a pool
    ref: Reference | None = None  # the task's process (kforge_harness.refrunner)
    task_error: str | None = None  # why the task's process could not start

    def mark(self, phase: str) -> None:
        self.marks[phase] = round(time.monotonic() - self.t0, 3)

    def abandon(self) -> None:
        if self.ref is not None:
            self.ref.close()
        if self.dev_listener is not None:
            self.dev_listener.close()
        if self.runner is not None:
            self.runner.close()
        if self.lock is not None:
            self.lock.release()
        shutil.rmtree(self.xfer, ignore_errors=True)


def xfer_dir(jail: str | None) -> str:
    if jail:
        # The jail makes its own /dev/shm and /tmp, so the transfer directory lives elsewhere.
        base: str | None = os.path.join(build.cache_dir(), "xfer")
        os.makedirs(base, exist_ok=True)
    else:
        shm = "/dev/shm"
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix="kforge-xfer-", dir=base)


def prepare(task_path: str, cand_path: str, opts: Options) -> Launch:
    """The first stage of an evaluation (see the module's doc)."""
    make_undumpable()
    become_subreaper()  # what the runner leaves behind comes back to the judge, which ends it
    launch = Launch(task_path, cand_path, opts, time.monotonic(), process_age_s(), xfer_dir(opts.jail))
    try:
        _build_and_start(launch)
        if launch.runner is not None:
            # the task's process starts beside the runner (its start, PyTorch and a CUDA
            # context, overlaps the runner's and the judge's); it makes nothing on the GPU
            # before the judge asks
            try:
                launch.ref = Reference.start(task_path, opts)
            except TaskFailed as e:
                launch.task_error = str(e)
    except BaseException:
        launch.abandon()
        raise
    return launch


def _build_and_start(launch: Launch) -> None:
    o = launch.opts
    try:
        cand = detect(launch.cand_path, o.backend)
    except CandidateError as e:
        launch.status, launch.message = "compile_error", str(e)
        return
    launch.cand = cand
    try:
        with open(cand.model_file, encoding="utf-8") as f:
            compile(f.read(), cand.model_file, "exec")
    except (SyntaxError, UnicodeDecodeError, ValueError) as e:
        launch.build = {"seconds": None, "cached": False, "diagnostics": str(e)}
        launch.status = "compile_error"
        launch.message = f"{os.path.basename(cand.model_file)} does not parse: {e}"
        return
    sources, binaries = cand.python_files()
    if binaries:  # not a scan: code no scan or build of ours has seen
        launch.flags.append("dynamic_loading")
        launch.details.append(f"a prebuilt module in the candidate: {os.path.basename(binaries[0])}")
    if o.static_scan:
        scan = scan_candidate_sources(sources, cand.format)
        launch.flags += scan["flags"]
        launch.details += scan["details"]
    progress(o, "building")
    try:
        if cand.format == "native":
            b = build.build_native(cand, o.backend, jail=o.jail, disk_mib=o.disk_mib)
        elif cand.format == "cuda-agent":
            b = build.build_cuda_agent(cand, o.backend, jail=o.jail, disk_mib=o.disk_mib)
        else:
            b = build.BuildResult(command=["load_inline at import"])
    except build.JailError as e:
        launch.status, launch.message = "infra_error", f"jail: {e}"
        return
    except build.BuildError as e:
        launch.build = {"seconds": None, "cached": False, "diagnostics": e.diagnostics}
        launch.status, launch.message = "compile_error", str(e)
        return
    launch.build = b.as_json()
    launch.flags += b.flags
    launch.mark("built")
    if o.phase == "build":
        return
    if o.gpu_lock:
        # the build ran beside other jobs; from here on the GPU is this job's alone
        launch.lock = GpuLock(o.gpu_lock)
        launch.lock_wait_s = round(launch.lock.acquire(), 3)
        launch.mark("locked")
    launch.runner = _start_runner(launch, cand, b)


def _start_runner(launch: Launch, cand: Candidate, b: build.BuildResult) -> RunnerProcess:
    o = launch.opts
    if o.pool:
        taken = poolclient.take(o.pool, pool_key(o))
        if taken is not None:
            return _adopt_runner(launch, cand, b, taken)
        launch.runner_start = "cold (the pool had no runner)"
    xfer = launch.xfer
    tail = ["--xfer", xfer, "--candidate", cand.path, "--format", cand.format, "--backend", o.backend]
    if b.lib:
        tail += ["--lib", b.lib]
    if b.ext_dir:
        tail += ["--ext-dir", b.ext_dir]
    if o.backend == "cuda":
        tail += ["--dev-sock", _listen_devshare(launch)]
    readable = [cand.path if os.path.isdir(cand.path) else os.path.dirname(cand.path)]
    readable += [os.path.dirname(b.lib) if b.lib else "", b.ext_dir or ""]
    lifetime = o.init_timeout + 20 * o.run_timeout + 20 * o.timing_policy.budget_s
    env, wrap, mem = runner_env_wrap(o, xfer, readable, lifetime)
    return RunnerProcess(tail, env, xfer, mem, wrap)


def _listen_devshare(launch: Launch) -> str:
    """The judge's end of the device channel (cuda): a Unix socket in the transfer directory."""
    path = os.path.join(launch.xfer, "dev.sock")
    launch.dev_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    launch.dev_listener.bind(path)
    launch.dev_listener.listen(1)
    return path


def pool_key(o: Options) -> dict[str, Any]:
    """What a pooled runner must have been started with to serve an evaluation with ``o``."""
    return {
        "backend": o.backend,
        "jail": o.jail,
        "gpu": _jail_gpu(o),
        "mem": _mem_mib(o),
        "disk": o.disk_mib,
        "harness": HARNESS_PARENT,
    }


def _jail_gpu(o: Options) -> int | None:
    return o.gpu if o.gpu is not None or o.backend != "cuda" else 0


def _mem_mib(o: Options) -> int | None:
    return o.mem_limit_mib if o.mem_limit_mib is not None else (16384 if o.backend == "cpu" else None)


_SECRET_NAME = re.compile(r"PASS|SECRET|TOKEN|KEY|CRED|AUTH|DATABASE|REDIS|_URL$", re.IGNORECASE)


def secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a credential (a password, a
    key, a connection URL) that user code must not see."""
    return bool(_SECRET_NAME.search(name))


def runner_env_wrap(
    o: Options, xfer: str, readable: list[str], lifetime_s: float
) -> tuple[dict[str, str], list[str] | None, int | None]:
    """The runner's environment, its jail prefix (None without a jail) and its memory limit in
    MiB; ``readable``: what the jail shows it read-only besides the harness. The jail passes a
    few named variables alone; without one, the caller's environment goes in less anything
    that looks like a secret (``secret_name``), so a worker run without a jail does not hand
    its credentials to user code."""
    env = {k: v for k, v in os.environ.items() if not secret_name(k)}
    env["PYTHONPATH"] = HARNESS_PARENT + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["KFORGE_BACKEND"] = o.backend
    env.pop("KFORGE_KERNEL_LIB", None)
    if o.jail:
        env["TORCH_EXTENSIONS_DIR"] = os.path.join(xfer, "torch_extensions")
    else:
        env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(build.cache_dir(), "torch_extensions"))
    mem = _mem_mib(o)
    if not o.jail:
        return env, None, mem
    inner = {k: env[k] for k in ("PYTHONPATH", "KFORGE_BACKEND", "TORCH_EXTENSIONS_DIR")}
    if env.get("LD_LIBRARY_PATH"):
        inner["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]
    guard_lib = nativeguard.library_path()  # the runner reads it inside the jail
    inner[nativeguard.ENV_PATH] = guard_lib or ""
    wrap = jailwrap.run_prefix(
        o.jail,
        xfer,
        [HARNESS_PARENT, *readable, *([guard_lib] if guard_lib else [])],
        inner,
        _jail_gpu(o),
        mem,
        lifetime_s,
        o.disk_mib,
    )
    return env, wrap, mem


def _adopt_runner(
    launch: Launch, cand: Candidate, b: build.BuildResult, taken: poolclient.Taken
) -> RunnerProcess:
    """Takes over a pool's warm runner: the evaluation moves into its transfer directory (the
    only place its jail lets it read besides the harness), where the candidate, its library and
    its extension are copied; the runner is told where they are without waiting for it (its
    answer is awaited before the judge's first command)."""
    shutil.rmtree(launch.xfer, ignore_errors=True)
    launch.xfer = taken.xfer
    launch.runner_start = "pooled"
    runner = RunnerProcess.adopt(taken.xfer, taken.proc, taken.out_r, taken.err_r)
    try:
        staged = os.path.join(taken.xfer, "candidate")
        if os.path.isdir(cand.path):
            shutil.copytree(cand.path, staged, symlinks=True)  # links stay links: no file leaks in
            cand_path = staged
        else:
            os.mkdir(staged)
            cand_path = shutil.copy(cand.path, staged)
        msg: dict[str, Any] = {"cmd": "adopt", "candidate": cand_path, "format": cand.format, "lib": None}
        if b.lib:
            os.mkdir(os.path.join(taken.xfer, "lib"))
            msg["lib"] = shutil.copy(b.lib, os.path.join(taken.xfer, "lib"))
        if b.ext_dir:
            msg["ext_dir"] = shutil.copytree(b.ext_dir, os.path.join(taken.xfer, "ext"), symlinks=True)
        if launch.opts.backend == "cuda":
            msg["dev_sock"] = _listen_devshare(launch)
        runner.post(msg, launch.opts.init_timeout)
    except BaseException:
        runner.close()
        raise
    return runner
