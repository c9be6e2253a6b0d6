"""The harness's commands that run user code (evaluate, pool, baseline, check-task,
profile-reference, inspect) run it in the jail unless the command line says --no-jail: without
--jail they find kforge-jail ($KFORGE_JAIL, else $KFORGE_BUILD's, else the repository's build/),
and where there is none they refuse to run (exit 2, the reason on stderr, nothing run). A verdict
says which way it ran (env.jailed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "workers" / "harness"
JAIL = ROOT / "build" / "kforge-jail"
TASK = str(ROOT / "examples" / "tasks" / "silu_residual.py")
CAND = str(ROOT / "examples" / "candidates" / "silu_residual" / "cpu")
BUILD = ["--task", TASK, "--candidate", CAND, "--backend", "cpu", "--phase", "build"]


def cli(tmp_path: Path, *args: str, **env: str) -> tuple[int, list[str], str]:
    e = {k: v for k, v in os.environ.items() if k not in ("KFORGE_JAIL", "KFORGE_BUILD")}
    e.update(PYTHONPATH=str(HARNESS), KFORGE_CACHE=str(tmp_path / "cache"), **env)
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", *args],
        cwd=str(HARNESS),
        env=e,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p.returncode, [ln for ln in p.stdout.splitlines() if ln.strip()], p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", *BUILD],
        ["check-task", "--task", TASK, "--backend", "cpu"],
        ["inspect", "--task", TASK, "--backend", "cpu"],
        ["baseline", "--task", TASK, "--backend", "cpu"],
        ["profile-reference", "--task", TASK, "--backend", "cpu"],
        ["pool", "--sock", "/nonexistent/pool.sock", "--backend", "cpu"],
    ],
    ids=lambda a: a[0],
)
@pytest.mark.parametrize("where", ["env", "build_dir", "flag"])
def test_no_jail_found_refuses_to_run(tmp_path, args, where):
    """No jail where the command looks, by each way of saying where: exit 2, no output, the
    reason names the path and the ways out; the task's code never ran (it would have left
    nothing here to see, so the proof is the command's silence and its speed: no verdict)."""
    missing = tmp_path / "nowhere" / "kforge-jail"
    env = {}
    if where == "env":
        env["KFORGE_JAIL"] = str(missing)
    elif where == "build_dir":
        env["KFORGE_BUILD"] = str(missing.parent)
    else:
        args = [*args, "--jail", str(missing)]
    code, lines, err = cli(tmp_path, *args, **env)
    assert code == 2 and lines == [], (code, lines, err[-2000:])
    assert f"no kforge-jail at {missing}" in err and "--no-jail" in err, err[-2000:]


def test_a_file_that_is_not_executable_is_no_jail(tmp_path):
    fake = tmp_path / "kforge-jail"
    fake.write_text('#!/bin/sh\nexec "$@"\n')  # a script that would run anything unconfined
    fake.chmod(0o644)
    code, lines, err = cli(tmp_path, "evaluate", *BUILD, "--jail", str(fake))
    assert code == 2 and lines == [] and "no kforge-jail at" in err, err[-2000:]


def test_jail_and_no_jail_together_are_refused(tmp_path):
    code, lines, err = cli(tmp_path, "evaluate", *BUILD, "--jail", str(JAIL), "--no-jail")
    assert code == 2 and lines == [] and "--jail and --no-jail" in err, err[-2000:]


def test_no_jail_runs_outside_and_the_verdict_says_so(tmp_path):
    code, lines, err = cli(tmp_path, "evaluate", *BUILD, "--no-jail", KFORGE_JAIL=str(tmp_path / "none"))
    assert code == 0, err[-3000:]
    v = json.loads(lines[-1])
    assert v["status"] == "ok" and v["env"]["jailed"] is False, v


@pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")
@pytest.mark.parametrize("where", ["default", "env"])
def test_without_a_word_the_code_runs_in_the_jail(tmp_path, where):
    """No --jail and no --no-jail: the repository's build/kforge-jail (or $KFORGE_JAIL's) runs
    the build and the verdict says jailed."""
    env = {"KFORGE_JAIL": str(JAIL)} if where == "env" else {}
    code, lines, err = cli(tmp_path, "evaluate", *BUILD, **env)
    assert code == 0, err[-3000:]
    v = json.loads(lines[-1])
    assert v["status"] == "ok" and v["env"]["jailed"] is True, v
