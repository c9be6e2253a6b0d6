"""On the GPU: a candidate that corrupts its CUDA context is a runtime error, and the harness
(and the GPU) carry on: the next evaluation on the same device is correct."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

CASES = Path(__file__).parent / "cases"
TASK = str(CASES / "task_small.py")


def run(harness, cand: str) -> dict:
    code, v, err = harness(
        "evaluate",
        "--task",
        TASK,
        "--candidate",
        str(CASES / cand),
        "--backend",
        "cuda",
        "--no-compile",
        "--budget",
        "0.3",
    )
    assert code == 0, err
    return v


def test_illegal_address_then_recovery(harness):
    v = run(harness, "cuda_illegal_address")
    assert v["status"] == "runtime_error" and v["reward"] == -1
    assert "illegal" in v["message"].lower() or "kernelerror" in v["message"].lower()
    v = run(harness, "cuda_good")
    assert v["status"] == "ok" and v["flags"] == []
