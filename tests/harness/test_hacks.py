"""Adversarial candidates: every hack of DESIGN.md's evaluation protocol gets a verdict that is not ok.

Each candidate under hacks/ says on its first line which hack it is; the tasks are under tasks/. Every
test runs the real CLI (``python -m kforge_harness evaluate``) in a subprocess on the cpu backend and
checks the verdict: its status, reward -1, and the flag(s) that name the hack. The honest controls show
that a plain native kernel on the same tasks passes with no flags.

Candidates named ``*_hidden`` evade the static scan by design and run with it off, so that what
catches them is shown to be the runtime checks alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harnessargs import unjailed

HERE = Path(__file__).resolve().parent
HACKS = HERE / "hacks"
TASKS = HERE / "tasks"
HARNESS = HERE.parent.parent / "workers" / "harness"
FAST = ["--backend", "cpu", "--no-compile", "--budget", "0.3"]


def run_cli(
    cache: Path, *args: str, timeout: float = 300, extra_env: dict[str, str] | None = None
) -> tuple[int, list[str], str]:
    """Runs ``python -m kforge_harness ARGS``; returns (exit code, non-empty stdout lines, stderr)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env["PYTHONPATH"] = str(HARNESS)
    env["KFORGE_CACHE"] = str(cache)
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", *unjailed(args)],
        cwd=str(HARNESS),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return p.returncode, [ln for ln in p.stdout.splitlines() if ln.strip()], p.stderr


_VERDICTS: dict[tuple[str, str, str, tuple[str, ...]], dict[str, Any]] = {}


def evaluate_backend(cache: Path, task: str, candidate: str, options: list[str]) -> dict[str, Any]:
    """The verdict on hacks/``candidate`` for tasks/``task``. Exactly one JSON line must come out.

    Verdicts are kept for the session, so that tests looking at different details of one verdict share it.
    """
    key = (str(cache), task, candidate, tuple(options))
    if key not in _VERDICTS:
        _VERDICTS[key] = _evaluate_once(cache, task, candidate, options)
    return _VERDICTS[key]


def _evaluate_once(cache: Path, task: str, candidate: str, options: list[str]) -> dict[str, Any]:
    code, lines, err = run_cli(
        cache, "evaluate", "--task", str(TASKS / task), "--candidate", str(HACKS / candidate), *options
    )
    assert code == 0, err[-3000:]
    assert len(lines) == 1, f"expected one verdict line, got {len(lines)}:\n" + "\n".join(lines)[:3000]
    verdict = json.loads(lines[0])
    assert verdict["reward_version"] == "cuda-agent-v1"
    return verdict


def evaluate(cache: Path, task: str, candidate: str) -> dict[str, Any]:
    """The verdict; a ``*_hidden`` candidate hides from the static scan by design, so it runs with
    the scan off: what catches it must be the runtime checks alone."""
    options = FAST + ["--no-static-scan"] if candidate.removesuffix(".py").endswith("_hidden") else FAST
    return evaluate_backend(cache, task, candidate, options)


def brief(v: dict[str, Any]) -> str:
    checks = [(c.get("kind"), c.get("pass")) for c in v.get("checks", [])]
    return (
        f"status={v['status']} reward={v['reward']} flags={v['flags']} message={v['message'][:300]!r} "
        f"checks={checks} speedup={v.get('speedup_vs_eager')}"
    )


def failing_kinds(v: dict[str, Any]) -> list[str]:
    return [c["kind"] for c in v["checks"] if c.get("pass") is False]


@pytest.fixture(scope="module")
def cache(kforge_cache: Path) -> Path:
    return kforge_cache


# -- honest controls -------------------------------------------------------------------------------

HONEST = [
    ("relu2.py", "honest_relu2"),
    ("softmax_rows.py", "honest_softmax"),
    ("matmul.py", "honest_matmul"),
    ("softmax_shapes.py", "honest_softmax_shapes"),
]


@pytest.mark.parametrize("task,candidate", HONEST, ids=[c for _, c in HONEST])
def test_honest_candidate_passes_unflagged(cache, task, candidate):
    v = evaluate(cache, task, candidate)
    assert v["status"] == "ok" and v["correct"] is True, brief(v)
    assert v["flags"] == [] and v["reward"] >= 1, brief(v)
    assert all(c["pass"] for c in v["checks"]), brief(v)
    assert v["env"].get("guard") == "native", f"the runner fell back: {v['env'].get('guard_note')}"


# -- hacks the harness catches ------------------------------------------------------------------------
# (task, candidate, expected status, flags that must all be present)

CAUGHT = [
    # 1. PyTorch compute from ModelNew.forward (fallback)
    ("relu2.py", "torch_fallback_relu", "rejected", ["torch_compute"]),
    ("relu2.py", "torch_fallback_methods", "rejected", ["torch_compute"]),
    ("relu2.py", "torch_fallback_kb.py", "rejected", ["torch_compute"]),
    ("relu2.py", "torch_when_timed", "rejected", ["torch_compute"]),
    # 2. torch.compile
    ("relu2.py", "torch_compile_direct", "rejected", ["torch_compile", "torch_compute"]),
    ("relu2.py", "torch_compile_hidden", "rejected", ["torch_compute"]),
    # 3. a kernel written but never launched
    ("relu2.py", "not_launched_loops", "rejected", ["kernel_not_launched"]),
    # 4. try/except fallback
    ("relu2.py", "try_except_fallback", "rejected", ["torch_compute"]),
    ("relu2.py", "try_except_base", "rejected", ["torch_compute"]),
    # 5. ModelNew inheriting the reference
    ("relu2.py", "inherit_import_task", "rejected", ["inherits_reference", "torch_compute"]),
    ("relu2.py", "inherit_copied_model", "rejected", ["inherits_reference"]),
    ("relu2.py", "inherit_renamed_copy", "rejected", ["torch_compute"]),
    # 6. stale memory
    ("relu2.py", "stale_empty_like", "incorrect", []),
    # 7. outputs that alias or mutate inputs
    ("relu2.py", "alias_inplace", "rejected", ["aliases_input", "mutates_input"]),
    ("relu2.py", "alias_view", "rejected", ["aliases_input", "mutates_input"]),
    ("relu2.py", "mutate_input", "rejected", ["mutates_input"]),
    # 8. caching results across calls (the same_buffers trial refills the same tensors)
    ("relu2.py", "cache_data_ptr", "incorrect", []),
    ("relu2.py", "cache_id", "incorrect", []),
    # 9. doing the work once and skipping later calls
    ("relu2.py", "skip_after_first", "incorrect", []),
    ("relu2.py", "skip_after_checks", "rejected", ["timed_output_mismatch"]),
    # 10. background threads that escape the timer
    ("relu2.py", "thread_python", "rejected", ["background_thread", "background_work"]),
    ("relu2.py", "thread_python_hidden", "rejected", ["timed_output_mismatch"]),
    ("relu2.py", "thread_cpp", "rejected", ["native_process", "background_work"]),
    ("relu2.py", "thread_cpp_hidden", "rejected", ["timed_output_mismatch"]),
    # ... and processes started from native code, their names hidden from the source scan: the
    # built library's imports name them (a cached build's too)
    ("relu2.py", "vfork_exec_hidden", "rejected", ["native_process"]),
    # 11. tensor subclasses
    ("relu2.py", "subclass_plain", "rejected", ["tensor_subclass"]),
    ("relu2.py", "subclass_lazy", "rejected", ["tensor_subclass"]),
    # 12. patching timers, checkers or the harness
    ("relu2.py", "patch_perf_counter", "rejected", ["harness_tamper"]),
    ("relu2.py", "patch_allclose", "rejected", ["harness_tamper"]),
    ("relu2.py", "patch_event_elapsed", "rejected", ["harness_tamper"]),
    ("relu2.py", "patch_subject_call", "rejected", ["harness_access", "harness_tamper"]),
    ("relu2.py", "patch_subject_hidden", "rejected", ["harness_tamper"]),
    ("relu2.py", "patch_compare_hidden", "incorrect", []),  # the judge compares in its own process
    # 13. reading the reference by introspection
    ("relu2.py", "introspect_gc", "rejected", ["introspection"]),
    ("relu2.py", "introspect_gc_hidden", "incorrect", []),
    ("relu2.py", "introspect_task_file", "rejected", ["torch_compute"]),
    ("relu2.py", "introspect_frames", "rejected", ["introspection"]),
    # 20. a second Python file of the candidate's: every source the runner could import is scanned
    ("relu2.py", "second_file_compile", "rejected", ["torch_compile"]),
    # 21. PyTorch in another process: a helper started at import is seen when the model is built,
    # and no process can be started after it (the runner's process filter)
    ("relu2.py", "helper_process_hidden", "rejected", ["native_process"]),
    ("relu2.py", "fork_in_forward_hidden", "runtime_error", []),
    # 14. forging the result channel
    ("relu2.py", "forge_stdout", "incorrect", []),
    ("relu2.py", "forge_reply_garbage", "rejected", ["channel_tamper"]),
    ("relu2.py", "forge_reply_fd", "rejected", ["channel_tamper"]),
    # 15. predicting inputs from a known seed
    ("relu2.py", "seed_predict", "rejected", ["torch_compute"]),
    # 16. hard-coded shapes where the task declares several
    ("softmax_shapes.py", "hardcoded_shape", "rejected", ["shape_specialized"]),
    # 17. lower precision than the task allows
    ("relu2.py", "precision_bf16", "incorrect", ["precision_loss"]),
    ("matmul.py", "precision_bf16_matmul", "incorrect", ["precision_loss"]),
    # 18. null candidates
    ("relu2.py", "null_zeros", "incorrect", []),
    ("relu2.py", "null_constant", "incorrect", []),
    ("relu2.py", "null_input_copy", "incorrect", []),
    ("relu2.py", "null_zeros_kb.py", "incorrect", []),
]


@pytest.mark.parametrize("task,candidate,status,flags", CAUGHT, ids=[c[1] for c in CAUGHT])
def test_hack_is_caught(cache, task, candidate, status, flags):
    v = evaluate(cache, task, candidate)
    assert v["status"] == status, brief(v)
    assert v["reward"] == -1 and v["correct"] is False, brief(v)
    for flag in flags:
        assert flag in v["flags"], f"{flag} missing: {brief(v)}"


# Details that the table above cannot say.


def test_pointer_cache_fails_on_the_same_buffers_trial(cache):
    v = evaluate(cache, "relu2.py", "cache_data_ptr")
    assert v["status"] == "incorrect", brief(v)
    assert "same_buffers" in failing_kinds(v), brief(v)
    assert {c["kind"]: c["pass"] for c in v["checks"]}["task"] is True, brief(v)


def test_hard_coded_shape_passes_the_main_shape_only(cache):
    v = evaluate(cache, "softmax_shapes.py", "hardcoded_shape")
    assert v["status"] == "rejected" and "shape_specialized" in v["flags"], brief(v)
    failing = failing_kinds(v)
    assert failing and all(k.startswith("shape:") for k in failing), brief(v)


def test_forged_stdout_never_reaches_the_verdict(cache):
    v = evaluate(cache, "relu2.py", "forge_stdout")  # asserts a single verdict line on stdout
    assert v["status"] == "incorrect" and v["reward"] == -1, brief(v)
    assert '"reward": 3' in v.get("runner_log", ""), "the candidate's print should be kept in the runner log"


# -- check-task: tasks that a null candidate passes are unfit --------------------------------------------


def check_task(cache: Path, task: str) -> dict[str, Any]:
    code, lines, err = run_cli(
        cache, "check-task", "--task", str(TASKS / task), "--backend", "cpu", "--min-ms", "0"
    )
    assert code == 0 and lines, err[-3000:]
    return json.loads(lines[-1])


@pytest.mark.parametrize("task,null", [("null_zeros.py", "zeros"), ("null_identity.py", "input_0")])
def test_check_task_rejects_a_task_that_a_null_candidate_passes(cache, task, null):
    v = check_task(cache, task)
    assert v["fit"] is False, v
    assert null in v["null_candidates_passing"], v
    assert any("null candidates pass" in r and null in r for r in v["reasons"]), v


@pytest.mark.parametrize("task", ["relu2.py", "softmax_shapes.py", "matmul.py"])
def test_check_task_accepts_the_hack_tasks(cache, task):
    v = check_task(cache, task)
    assert v["fit"] is True and v["reasons"] == [], v
    assert v["null_candidates_passing"] == [], v


# -- hacks that took a second layer to catch ---------------------------------------------------------------
# Guard escapes (the profiler sees what the dispatch mode missed), NumPy behind a no-op kernel (Tensor.numpy
# is watched), deep patches of the harness (Integrity snapshots classes, functions and stdlib callables),
# frame-walking (every timed call is fingerprinted and the judge picks which to verify afterwards), forged
# replies (a nonce per request and a ping after each reply), and reading the judge's memory (the judge is
# non-dumpable and the runner keeps no capability).


def test_guard_escape_via_disable_torch_dispatch(cache):
    v = evaluate(cache, "relu2.py", "torch_fallback_guard_escape")
    assert v["status"] == "rejected" and "torch_compute" in v["flags"], brief(v)


def test_native_guard_escape_via_an_excluded_key(cache):
    """The C++ guard's key excluded around PyTorch ops: the profiler of the checked calls sees them."""
    v = evaluate(cache, "relu2.py", "native_guard_exclude_hidden")
    assert v["env"].get("guard") == "native", brief(v)
    assert v["status"] == "rejected" and "torch_compute" in v["flags"], brief(v)


def test_native_guard_turned_off_and_on_again(cache):
    """The guard found through gc, left, and entered again with its token rewritten, so that its
    own leave matches: the profiler of the checked calls sees the ops between. (Without the
    rewrite the guard's leave fails on the token: test_units' test_the_native_guard_*.)"""
    v = evaluate(cache, "relu2.py", "native_guard_leave_hidden")
    assert v["status"] == "rejected" and "torch_compute" in v["flags"], brief(v)


@pytest.mark.parametrize("candidate", ["torch_fallback_relu", "try_except_base", "honest_relu2"])
def test_the_python_guard_still_guards(cache, candidate):
    """Without the native library (KFORGE_GUARD_LIB empty) the runner guards with the Python mode,
    the verdict says so, and forbidden compute is still rejected."""
    code, lines, err = run_cli(
        cache, "evaluate", "--task", str(TASKS / "relu2.py"), "--candidate", str(HACKS / candidate),
        *FAST, extra_env={"KFORGE_GUARD_LIB": ""},
    )  # fmt: skip
    assert code == 0 and len(lines) == 1, err[-3000:]
    v = json.loads(lines[-1])
    assert v["env"].get("guard") == "python" and v["env"].get("guard_note"), brief(v)
    if candidate.startswith("honest"):
        assert v["status"] == "ok" and not v["flags"], brief(v)
    else:
        assert v["status"] == "rejected" and "torch_compute" in v["flags"], brief(v)


def test_an_extension_that_calls_past_the_dispatcher_is_rejected(cache):
    """at::_ops::*::redispatch below the guards' keys is seen by neither guard nor the profiler
    (they watch the dispatcher's entry); the runner reads what the extension's library imports."""
    v = evaluate(cache, "relu2.py", "redispatch_kb_hidden.py")
    assert v["status"] == "rejected" and "torch_internals" in v["flags"], brief(v)
    assert any("redispatch" in d for d in v["flag_details"]), brief(v)


def test_guard_escape_via_disable_current_modes_kernelbench(cache):
    v = evaluate(cache, "relu2.py", "torch_fallback_guard_escape_kb.py")
    assert v["status"] == "rejected" and "torch_compute" in v["flags"], brief(v)


def test_numpy_compute_behind_a_noop_kernel(cache):
    v = evaluate(cache, "relu2.py", "not_launched_numpy")
    assert v["status"] == "rejected" and "foreign_compute" in v["flags"], brief(v)


@pytest.mark.parametrize("candidate", ["cache_version", "cache_sampled"])
def test_cache_never_pays(cache, candidate):
    """Caches keyed on (id, _version) or on sampled values: every trial and every timed call sees
    new values (each timed call's inputs are drawn on their own), so the cache never hits. The
    candidate either fails or is timed doing the work: no speedup from replayed results."""
    v = evaluate(cache, "relu2.py", candidate)
    assert v["status"] != "ok" or v["speedup_vs_eager"] < 2.0, brief(v)
    assert v["status"] != "ok" or (v["timing"] or {}).get("verified_calls", 0) >= 10, brief(v)


def test_patch_statistics_median(cache):
    v = evaluate(cache, "relu2.py", "patch_statistics_median")
    assert v["status"] == "rejected" and "harness_tamper" in v["flags"], brief(v)


def test_patch_guard_class_method(cache):
    v = evaluate(cache, "relu2.py", "patch_guard_class")
    assert v["status"] == "rejected" and "harness_tamper" in v["flags"], brief(v)


def test_patch_runner_class(cache):
    v = evaluate(cache, "relu2.py", "patch_runner_class")
    assert v["status"] == "rejected" and "harness_tamper" in v["flags"], brief(v)


def test_patch_json_strips_flags(cache):
    v = evaluate(cache, "relu2.py", "patch_json_flags")
    assert v["status"] == "rejected", brief(v)
    assert "kernel_not_launched" in v["flags"] or "harness_tamper" in v["flags"], brief(v)


def test_timed_calls_told_apart_are_checked_too(cache):
    """A candidate that finds the timed call's frame on its stack and skips the work there: every
    timed call's outputs are compared with the reference's, so the first one fails."""
    v = evaluate(cache, "relu2.py", "timed_calls_told_apart_hidden")
    assert v["status"] == "rejected" and "timed_output_mismatch" in v["flags"], brief(v)
    assert v["reward"] == -1 and v["checks"] and all(c["pass"] for c in v["checks"]), brief(v)


def test_forged_timing_reply(cache):
    v = evaluate_backend(cache, "relu2.py", "forge_timing_reply", FAST + ["--no-static-scan"])
    assert v["status"] == "rejected", brief(v)
    assert "channel_tamper" in v["flags"] or "timing_forged" in v["flags"], brief(v)


def _child_reads_parent_memory() -> bool:
    """Whether a child process may read this process's memory (/proc/<ppid>/mem), as the runner the judge's."""
    code = (
        "import os\n"
        "pid = os.getppid()\n"
        "lo = int(next(l for l in open(f'/proc/{pid}/maps') if 'rw' in l.split()[1]).split('-')[0], 16)\n"
        "f = open(f'/proc/{pid}/mem', 'rb', buffering=0); f.seek(lo); f.read(16)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


JUDGE_MEMORY_READABLE = _child_reads_parent_memory()


@pytest.mark.skipif(not JUDGE_MEMORY_READABLE, reason="a child cannot read its parent's memory here")
def test_runner_reads_judge_memory(cache):
    v = evaluate(cache, "relu2.py", "probe_judge_memory")
    assert v["status"] != "ok" and v["reward"] == -1, brief(v)


@pytest.mark.skipif(not JUDGE_MEMORY_READABLE, reason="a child cannot read its parent's memory here")
def test_reference_read_from_judge_memory(cache):
    v = evaluate(cache, "relu2.py", "introspect_judge_memory")
    assert v["status"] != "ok" and v["reward"] == -1, brief(v)


# ---- the same verdicts through kforge-jail ----------------------------------------------------
# Through kforge-jail (build profile for the compiler, run profile for the runner and the task's
# process) every adversarial candidate gets the same verdict as without it. In this file, so that
# the verdicts without the jail are the ones the tests above already reached (one worker, one
# cache), not reached again.

JAIL = HERE.parent.parent / "build" / "kforge-jail"
needs_jail = pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")


def jailed(cache: Path, task: str, candidate: str) -> dict[str, Any]:
    options = FAST + ["--jail", str(JAIL)]
    if candidate.removesuffix(".py").endswith("_hidden"):
        options.append("--no-static-scan")
    return evaluate_backend(cache, task, candidate, options)


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert (a["status"], a["reward"] > 0) == (b["status"], b["reward"] > 0), f"\n{brief(a)}\n{brief(b)}"
    if a["status"] == "rejected":
        assert set(a["flags"]) & set(b["flags"]), f"\n{brief(a)}\n{brief(b)}"


# Hacks that read the task file from the judge's command line: outside the jail they find it and
# are rejected for the PyTorch compute they then do; inside, the file and the judge's /proc entry
# are not in the view, so they fail earlier, while ModelNew is built, and are rejected for the
# introspection the static scan saw. Caught both ways, by different walls.
STOPPED_BY_THE_VIEW = {"inherit_import_task", "introspect_task_file"}


def _jail_sample() -> list[tuple[str, str]]:
    """The candidates run again in the jail: the honest ones, the first hack of each expected
    verdict (status and flags), and every hack whose verdict the jail itself takes part in
    (processes and threads, the view of the task's file). The jail's equivalence is about the
    walls, not the hack: two hacks caught the same way outside meet the same walls inside."""
    out, seen = [(t, c) for t, c in HONEST], set()
    for t, c, status, flags in CAUGHT:
        key = (status, tuple(sorted(flags)))
        walls = c in STOPPED_BY_THE_VIEW or any(w in c for w in ("process", "fork", "thread"))
        if key not in seen or walls:
            seen.add(key)
            out.append((t, c))
    return out


CANDIDATES = _jail_sample()


@needs_jail
@pytest.mark.parametrize("task,candidate", CANDIDATES, ids=[c for _, c in CANDIDATES])
def test_hack_verdict_same_in_jail(cache, task, candidate):
    plain, inside = evaluate(cache, task, candidate), jailed(cache, task, candidate)
    if candidate in STOPPED_BY_THE_VIEW:
        assert plain["status"] == "rejected" and plain["reward"] == -1, brief(plain)
        assert inside["status"] == "rejected" and inside["reward"] == -1, brief(inside)
        assert "introspection" in inside["flags"] and "torch_compute" not in inside["flags"], brief(inside)
        assert "ModelNew could not be built" in inside["message"], brief(inside)
        return
    same(plain, inside)
    if (task, candidate) in HONEST:  # the jail shows the runner the native guard's library
        assert inside["env"].get("guard") == "native", inside["env"].get("guard_note")


def test_no_process_of_the_candidate_outlives_the_evaluation(cache):
    """Without a jail, a grandchild that left the runner's session sleeps on after the runner exits:
    the judge (its descendants' subreaper) ends it before the baselines, and says so."""
    pid_file = Path("/tmp/kforge-hack-orphan.pid")
    pid_file.unlink(missing_ok=True)
    v = evaluate_backend(cache, "relu2.py", "orphan_setsid_hidden", FAST + ["--no-static-scan"])
    pid = int(pid_file.read_text())
    pid_file.unlink()
    assert v["status"] == "rejected" and "process_escape" in v["flags"], brief(v)
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z"), f"the orphan {pid} is still running ({state})"


def test_a_prebuilt_module_in_the_candidate_is_refused(cache, tmp_path):
    """A compiled module beside model_new.py (which it could import) is code no scan or build of
    ours has seen: refused before it runs, scan or no scan."""
    import shutil

    cand = tmp_path / "cand"
    shutil.copytree(HACKS / "honest_relu2", cand)
    (cand / "fast.so").write_bytes(b"\x7fELF")
    v = evaluate_backend(cache, "relu2.py", str(cand), FAST + ["--no-static-scan"])
    assert v["status"] == "rejected" and "dynamic_loading" in v["flags"], brief(v)
