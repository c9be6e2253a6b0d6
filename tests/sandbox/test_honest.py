"""Honest work succeeds in the jail: g++ and nvcc build shared libraries in `build`, and Python
with PyTorch runs a small CPU model (and loads what was built) in `run`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jailtest import run_jail

KERNEL_CPP = 'extern "C" int add(int a, int b) { return a + b; }\n'
KERNEL_CU = """
__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
extern "C" void launch_scale(float *x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }
"""

MODEL = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
with torch.no_grad():
    for p in m.parameters():
        p.fill_(0.5)
    y = m(torch.ones(3, 4))
print(tuple(y.shape), round(float(y.sum()), 3), torch.get_num_threads() >= 1)
"""


def python_trees() -> list[str]:
    """The interpreter's trees: the venv and the installation it was made from."""
    trees = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    return sorted(t for t in trees if not t.startswith("/usr"))


def test_gxx_builds_a_shared_library_that_python_loads_in_run(ws: Path) -> None:
    (ws / "k.cpp").write_text(KERNEL_CPP)
    r = run_jail(ws, "g++", "-shared", "-fPIC", "-O2", "-o", "libk.so", "k.cpp", profile="build")
    assert r.rc == 0, r.err
    assert r.out == "" and r.err == ""
    assert (ws / "libk.so").exists()
    code = "import ctypes; print(ctypes.CDLL('./libk.so').add(2, 3))"
    r = run_jail(ws, sys.executable, "-c", code, profile="run")
    assert r.rc == 0, r.err
    assert r.out.strip() == "5"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_builds_a_shared_library(ws: Path) -> None:
    (ws / "k.cu").write_text(KERNEL_CU)
    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    r = run_jail(
        ws,
        nvcc,
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-o",
        "libk.so",
        "k.cu",
        profile="build",
        opts=["--time", "300", "--mem", "4096"],
        timeout=320,
    )
    assert r.rc == 0, r.out + r.err
    syms = subprocess.run(["nm", "-D", str(ws / "libk.so")], capture_output=True, text=True)
    assert "launch_scale" in syms.stdout


def test_pytorch_runs_a_small_cpu_model_in_run(ws: Path) -> None:
    ro = python_trees()
    opts = ["--no-auto-python", "--mem", "4096", "--time", "120"]
    r = run_jail(ws, sys.executable, "-c", MODEL, profile="run", ro=ro, opts=opts)
    assert r.rc == 0, r.err
    assert r.out.strip() == "(3, 2) 63.0 True", r.out
    assert r.report["limit"] is None


def test_the_interpreter_prefix_is_added_automatically(ws: Path) -> None:
    r = run_jail(ws, sys.executable, "-c", "import sys; print(sys.prefix)", profile="run")
    assert r.rc == 0, r.err
    assert r.out.strip() == sys.prefix


def test_build_then_run_a_c_program(ws: Path) -> None:
    (ws / "main.c").write_text('#include <stdio.h>\nint main(void){puts("hello");return 3;}\n')
    r = run_jail(ws, "sh", "-c", "cc -O2 -o main main.c && ./main", profile="build")
    assert r.rc == 3 and r.out == "hello\n", r.err
