"""Every example task is fit to be a task (check-task on the cpu backend, at its cpu sizes) and
traces to a torch.fx graph with one output, whether or not it has a hand-written candidate: the
ones without (no examples/candidates/NAME/) are solved by the expert policy."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted((ROOT / "examples" / "tasks").glob("*.py"))
NAMES = [p.stem for p in TASKS]
WITHOUT_CANDIDATE = [n for n in NAMES if not (ROOT / "examples" / "candidates" / n).is_dir()]


def test_there_are_tasks_for_the_policy():
    assert len(NAMES) >= 26
    assert len(WITHOUT_CANDIDATE) >= 14


@pytest.mark.parametrize("name", NAMES)
def test_example_task_is_fit(harness, name):
    code, v, err = harness(
        "check-task", "--task", str(ROOT / "examples" / "tasks" / f"{name}.py"), "--backend", "cpu"
    )
    assert code == 0, err
    assert v["fit"] is True, (v["reasons"], v.get("eager_ms"))
    assert v["null_candidates_passing"] == [] and v["eager_ms"] > 0


@pytest.mark.parametrize("name", WITHOUT_CANDIDATE)
@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_example_task_traces(monkeypatch, name, backend):
    """The policy reads the graph: it must come from fx (no ATen fallback), at both backends'
    sizes, with one tensor out (float32, or int64 for an arg-reduction). In process: inspect
    runs on the meta device, so the cuda sizes need no GPU and allocate nothing."""
    from kforge_harness.inspect_graph import inspect_task

    monkeypatch.setenv("KFORGE_BACKEND", backend)  # load_task sets it; restored after the test
    g = inspect_task(str(ROOT / "examples" / "tasks" / f"{name}.py"), backend)
    assert g["ran_on"] == "meta" and g["sizes_for"] == backend
    assert g["graph"]["source"] == "fx", g.get("fx_error")
    assert isinstance(g["outputs"], dict) and g["outputs"]["dtype"] in ("float32", "int64"), g["outputs"]
    assert all(i["dtype"] == "float32" for i in g["inputs"]), g["inputs"]
    assert all(p["dtype"] == "float32" for p in g["parameters"]), g["parameters"]
