"""The expert's own implicit-GEMM convolutions (workers/policies/expert/expert_conv_igemm.c)
without a GPU: a generated convolution's CUDA source is built for the host with nvcc around
tests/agent/conv_igemm_host.cu, which replays the plan's tap tables, packed filter and output
addressing element by element as the kernels use them, for forward convolutions (1-D to 3-D,
strides, dilation, padding, odd sizes) and transposed ones in phases (output padding, phases no
tap reaches), against a float64 convolution. Each case must write every output and match. The
kernels' tiles run on a GPU in tests/agent/test_gemm_split_gpu.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_gemm_split_gpu as split  # noqa: E402  (its task writer and probe call)

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
CASES = 8  # the rows of conv_igemm_host.cu's table


def test_the_implicit_gemm_tables_address_every_output_of_each_convolution(tmp_path: Path) -> None:
    if not Path(NVCC).exists():
        pytest.fail(f"nvcc not found at {NVCC}: the CUDA toolkit is part of this machine's set-up")
    _, cand = split._candidate(tmp_path, "conv3d", 0, split.IGEMM_CASES)
    (src,) = [p for p in (cand / "kernels").glob("*.cu") if "ig_plan(" in p.read_text()]
    exe = tmp_path / "conv_igemm_host"
    cmd = [NVCC, "-std=c++17", "-O1", "-arch=sm_90", f'-DKF_IG_CANDIDATE="{src}"',
           str(ROOT / "tests" / "agent" / "conv_igemm_host.cu"), "-o", str(exe), "-lcudnn"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    lines = p.stdout.strip().splitlines()
    rows = [line for line in lines if re.search(r"\b(ok|BAD)$", line)]
    assert len(rows) == CASES, p.stdout + p.stderr
    assert all(" unwritten 0 " in r and r.endswith(" ok") for r in rows), p.stdout
    assert lines[-1] == "0 bad" and p.returncode == 0, p.stdout + p.stderr
    # the transposed cases run in phases, the forward ones in one
    phases = {r.split()[0]: int(r.split()[2]) for r in rows}
    assert phases["convT3d"] == 8 and phases["convT2d"] == 4 and phases["conv1d"] == 1, phases
