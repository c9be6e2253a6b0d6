"""check-task: what makes a task unfit, each reason on its own task."""

from __future__ import annotations

from pathlib import Path

CASES = Path(__file__).parent / "cases"


def check(harness, task: str, *extra: str):
    code, v, err = harness("check-task", "--task", str(CASES / task), "--backend", "cpu", *extra)
    assert code == 0, err
    return v


def test_fit_task(harness):
    v = check(harness, "task_small.py", "--min-ms", "0")
    assert v["fit"] is True, v["reasons"]
    assert v["reasons"] == [] and v["null_candidates_passing"] == [] and v["eager_ms"] > 0


def test_runtime_window(harness):
    v = check(harness, "task_small.py", "--min-ms", "50", "--max-ms", "100")
    assert v["fit"] is False
    assert any("outside the window" in r for r in v["reasons"])


def test_not_deterministic(harness):
    v = check(harness, "task_random.py", "--min-ms", "0")
    assert v["fit"] is False and any("not deterministic" in r for r in v["reasons"])


def test_output_independent_of_inputs(harness):
    v = check(harness, "task_constant.py", "--min-ms", "0")
    assert v["fit"] is False and any("does not depend on the inputs" in r for r in v["reasons"])


def test_unloadable_task(harness):
    v = check(harness, "task_raises.py")
    assert v["fit"] is False and "boom at import" in v["reasons"][0]
