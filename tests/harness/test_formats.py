"""The three candidate formats give the same verdict for the same kernel (cpu backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

CASES = Path(__file__).parent / "cases"
TASK = str(CASES / "task_small.py")


@pytest.mark.slow
@pytest.mark.parametrize(
    "candidate,fmt",
    [("good", "native"), ("kb/relu2_load_inline.py", "kernelbench"), ("cuda_agent", "cuda-agent")],
)
def test_format_verdicts_agree(harness, candidate, fmt):
    code, v, err = harness(
        "evaluate",
        "--task",
        TASK,
        "--candidate",
        str(CASES / candidate),
        "--backend",
        "cpu",
        "--no-compile",
        "--budget",
        "0.3",
    )
    assert code == 0, err
    assert v["format"] == fmt
    assert v["status"] == "ok", v["message"]
    assert v["flags"] == [] and v["reward"] >= 1
    assert all(c["pass"] for c in v["checks"] if c.get("pass") is not None)


def test_native_build_is_cached(harness):
    args = [
        "evaluate",
        "--task",
        TASK,
        "--candidate",
        str(CASES / "good"),
        "--backend",
        "cpu",
        "--no-compile",
        "--budget",
        "0.2",
    ]
    harness(*args)
    code, v, _ = harness(*args)
    assert code == 0 and v["build"]["cached"] is True
