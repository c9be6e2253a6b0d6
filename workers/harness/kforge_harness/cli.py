"""Command line: evaluate, baseline, check-task, inspect. Each prints one JSON object."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from kforge_harness import cudainit
from kforge_harness.gpulock import GpuLock
from kforge_harness.jailwrap import DISK_MIB
from kforge_harness.policy import Policy


def _json_default(o: Any) -> Any:
    return str(o)


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(_clean(obj), default=_json_default, allow_nan=False) + "\n")
    sys.stdout.flush()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kforge_harness", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    ev = sub.add_parser("evaluate", help="verify, time and reward a candidate")
    ev.add_argument("--task", required=True)
    ev.add_argument("--candidate", required=True)
    ev.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    ev.add_argument("--seed", type=int, help="fix the input seed (it is then no longer secret)")
    ev.add_argument("--strict", action="store_true", help="tolerances ten times tighter")
    ev.add_argument("--no-baseline-cache", action="store_true")
    ev.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ev.add_argument("--budget", type=float, default=2.0, help="timing budget per subject, seconds")
    ev.add_argument(
        "--init-timeout",
        type=float,
        default=600.0,
        help="seconds for the runner to import and build ModelNew",
    )
    ev.add_argument("--run-timeout", type=float, default=120.0, help="seconds for one checked call")
    ev.add_argument(
        "--no-static-scan",
        action="store_true",
        help="skip the static scan of model_new.py (tests use it to exercise the runtime checks alone)",
    )
    _jail_args(ev, "the build in its build profile, the runner and the task's process in its run profile")
    ev.add_argument("--gpu", type=int, help="in the jail: the GPU whose device nodes the runner gets")
    ev.add_argument("--progress", action="store_true", help='{"progress": PHASE} lines on stderr')
    ev.add_argument(
        "--gpu-lock",
        default=os.environ.get("KFORGE_GPU_LOCK") or None,
        help="a file to flock exclusively from the end of the build on (one per GPU; default $KFORGE_GPU_LOCK)",
    )
    ev.add_argument(
        "--phase",
        choices=["build", "verify", "full"],
        default="full",
        help="stop after the build, or after the correctness trials (no timing, reward null); default full",
    )
    ev.add_argument("--mem-limit-mib", type=int, help="runner's data limit (cpu backend; default 16384)")
    _disk_arg(ev)
    ev.add_argument(
        "--pool",
        default=os.environ.get("KFORGE_RUNNER_POOL") or None,
        help="a runner pool's socket (the pool subcommand): take a warm runner from it when it has one",
    )
    po = sub.add_parser("pool", help="keep warm runners for evaluations with these options")
    po.add_argument("--sock", required=True, help="the Unix socket to listen on")
    po.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    _jail_args(po, "runners in its run profile")
    po.add_argument("--gpu", type=int, help="in the jail: the GPU whose device nodes runners get")
    po.add_argument("--mem-limit-mib", type=int)
    _disk_arg(po)
    po.add_argument("--size", type=int, default=1, help="runners kept in standby")
    po.add_argument("--max-age", type=float, default=1800.0, help="seconds a runner may wait")
    po.add_argument("--refs", type=int, default=2, help="task processes kept between evaluations; 0: none")

    bl = sub.add_parser("baseline", help="eager and torch.compile times, cached")
    bl.add_argument("--task", required=True)
    bl.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    bl.add_argument("--no-cache", action="store_true")
    bl.add_argument("--budget", type=float, default=2.0)
    _task_process_args(bl)

    ct = sub.add_parser("check-task", help="is this task fit to be a task?")
    ct.add_argument("--task", required=True)
    ct.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    _task_process_args(ct)
    ct.add_argument("--min-ms", type=float)
    ct.add_argument("--max-ms", type=float)
    ct.add_argument(
        "--gpu-lock",
        default=os.environ.get("KFORGE_GPU_LOCK") or None,
        help="a file to flock exclusively while the task is timed (default $KFORGE_GPU_LOCK)",
    )

    pr = sub.add_parser("profile-reference", help="baseline times and the graph of a task (no candidate)")
    pr.add_argument("--task", required=True)
    pr.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    pr.add_argument("--budget", type=float, default=1.0)
    pr.add_argument("--no-compile", action="store_true")
    pr.add_argument("--gpu-lock", default=os.environ.get("KFORGE_GPU_LOCK") or None)
    _task_process_args(pr)

    ins = sub.add_parser("inspect", help="the module's computation graph")
    ins.add_argument("--task", required=True)
    ins.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    _task_process_args(ins)
    return p


def _task_process_args(p: argparse.ArgumentParser) -> None:
    """The options of the task's own process (kforge_harness.refrunner), for the commands
    that run a task without a candidate."""
    _jail_args(p, "the task runs in its run profile")
    p.add_argument("--gpu", type=int, help="in the jail: the GPU whose device nodes the task's process gets")
    p.add_argument("--mem-limit-mib", type=int, help="the task's process's memory limit")
    _disk_arg(p)
    p.add_argument(
        "--pool",
        default=os.environ.get("KFORGE_RUNNER_POOL") or None,
        help="a runner pool's socket: take the task's process it keeps for this task, if any",
    )


class UsageError(Exception):
    """A command line that cannot run as given (exit 2, the reason on stderr)."""


def _jail_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--jail",
        help=f"the kforge-jail binary ({what}); default $KFORGE_JAIL, else kforge-jail in $KFORGE_BUILD "
        "or the repository's build/",
    )
    p.add_argument(
        "--no-jail",
        action="store_true",
        help="development only: the candidate's and the task's code run as this user, outside the jail "
        "(a verdict says so: env.jailed false)",
    )


def default_jail() -> str:
    """Where kforge-jail is when --jail does not say: $KFORGE_JAIL, else $KFORGE_BUILD/kforge-jail,
    else build/kforge-jail of the repository this harness is in."""
    if os.environ.get("KFORGE_JAIL"):
        return os.environ["KFORGE_JAIL"]
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("KFORGE_BUILD") or os.path.join(here, "..", "..", "..", "build")
    return os.path.join(build, "kforge-jail")


def jail_of(args: argparse.Namespace) -> str | None:
    """The jail binary to run user code in; None only with --no-jail. User code never runs
    outside the jail unless the command line says so."""
    if args.no_jail:
        if args.jail:
            raise UsageError("--jail and --no-jail: choose one")
        return None
    path = os.path.abspath(args.jail or default_jail())
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(
            f"no kforge-jail at {path}: build it (make build), pass --jail PATH, or --no-jail "
            "(development only: the code runs outside the jail, and the verdict says so)"
        )
    return path


def _disk_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--disk-mib",
        type=int,
        default=DISK_MIB,
        help=f"in the jail: the most each jail's writable folder may hold (default {DISK_MIB})",
    )


def _task_options(args: argparse.Namespace) -> Any:
    from kforge_harness.launch import Options

    return Options(
        backend=args.backend,
        jail=jail_of(args),
        gpu=args.gpu,
        mem_limit_mib=args.mem_limit_mib,
        disk_mib=args.disk_mib,
        pool=getattr(args, "pool", None),
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "evaluate":
            from kforge_harness.launch import Options, prepare

            opts = Options(
                backend=args.backend,
                seed=args.seed,
                strict=args.strict,
                use_baseline_cache=not args.no_baseline_cache,
                with_compile=not args.no_compile,
                timing_policy=Policy(budget_s=args.budget),
                init_timeout=args.init_timeout,
                run_timeout=args.run_timeout,
                mem_limit_mib=args.mem_limit_mib,
                static_scan=not args.no_static_scan,
                jail=jail_of(args),
                gpu=args.gpu,
                progress=args.progress,
                gpu_lock=args.gpu_lock,
                phase=args.phase,
                pool=args.pool,
                disk_mib=args.disk_mib,
            )
            # the runner starts inside prepare, before this process imports PyTorch for the judge
            launch = prepare(args.task, args.candidate, opts)
            init = cudainit.start_primary_context() if opts.backend == "cuda" else None
            from kforge_harness.judge import evaluate_launched

            if init is not None:
                init.join()
            emit(evaluate_launched(launch))
        elif args.cmd == "pool":
            from kforge_harness.launch import Options
            from kforge_harness.pool import run_pool

            opts = Options(
                backend=args.backend,
                jail=jail_of(args),
                gpu=args.gpu,
                mem_limit_mib=args.mem_limit_mib,
                disk_mib=args.disk_mib,
            )
            run_pool(args.sock, opts, max(1, args.size), args.max_age, max(0, args.refs))
        elif args.cmd == "baseline":
            from kforge_harness.baseline_cmd import run_baseline

            emit(
                run_baseline(
                    args.task, args.backend, not args.no_cache, args.budget, opts=_task_options(args)
                )
            )
        elif args.cmd == "check-task":
            from kforge_harness.check_task import WINDOWS_MS, check_task

            lo, hi = WINDOWS_MS[args.backend]
            window = (
                args.min_ms if args.min_ms is not None else lo,
                args.max_ms if args.max_ms is not None else hi,
            )
            lock = GpuLock(args.gpu_lock) if args.gpu_lock else None
            if lock is not None:
                lock.acquire()
            emit(check_task(args.task, args.backend, window, opts=_task_options(args)))
        elif args.cmd == "profile-reference":
            import secrets

            from kforge_harness.baseline_cmd import run_baseline
            from kforge_harness.reference import TaskFailed, open_task

            lock = GpuLock(args.gpu_lock) if args.gpu_lock else None
            if lock is not None:
                lock.acquire()
            opts = _task_options(args)
            out: dict[str, Any] = {}
            try:  # one task's process for both
                ref = open_task(args.task, opts, secrets.randbits(62))
            except TaskFailed as e:
                out = {"baseline": {"error": str(e)}, "graph": {"error": str(e)}}
            else:
                try:
                    out["baseline"] = run_baseline(
                        args.task,
                        args.backend,
                        True,
                        args.budget,
                        with_compile=not args.no_compile,
                        opts=opts,
                        ref=ref,
                    )
                    try:
                        out["graph"] = ref.inspect()
                    except TaskFailed as e:
                        out["graph"] = {"error": str(e)}
                finally:
                    ref.close()
            if lock is not None:
                out["gpu_lock_held_s"] = round(lock.held_s() or 0.0, 3)
            emit(out)
        elif args.cmd == "inspect":
            from kforge_harness.reference import TaskFailed, inspect

            try:
                emit(inspect(args.task, _task_options(args)))
            except TaskFailed as e:
                emit({"error": str(e)})
                return 1
    except UsageError as e:
        sys.stderr.write(f"kforge_harness: {e}\n")
        return 2
    except Exception as e:  # noqa: BLE001 - a harness failure: say so on stderr, exit 2
        import traceback

        traceback.print_exc()
        sys.stderr.write(f"kforge_harness: internal error: {type(e).__name__}: {e}\n")
        return 2
    return 0
