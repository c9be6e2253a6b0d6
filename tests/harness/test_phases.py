"""evaluate --phase build|verify (what the agent's compile and verify tools run) and
profile-reference (its profile before model_new.py exists), on the cpu backend."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = str(ROOT / "examples" / "tasks" / "silu_residual.py")
CAND = str(ROOT / "examples" / "candidates" / "silu_residual" / "cpu")
CASES = ROOT / "tests" / "harness" / "cases"


def test_phase_build_stops_after_the_build(harness):
    code, v, err = harness(
        "evaluate", "--task", TASK, "--candidate", CAND, "--backend", "cpu", "--phase", "build"
    )
    assert code == 0, err
    assert v["status"] == "ok" and v["phase"] == "build" and v["reward"] is None, v
    assert v["correct"] is False and v["checks"] == [] and v["timing"] is None
    assert v["build"]["seconds"] is not None


def test_phase_build_reports_compile_errors(harness):
    code, v, err = harness(
        "evaluate", "--task", str(ROOT / "examples/tasks/sum_dim.py"), "--candidate", str(CASES / "compile_error"),
        "--backend", "cpu", "--phase", "build",
    )  # fmt: skip
    assert code == 0, err
    assert v["status"] == "compile_error" and v["reward"] == -1 and v["build"]["diagnostics"], v


def test_phase_verify_checks_without_timing(harness):
    code, v, err = harness(
        "evaluate", "--task", TASK, "--candidate", CAND, "--backend", "cpu", "--phase", "verify"
    )
    assert code == 0, err
    assert v["status"] == "ok" and v["correct"] is True and v["reward"] is None, v
    assert len(v["checks"]) >= 5 and all(c["pass"] is not False for c in v["checks"])
    assert v["timing"] is None and v["speedup_vs_eager"] is None


def test_profile_reference_gives_baselines_and_the_graph(harness):
    code, v, err = harness(
        "profile-reference", "--task", TASK, "--backend", "cpu", "--no-compile", "--budget", "0.2"
    )
    assert code == 0, err
    assert v["baseline"]["eager"]["median_ms"] > 0 and v["baseline"]["compile_error"] == "not requested"
    assert v["graph"]["inputs"][0]["shape"] == [2048, 1024]
