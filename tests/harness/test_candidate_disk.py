"""A jail's writes are bounded by a quota (--disk-mib): a candidate that fills its working
folder is stopped with a verdict that says so, and nothing of it stays on the host; a build
under the same quota is unaffected."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JAIL = ROOT / "build" / "kforge-jail"
CASES = Path(__file__).parent / "cases"
FAST = ["--backend", "cpu", "--no-compile", "--budget", "0.3"]

pytestmark = pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")


def test_a_candidate_filling_its_folder_is_stopped_and_removed(harness, kforge_cache):
    before = set((kforge_cache / "xfer").glob("*")) if (kforge_cache / "xfer").is_dir() else set()
    code, v, err = harness(
        "evaluate",
        "--task",
        str(CASES / "task_small.py"),
        "--candidate",
        str(CASES / "disk_filler"),
        *FAST,
        "--jail",
        str(JAIL),
        "--disk-mib",
        "96",
    )
    assert code == 0, err
    assert v["status"] == "runtime_error" and v["reward"] == -1, v
    assert "limit disk" in v["message"] and "disk quota" in v["message"], v["message"]
    # the transfer directories (the candidate's and the task's) are gone with the evaluation
    after = set((kforge_cache / "xfer").glob("*"))
    assert after <= before, after - before


def test_an_honest_candidate_passes_under_a_small_quota(harness):
    code, v, err = harness(
        "evaluate",
        "--task",
        str(CASES / "task_small.py"),
        "--candidate",
        str(CASES / "good"),
        *FAST,
        "--jail",
        str(JAIL),
        "--disk-mib",
        "96",
    )
    assert code == 0, err
    assert v["status"] == "ok", v
