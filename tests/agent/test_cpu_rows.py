"""The expert's cpu kernels of reductions along a dimension and softmaxes
(workers/policies/expert/expert_rows_cpu.c) on inputs the judge's draws do not hold: NaN, +inf
and rows or columns of -inf, as PyTorch answers them (NaN wins a maximum, a softmax over an
infinity is NaN, a logsumexp of +inf is +inf and of nothing but -inf is -inf), along rows (the
last dimension) and columns (a middle one, in tiles of 64 columns: 70 is one whole tile and a
part), and the first index among equal extremes. Each operator is its own task, so each plans
as one reduction or softmax step; the candidate is built by the harness and called directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import graphcache
import pytest
from test_gemm_split_gpu import _load  # a module from its file

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_probe"
HARNESS = ROOT / "workers" / "harness"

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(5, 37, 70)]


def get_init_inputs():
    return []
"""

BODIES = {
    "amax_rows": "torch.amax(x, -1)",
    "amin_cols": "torch.amin(x, 1)",
    "sum_cols": "torch.sum(x, 1)",
    "mean_rows": "torch.mean(torch.tanh(x), -1)",
    "prod_cols": "torch.prod(x * 0.01 + 1.0, 1)",
    "softmax_rows": "torch.softmax(x, -1)",
    "softmax_cols": "torch.softmax(x, 1)",
    "log_softmax_rows": "torch.log_softmax(x, -1)",
    "log_softmax_cols": "torch.log_softmax(x, 1)",
    "logsumexp_rows": "torch.logsumexp(x, -1)",
    "logsumexp_cols": "torch.logsumexp(x, 1)",
    "argmax_cols": "torch.argmax(x, 1)",
    "argmin_rows": "torch.argmin(x, -1)",
}


def _inputs(torch, name: str):
    """Normal draws with the edges in: a NaN, a +inf, a row and a column of -inf (for the
    arg-reductions: ties instead, equal extremes at two places of a row and of a column)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 37, 70, generator=g)
    if name.startswith("arg"):
        x[1, 4, :] = 9.0  # a row of one value: the first index wins
        x[2, :, 6] = -9.0
        x[3, 10, 20] = x[3, 30, 20] = 50.0  # two maxima down a column
        x[3, 10, 20 + 1] = x[3, 10, 40] = -50.0  # two minima along a row
        return x
    x[0, 3, 5] = float("nan")
    x[1, 7, 66] = float("inf")
    x[2, 11, :] = float("-inf")
    x[3, :, 68] = float("-inf")
    x[4, 20, 1] = float("-inf")
    return x


def plan_and_build(task: Path, tmp_path: Path, monkeypatch) -> tuple[dict, Path]:
    """The expert's cpu plan of task (variant 0) in tmp_path/cand, its kernels built by the
    harness and named in KFORGE_KERNEL_LIB for the candidate's model_new.py to load."""
    sys.path.insert(0, str(HARNESS))
    from kforge_harness.build import build_native
    from kforge_harness.candidate import detect

    graph = graphcache.graph_file(task, "cpu", tmp_path, "graph.json")
    cand = tmp_path / "cand"
    p = subprocess.run([str(PROBE), "cpu", str(graph), str(cand), "0"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["ok"], plan["detail"]
    monkeypatch.setenv("KFORGE_KERNEL_LIB", build_native(detect(str(cand), "cpu"), "cpu").lib)
    monkeypatch.setenv("KFORGE_BACKEND", "cpu")
    return plan, cand


@pytest.mark.parametrize("name", list(BODIES))
def test_cpu_reductions_answer_edges_as_pytorch(tmp_path: Path, name: str, monkeypatch) -> None:
    import torch

    task = tmp_path / f"{name}.py"
    task.write_text(TASK.format(body=BODIES[name]))
    plan, cand = plan_and_build(task, tmp_path, monkeypatch)
    want = "softmax" if "softmax" in name else "reduce"
    assert [s["kind"] for s in plan["steps"]] == [want], plan["steps"]
    ref = _load(task, f"rows_task_{name}").Model()
    model = _load(cand / "model_new.py", f"rows_cand_{name}").ModelNew()
    x = _inputs(torch, name)
    with torch.no_grad():
        want_out, got = ref(x), model(x)
    assert got.dtype == want_out.dtype and got.shape == want_out.shape
    if name.startswith("arg"):
        assert torch.equal(got, want_out)
        return
    torch.testing.assert_close(got, want_out, rtol=1e-5, atol=1e-5, equal_nan=True)
    # the edges are in the reference's answer (a NaN, an infinity), so they were tested
    assert not torch.isfinite(want_out).all()
