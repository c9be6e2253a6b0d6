"""The expert policy's code generation (workers/policies/expert/expert_ew.c) on the graphs of
real tasks: every kernel variant compiles, with g++ -fopenmp for cpu and with nvcc for cuda
(the CUDA toolkit is on this machine; the kernels run on the GPU host through the service),
and what is not an elementwise chain is refused with the operator named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_probe"
HARNESS = ROOT / "workers" / "harness"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
TASK_LIKE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        {body}


def get_inputs():
    return [torch.randn(64, 32), torch.randn({yshape})]


def get_init_inputs():
    return []
"""


def graph_of(task: Path, tmp_path: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cpu")
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", "inspect", "--task", str(task), "--backend", "cpu"],
        cwd=str(HARNESS), env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = tmp_path / (task.stem + ".graph.json")
    out.write_text(p.stdout.strip().splitlines()[-1])
    return out


def generate(backend: str, graph: Path) -> dict:
    if not PROBE.is_file():
        pytest.fail(f"{PROBE} is missing: run `make build` first")
    p = subprocess.run([str(PROBE), backend, str(graph)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def compiles(backend: str, src: str, tmp_path: Path, n: int) -> None:
    ext = "cu" if backend == "cuda" else "cpp"
    f = tmp_path / f"k{n}.{ext}"
    f.write_text(src)
    if backend == "cuda":
        cmd = [NVCC, "-std=c++17", "-O3", "-c", "-Xcompiler", "-fPIC", str(f), "-o", str(f) + ".o"]
    else:
        cmd = [
            "g++",
            "-std=c++17",
            "-O3",
            "-fopenmp",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-c",
            str(f),
            "-o",
            str(f) + ".o",
        ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-3000:]}\n{src}"


BODIES = {  # name: (forward body, y's shape) or None for an example task
    "silu_residual": None,
    "gelu": None,
    "chain": ("return F.leaky_relu(torch.tanh(x) * 2 - y / 3, 0.2) + F.hardswish(y)", "64, 32"),
    "gelu_tanh_clamp": (
        "return torch.clamp(F.gelu(x, approximate='tanh') + torch.sigmoid(y), min=-1.5, max=2.0)",
        "64, 32",
    ),
    "bias_row": ("return torch.relu(x + y) * 0.5", "32"),  # broadcasts
    "scale_col": ("return torch.sigmoid(x * y) - y", "64, 1"),  # broadcasts
}
BROADCASTS = {"bias_row", "scale_col"}


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize("name", list(BODIES))
def test_every_variant_compiles(tmp_path: Path, backend: str, name: str) -> None:
    if backend == "cuda" and not Path(NVCC).exists():
        pytest.fail(f"nvcc not found at {NVCC}: the CUDA toolkit is part of this machine's set-up")
    if BODIES[name] is None:
        task = ROOT / "examples" / "tasks" / f"{name}.py"
    else:
        body, yshape = BODIES[name]
        task = tmp_path / f"{name}.py"
        task.write_text(TASK_LIKE.replace("{body}", body).replace("{yshape}", yshape))
    g = generate(backend, graph_of(task, tmp_path))
    assert g["ok"], g["detail"]
    assert g["bcast"] == (name in BROADCASTS)
    want = (3 if g["bcast"] else 4) if backend == "cuda" else 2
    assert len(g["kernels"]) == want
    assert f"def forward(self{''.join(f', x{k}' for k in range(g['n_inputs']))})" in g["model"]
    if g["bcast"]:
        assert "x.expand(shape).stride()" in g["model"]
    for n, src in enumerate(g["kernels"]):
        assert 'extern "C" int kf_expert_ew(' in src
        compiles(backend, src, tmp_path, n)


@pytest.mark.parametrize(
    "body,named",
    [
        ("return torch.cumsum(x, dim=1) + y", "cumsum"),
        ("return torch.softmax(x, dim=1) + y", "softmax"),
        ("return (x + y).sum(dim=1)", "sum"),
    ],
)
def test_what_is_not_elementwise_is_named(tmp_path: Path, body: str, named: str) -> None:
    task = tmp_path / "t.py"
    task.write_text(TASK_LIKE.replace("{body}", body).replace("{yshape}", "64, 32"))
    g = generate("cpu", graph_of(task, tmp_path))
    assert not g["ok"] and named in g["detail"], g
