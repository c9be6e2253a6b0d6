"""Through kforge-jail (build profile for the compiler, run profile for the runner), every example
and every adversarial candidate gets the same verdict as without it (cpu backend here; the cuda
examples in the gpu suite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_hacks import CAUGHT, FAST, HONEST, brief, evaluate, evaluate_backend

ROOT = Path(__file__).resolve().parents[2]
JAIL = ROOT / "build" / "kforge-jail"
# The example tasks that have hand-written candidates (the others are left to the expert policy).
EXAMPLES = sorted(
    p.stem
    for p in (ROOT / "examples" / "tasks").glob("*.py")
    if (ROOT / "examples" / "candidates" / p.stem).is_dir()
)

pytestmark = pytest.mark.skipif(not JAIL.exists(), reason="build/kforge-jail is not built (make build)")


def jailed(cache: Path, task: str, candidate: str) -> dict[str, Any]:
    options = FAST + ["--jail", str(JAIL)]
    if candidate.removesuffix(".py").endswith("_hidden"):
        options.append("--no-static-scan")
    return evaluate_backend(cache, task, candidate, options)


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert (a["status"], a["reward"] > 0) == (b["status"], b["reward"] > 0), f"\n{brief(a)}\n{brief(b)}"
    if a["status"] == "rejected":
        assert set(a["flags"]) & set(b["flags"]), f"\n{brief(a)}\n{brief(b)}"


@pytest.fixture(scope="module")
def cache(kforge_cache: Path) -> Path:
    return kforge_cache


CANDIDATES = [(t, c) for t, c in HONEST] + [(t, c) for t, c, _, _ in CAUGHT]


# Hacks that read the task file from the judge's command line: outside the jail they find it and
# are rejected for the PyTorch compute they then do; inside, the file and the judge's /proc entry
# are not in the view, so they fail earlier, while ModelNew is built, and are rejected for the
# introspection the static scan saw. Caught both ways, by different walls.
STOPPED_BY_THE_VIEW = {"inherit_import_task", "introspect_task_file"}


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


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_verdict_same_in_jail(cache, name):
    task = str(ROOT / "examples" / "tasks" / f"{name}.py")
    cand = str(ROOT / "examples" / "candidates" / name / "cpu")
    plain = evaluate_backend(cache, task, cand, FAST)
    inside = evaluate_backend(cache, task, cand, FAST + ["--jail", str(JAIL)])
    assert plain["status"] == inside["status"] == "ok", f"\n{brief(plain)}\n{brief(inside)}"
    assert plain["flags"] == inside["flags"] == []
