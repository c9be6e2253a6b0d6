"""Bad tasks and bad candidates get a clear verdict, and the harness survives each of them."""

from __future__ import annotations

from pathlib import Path

import pytest

CASES = Path(__file__).parent / "cases"
TASK = str(CASES / "task_small.py")
FAST = ["--backend", "cpu", "--no-compile", "--budget", "0.3"]


def evaluate(harness, candidate: str, task: str = TASK, *extra: str):
    code, verdict, err = harness(
        "evaluate", "--task", task, "--candidate", str(CASES / candidate), *FAST, *extra
    )
    assert code == 0, err
    assert verdict is not None, err
    return verdict


def test_good_candidate_is_ok(harness):
    v = evaluate(harness, "good")
    assert v["status"] == "ok", v
    assert v["reward"] >= 1 and v["correct"] is True and v["flags"] == []
    assert v["speedup_vs_eager"] > 0 and v["timing"]["candidate"]["trials"] >= 10


def test_a_check_skipped_for_a_reference_that_overflows(harness):
    """The heavy_tailed check is skipped (the reference is infinite there); the check after it
    still reads the candidate's outputs (make test-gpu runs this through device arenas, where
    the skipped outputs' arena must be taken off the channel)."""
    v = evaluate(harness, "good", str(CASES / "task_overflow_tail.py"))
    assert v["status"] == "ok" and v["correct"] is True, v
    kinds = {c["kind"]: c for c in v["checks"]}
    assert kinds["heavy_tailed"]["pass"] is None and "not finite" in kinds["heavy_tailed"]["skipped"]
    assert kinds["shape:0"]["pass"] is True


@pytest.mark.parametrize(
    "task,needle", [("task_syntax.py", "does not parse"), ("task_raises.py", "boom at import")]
)
def test_broken_task(harness, task, needle):
    v = evaluate(harness, "good", str(CASES / task))
    assert v["status"] == "infra_error" and v["reward"] == -1
    assert needle in v["message"]


def test_missing_task_file(harness):
    v = evaluate(harness, "good", str(CASES / "no_such_task.py"))
    assert v["status"] == "infra_error" and "cannot read task" in v["message"]


def test_candidate_syntax_error(harness):
    v = evaluate(harness, "syntax_error")
    assert v["status"] == "compile_error" and "does not parse" in v["message"]


def test_kernel_compile_error_has_diagnostics(harness):
    v = evaluate(harness, "compile_error")
    assert v["status"] == "compile_error" and v["reward"] == -1
    assert "undefined_thing" in v["build"]["diagnostics"]


def test_forward_raises(harness):
    v = evaluate(harness, "raises")
    assert v["status"] == "runtime_error"
    assert "candidate failure in forward" in v["message"]


def test_forward_hangs_times_out(harness):
    v = evaluate(harness, "hangs", TASK, "--run-timeout", "5")
    assert v["status"] == "timeout" and v["reward"] == -1


def test_import_hangs_times_out(harness):
    v = evaluate(harness, "hangs_at_import", TASK, "--init-timeout", "5")
    assert v["status"] == "timeout"


def test_memory_exhaustion(harness):
    v = evaluate(harness, "memory_hog", TASK, "--mem-limit-mib", "3072")
    assert v["status"] == "runtime_error" and "MemoryError" in v["message"]


def test_segfault(harness):
    v = evaluate(harness, "segfault")
    assert v["status"] == "runtime_error" and "SIGSEGV" in v["message"]


def test_megabytes_of_output(harness):
    v = evaluate(harness, "loud")
    assert v["status"] == "ok", v
    assert len(v["runner_log"]) <= 4000 and "spam" in v["runner_log"]


def test_wrong_number_of_outputs(harness):
    v = evaluate(harness, "two_outputs")
    assert v["status"] == "incorrect"
    assert "expected 1 outputs, got 2" in v["checks"][0]["reason"]


def test_no_modelnew(harness):
    v = evaluate(harness, "no_modelnew")
    assert v["status"] == "runtime_error" and "ModelNew" in v["message"]


def test_missing_candidate(harness):
    v = evaluate(harness, "does_not_exist")
    assert v["status"] == "compile_error" and "no such candidate" in v["message"]


def test_usage_error_exits_nonzero(harness):
    code, _, err = harness("evaluate", "--task", TASK)
    assert code == 2 and "--candidate" in err
