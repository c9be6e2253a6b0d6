"""The three candidate formats give the same verdict for the same kernel (cpu backend)."""

from __future__ import annotations

import shutil
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


JAIL = Path(__file__).resolve().parents[2] / "build" / "kforge-jail"


@pytest.mark.parametrize("jobs,jail", [("1", False), ("3", False), ("3", True)])
def test_several_sources_build_at_once(harness, tmp_path, jobs, jail):
    """Sources of a candidate compile to objects KFORGE_BUILD_JOBS at a time, then link (a
    header beside them included); with one job, in one call. A source that does not compile
    fails the build with its own diagnostics either way."""
    cand = tmp_path / "cand"
    shutil.copytree(CASES / "split_sources", cand)
    for f in (cand / "kernels").iterdir():  # not the other cases' build, cached
        f.write_text(f"// jobs {jobs}, jail {jail}\n{f.read_text()}")
    args = ["evaluate", "--task", TASK, "--candidate", str(cand), "--backend", "cpu", "--no-compile"]
    if jail:  # each compiler call in its own jail of the build profile
        assert JAIL.exists(), "make build"
        args += ["--jail", str(JAIL)]
    code, v, err = harness(*args, "--budget", "0.2", env={"KFORGE_BUILD_JOBS": jobs})
    assert code == 0 and v["status"] == "ok" and v["correct"], (err, v)
    objects = [a for a in v["build"]["command"].split() if a.endswith(".o")]
    assert len(objects) == (3 if jobs == "3" else 0), v["build"]["command"]
    (cand / "kernels" / "unused.cpp").write_text('extern "C" int kf_unused(void) { return undeclared; }\n')
    code, v, err = harness(*args, "--budget", "0.2", env={"KFORGE_BUILD_JOBS": jobs})
    assert v["status"] == "compile_error", (err, v)
    assert "unused.cpp" in v["build"]["diagnostics"] and "undeclared" in v["build"]["diagnostics"], v["build"]
