"""A pool of warm runners (``python -m kforge_harness pool``, kforge_harness/pool.py): evaluations
take a runner started ahead of time, with the verdicts they get from a runner of their own, the
hacks caught the same way; the pool kills a runner whose judge dies; a pool of another kind, or
none, leaves the evaluation to start its own. Real pools, real runners, the real CLI, cpu backend
(and the jail where it is built)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessargs import unjailed
from test_hacks import CAUGHT, FAST, HACKS, HARNESS, TASKS, brief, run_cli

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"
JAIL = ROOT / "build" / "kforge-jail"


class PoolProc:
    """One running pool: its process and socket."""

    def __init__(self, cache: Path, sock: Path, *extra: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_CACHE=str(cache))
        self.sock = sock
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kforge_harness",
                *unjailed(["pool", "--sock", str(sock), "--backend", "cpu", *extra]),
            ],  # fmt: skip
            cwd=str(HARNESS),
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.banner = json.loads(self.proc.stdout.readline())

    def runners(self, module: str = "kforge_harness.runner") -> dict[int, str]:
        """The pool's runner processes now (``module``: the candidates', or the tasks'
        kforge_harness.refrunner): pid -> transfer directory (from their command line)."""
        found = {}
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode().split("\0")
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.proc.pid and "--xfer" in argv and module in argv:
                found[int(pid)] = argv[argv.index("--xfer") + 1]
        return found

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def pool(kforge_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PoolProc]:
    p = PoolProc(kforge_cache, tmp_path_factory.mktemp("pool") / "cpu.sock")
    yield p
    p.stop()


def evaluate(cache: Path, task: Path, candidate: Path, *extra: str) -> dict[str, Any]:
    code, lines, err = run_cli(
        cache, "evaluate", "--task", str(task), "--candidate", str(candidate), *FAST, *extra
    )
    assert code == 0, err[-3000:]
    assert len(lines) == 1, "\n".join(lines)[-3000:]
    return json.loads(lines[0])


def test_the_pool_keeps_a_runner_in_standby(pool):
    assert pool.banner["key"]["backend"] == "cpu" and pool.banner["size"] == 1
    deadline = time.monotonic() + 30
    while not pool.runners() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(pool.runners()) == 1


def test_honest_candidates_run_on_pooled_runners(kforge_cache, pool):
    first = evaluate(kforge_cache, TASKS / "relu2.py", HACKS / "honest_relu2", "--pool", str(pool.sock))
    # taken at once after the first: the runner that replaced it may still be starting
    second = evaluate(
        kforge_cache, TASKS / "softmax_rows.py", HACKS / "honest_softmax", "--pool", str(pool.sock)
    )
    for v in (first, second):
        assert v["runner_start"] == "pooled", brief(v)
        assert v["status"] == "ok" and v["correct"] is True and v["flags"] == [], brief(v)
        assert v["reward"] >= 1 and all(c["pass"] for c in v["checks"]), brief(v)
    # the judge removed the transfer directory it took over; the pool made a new runner
    deadline = time.monotonic() + 30
    while len(pool.runners()) != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(pool.runners()) == 1


# Hacks on the runner's own side: forged channel messages, the harness patched in the runner,
# PyTorch compute, a mutated input, a native thread, a kernelbench file.
POOLED_HACKS = ["forge_reply_fd", "forge_reply_garbage", "patch_perf_counter", "torch_fallback_relu",
                "mutate_input", "thread_cpp", "torch_fallback_kb.py"]  # fmt: skip


@pytest.mark.parametrize("candidate", POOLED_HACKS)
def test_hacks_are_caught_on_pooled_runners(kforge_cache, pool, candidate):
    task, _, status, flags = next(c for c in CAUGHT if c[1] == candidate)
    v = evaluate(kforge_cache, TASKS / task, HACKS / candidate, "--pool", str(pool.sock))
    assert v["runner_start"] == "pooled", brief(v)
    assert v["status"] == status and v["reward"] == -1, brief(v)
    assert set(flags) <= set(v["flags"]), brief(v)


def test_a_pooled_runner_reads_no_judge_memory(kforge_cache, pool):
    """The runner's parent is the pool, which holds nothing of any evaluation's; the judge is
    not its parent and is undumpable."""
    v = evaluate(
        kforge_cache, TASKS / "relu2.py", HACKS / "introspect_judge_memory", "--pool", str(pool.sock)
    )
    assert v["runner_start"] == "pooled", brief(v)
    assert v["status"] != "ok" and v["reward"] == -1, brief(v)


def test_a_pooled_runner_that_crashes_is_reported_with_its_signal(kforge_cache, pool):
    v = evaluate(kforge_cache, CASES / "task_small.py", CASES / "segfault", "--pool", str(pool.sock))
    assert v["runner_start"] == "pooled", brief(v)
    assert v["status"] == "runtime_error" and "SIGSEGV" in v["message"], brief(v)


def test_the_pool_kills_the_runner_of_a_judge_that_dies(kforge_cache, pool):
    deadline = time.monotonic() + 60
    while not pool.runners() and time.monotonic() < deadline:
        time.sleep(0.2)
    (pid, xfer), *_ = pool.runners().items()
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_CACHE=str(kforge_cache))
    judge = subprocess.Popen(
        [sys.executable, "-m", "kforge_harness", "evaluate", "--task", str(CASES / "task_small.py"),
         "--candidate", str(CASES / "hangs"), "--pool", str(pool.sock), "--run-timeout", "300", *FAST,
         "--no-jail"],
        cwd=str(HARNESS), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (Path(xfer) / "candidate").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (Path(xfer) / "candidate").exists(), "the judge never took the pooled runner"
        time.sleep(3)  # into the hanging forward
        assert Path(f"/proc/{pid}").exists()
    finally:
        judge.kill()
        judge.wait()
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the runner outlived its judge"
    assert pool.proc.poll() is None


def test_a_pool_of_another_kind_or_none_leaves_the_judge_its_own_runner(kforge_cache, tmp_path):
    other = PoolProc(kforge_cache, tmp_path / "other.sock", "--mem-limit-mib", "8192")
    try:
        v = evaluate(kforge_cache, TASKS / "relu2.py", HACKS / "honest_relu2", "--pool", str(other.sock))
        assert v["runner_start"] == "cold (the pool had no runner)", brief(v)
        assert v["status"] == "ok" and v["flags"] == [], brief(v)
        # with the same limit it is taken
        v = evaluate(
            kforge_cache, TASKS / "relu2.py", HACKS / "honest_relu2", "--pool", str(other.sock),
            "--mem-limit-mib", "8192",
        )  # fmt: skip
        assert v["runner_start"] == "pooled" and v["status"] == "ok", brief(v)
    finally:
        other.stop()
    assert not other.sock.exists() and other.runners() == {}
    v = evaluate(
        kforge_cache, TASKS / "relu2.py", HACKS / "honest_relu2", "--pool", str(tmp_path / "none.sock")
    )
    assert v["runner_start"] == "cold (the pool had no runner)" and v["status"] == "ok", brief(v)


@pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")
def test_pooled_runners_in_the_jail(kforge_cache, tmp_path):
    jailed = PoolProc(kforge_cache, tmp_path / "jail.sock", "--jail", str(JAIL))
    try:
        for task, cand in [("relu2.py", "honest_relu2"), ("relu2.py", "torch_fallback_relu")]:
            v = evaluate(
                kforge_cache, TASKS / task, HACKS / cand, "--pool", str(jailed.sock), "--jail", str(JAIL)
            )
            assert v["runner_start"] == "pooled", brief(v)
            ok = cand.startswith("honest")
            assert v["status"] == ("ok" if ok else "rejected"), brief(v)
            assert (v["flags"] == []) if ok else ("torch_compute" in v["flags"]), brief(v)
    finally:
        jailed.stop()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _new_task_process(pool: PoolProc, before: set[int]) -> int:
    """The task's process the pool started since ``before`` was listed."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(pool.runners("kforge_harness.refrunner")) - before
        if new:
            return new.pop()
        time.sleep(0.2)
    raise AssertionError("the pool started no task's process")


def test_the_pool_keeps_a_tasks_process_stopped_between_evaluations(kforge_cache, pool, tmp_path):
    """An episode evaluates one task many times: the first evaluation starts a task's process
    of its own and the pool starts one for the next; each next one takes it, and between
    evaluations every process of it is stopped (no task code runs while another evaluation may
    hold the device). The verdicts are those of a process of its own."""
    task = tmp_path / "kept.py"
    task.write_text((CASES / "task_small.py").read_text() + "\n# kept between evaluations\n")
    before = set(pool.runners("kforge_harness.refrunner"))
    first = evaluate(kforge_cache, task, CASES / "good", "--pool", str(pool.sock))
    assert first["status"] == "ok" and first["reference"]["start"] == "cold", brief(first)
    pid = _new_task_process(pool, before)
    for _ in range(2):
        v = evaluate(kforge_cache, task, CASES / "good", "--pool", str(pool.sock))
        assert v["status"] == "ok" and v["reference"]["start"] == "pooled", brief(v)
        assert [c["kind"] for c in v["checks"]] == [c["kind"] for c in first["checks"]]
        deadline = time.monotonic() + 10
        while _state(pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _state(pid) == "T", "the task's process runs between evaluations"


def test_a_tasks_process_that_failed_is_not_kept(kforge_cache, pool, tmp_path):
    """A task that raised (or timed out, or sent something malformed) leaves its process unfit:
    the pool kills it instead of keeping it for the next evaluation."""
    task = tmp_path / "fails_in_forward.py"
    source = (CASES / "task_small.py").read_text()
    task.write_text(source.replace("return torch.relu(x) * 2.0", "raise RuntimeError('forward fails')"))
    before = set(pool.runners("kforge_harness.refrunner"))
    evaluate(kforge_cache, task, CASES / "good", "--pool", str(pool.sock))
    pid = _new_task_process(pool, before)
    v = evaluate(kforge_cache, task, CASES / "good", "--pool", str(pool.sock))
    assert v["status"] == "infra_error" and "forward fails" in v["message"], brief(v)
    assert v["reference"]["start"] == "pooled", brief(v)
    deadline = time.monotonic() + 10
    while _state(pid) not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _state(pid) in ("gone", "Z"), "a failed task's process was kept"


@pytest.mark.gpu
@pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")
def test_on_the_gpu_the_pool_keeps_no_tasks_process(kforge_cache, tmp_path):
    """On cuda (in the jail, as the worker runs it) the pool keeps no task's process: a process
    holding a CUDA context does not survive being stopped and resumed. Every evaluation starts
    its own, and its tensors cross as device arenas."""
    jail = ["--jail", str(JAIL), "--gpu", "0"]
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_CACHE=str(kforge_cache))
    sock = tmp_path / "cuda.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kforge_harness", "pool", "--sock", str(sock), "--backend", "cuda", *jail],
        cwd=str(HARNESS),
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and json.loads(proc.stdout.readline())["key"]["backend"] == "cuda"
        task, cand = CASES / "task_small.py", CASES / "cuda_good"
        opts = ["--backend", "cuda", "--no-compile", "--budget", "0.3", "--pool", str(sock), *jail]
        for _ in range(2):
            code, lines, err = run_cli(
                kforge_cache, "evaluate", "--task", str(task), "--candidate", str(cand), *opts
            )
            assert code == 0 and len(lines) == 1, err[-3000:]
            v = json.loads(lines[0])
            assert v["status"] == "ok", brief(v)
            assert v["reference"] == {"transfer": "device", "start": "cold"}, v["reference"]
            time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
