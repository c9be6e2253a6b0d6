"""Every example candidate is correct and never flagged: on the CPU here, on CUDA on the GPU host."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The tasks that come with hand-written candidates; the others (no examples/candidates/NAME/)
# are left to the expert policy, and test_example_tasks.py checks them all as tasks.
NAMES = sorted(
    p.stem
    for p in (ROOT / "examples" / "tasks").glob("*.py")
    if (ROOT / "examples" / "candidates" / p.stem).is_dir()
)


def _check(harness, name: str, backend: str, *extra: str) -> dict:
    task = ROOT / "examples" / "tasks" / f"{name}.py"
    cand = ROOT / "examples" / "candidates" / name / backend
    code, v, err = harness(
        "evaluate", "--task", str(task), "--candidate", str(cand), "--backend", backend, *extra
    )
    assert code == 0, err
    assert v["status"] == "ok", (v["message"], v.get("checks"), v.get("runner_log"))
    assert v["flags"] == [], v["flag_details"]
    assert v["reward"] >= 1 and v["correct"] is True
    checked = [c for c in v["checks"] if c.get("pass") is not None]
    assert len(checked) >= 3 and all(c["pass"] for c in checked)
    t = v["timing"]
    assert t["candidate"]["median_ms"] > 0 and t["eager"]["median_ms"] > 0
    return v


def test_there_are_a_dozen_examples():
    assert len(NAMES) >= 12
    for folder in (ROOT / "examples" / "candidates").iterdir():
        if folder.is_dir() and not folder.name.startswith((".", "_")):
            assert folder.name in NAMES, f"examples/candidates/{folder.name} has no task in examples/tasks/"
    for name in NAMES:
        for backend in ("cuda", "cpu"):
            assert (ROOT / "examples" / "candidates" / name / backend / "model_new.py").is_file(), (
                name,
                backend,
            )


@pytest.mark.parametrize("name", NAMES)
def test_cpu_example_in_jail(harness, name):
    """Through kforge-jail (g++ in the build profile, the runner and the task's process in run),
    every example passes as it does without it (test_cpu_example)."""
    jail = ROOT / "build" / "kforge-jail"
    if not jail.exists():
        pytest.skip("build/kforge-jail is not built")
    _check(harness, name, "cpu", "--no-compile", "--budget", "0.3", "--jail", str(jail))


@pytest.mark.parametrize("name", NAMES)
def test_cpu_example(harness, name):
    _check(harness, name, "cpu", "--no-compile", "--budget", "0.3")


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_example(harness, name):
    v = _check(harness, name, "cuda", "--budget", "1.0", "--no-compile")
    assert v["env"]["gpu"] and v["timing"]["method"] == "judge_window"
    assert v["timing"]["verified_calls"] >= v["timing"]["candidate"]["trials"]  # every timed call checked
    assert v["transfer"] == "device", v.get("transfer")  # tensors crossed as device arenas
    assert v["reference"]["transfer"] == "device", v["reference"]  # the task's process's too
    assert v["env"].get("guard") == "native", v["env"].get("guard_note")  # the C++ guard loaded here


JAILED_CUDA = ["softmax_rows", "matmul", "conv_bn_relu"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", JAILED_CUDA)
def test_cuda_example_in_jail(harness, name):
    """Through kforge-jail: nvcc in the build profile, the runner in run with GPU 0's nodes alone."""
    jail = ROOT / "build" / "kforge-jail"
    if not jail.exists():
        pytest.skip("build/kforge-jail is not built")
    v = _check(harness, name, "cuda", "--budget", "0.5", "--no-compile", "--jail", str(jail), "--gpu", "0")
    assert v["env"]["gpu"]
    assert v["transfer"] == "device", v.get("transfer")  # the arenas' descriptors crossed the jail
    assert v["reference"]["transfer"] == "device", v["reference"]  # from the task's jail too
    assert v["env"].get("guard") == "native", v["env"].get("guard_note")
