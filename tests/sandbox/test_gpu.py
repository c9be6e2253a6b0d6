"""The run profile on a GPU host (make test-gpu): CUDA, PyTorch and Triton work with only GPU N's
device nodes, and the build profile sees no GPU."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from jailtest import run_jail

pytestmark = pytest.mark.gpu

GPU = os.environ.get("KFORGE_TEST_GPU", "0")


def gpu_opts(*extra: str) -> list[str]:
    opts = ["--gpu", GPU, "--time", "300", *extra]
    for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST"):
        if name in os.environ:
            opts += ["--env", name]
    return opts


def python_ro() -> list[str]:
    return sorted({p for p in (sys.prefix, sys.base_prefix) if not p.startswith("/usr")})


def test_pytorch_cuda_in_run_sees_only_its_gpu(ws: Path) -> None:
    code = (
        "import json, os, torch\n"
        "x = torch.randn(512, 512, device='cuda')\n"
        "nodes = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia'))\n"
        "caps = os.listdir('/dev/nvidia-caps') if os.path.isdir('/dev/nvidia-caps') else []\n"
        "ok = bool((x @ x.T).diagonal().min() > 0)\n"
        "print('RESULT', json.dumps([torch.cuda.device_count(), ok, nodes, caps]))\n"
    )
    r = run_jail(ws, sys.executable, "-c", code, profile="run", ro=python_ro(), opts=gpu_opts())
    assert r.rc == 0, r.out + r.err
    found = [ln for ln in r.lines() if ln.startswith("RESULT ")]
    assert found, r.out + r.err
    count, positive, nodes, caps = json.loads(found[0][len("RESULT ") :])
    assert count == 1 and positive, (count, positive, r.out)
    # the driver makes an empty /dev/nvidia-caps in the jail's writable /dev (seen on the H200
    # host, driver 580); it may hold no device node: the jail binds none
    assert caps == [], caps
    nodes = [n for n in nodes if n != "nvidia-caps"]
    assert set(nodes) <= {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", f"nvidia{GPU}"}, nodes
    assert f"nvidia{GPU}" in nodes and "nvidiactl" in nodes, nodes


def test_build_profile_sees_no_gpu(ws: Path) -> None:
    code = "import torch; print(torch.cuda.is_available())"
    r = run_jail(ws, sys.executable, "-c", code, profile="build", ro=python_ro())
    assert r.rc == 0, r.err
    assert r.out.strip() == "False"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_kernel_built_in_build_runs_in_run(ws: Path) -> None:
    (ws / "k.cu").write_text(
        "__global__ void scale(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;"
        " if (i < n) x[i] = 2.0f * i; }\n"
        'extern "C" float run(int n) { float *d, h = 0; cudaMalloc(&d, n * sizeof(float));'
        " scale<<<(n + 255) / 256, 256>>>(d, n); cudaMemcpy(&h, d + n - 1, sizeof(float),"
        " cudaMemcpyDeviceToHost); cudaFree(d); return h; }\n"
    )
    nvcc = shutil.which("nvcc")
    assert nvcc
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
        opts=["--time", "300"],
    )
    assert r.rc == 0, r.out + r.err
    code = "import ctypes; l = ctypes.CDLL('./libk.so'); l.run.restype = ctypes.c_float; print(l.run(1000))"
    r = run_jail(ws, sys.executable, "-c", code, profile="run", ro=python_ro(), opts=gpu_opts())
    assert r.rc == 0, r.out + r.err
    assert r.out.strip() == "1998.0"


def test_torch_compile_with_triton_in_run(ws: Path) -> None:
    code = (
        "import torch\n"
        "f = lambda a, b: torch.nn.functional.gelu(a @ b + 1.0).sum(dim=-1)\n"
        "a, b = torch.randn(256, 256, device='cuda'), torch.randn(256, 256, device='cuda')\n"
        "print(torch.allclose(torch.compile(f)(a, b), f(a, b), atol=1e-2, rtol=1e-2))\n"
    )
    r = run_jail(ws, sys.executable, "-c", code, profile="run", ro=python_ro(), opts=gpu_opts(), timeout=320)
    assert r.rc == 0, r.out + r.err
    assert r.out.strip().splitlines()[-1] == "True"


def test_run_gpu_proc_writable_only_for_own_files(ws: Path) -> None:
    """The driver names its threads through /proc (cuInit fails with 304 otherwise); what
    reaches the whole system stays read-only."""
    code = (
        "import os\n"
        "def w(p, v):\n"
        "    try:\n"
        "        open(p, 'w').write(v); return 'ok'\n"
        "    except OSError as e:\n"
        "        return e.errno\n"
        "print(w(f'/proc/self/task/{os.getpid()}/comm', 'kf'))\n"
        "print(w('/proc/sys/kernel/hostname', 'x'), w('/proc/sys/vm/drop_caches', '1'))\n"
    )
    r = run_jail(ws, sys.executable, "-c", code, profile="run", ro=python_ro(), opts=gpu_opts())
    assert r.rc == 0, r.out + r.err
    lines = r.lines()
    assert lines[0] == "ok"
    assert "ok" not in lines[1], lines
