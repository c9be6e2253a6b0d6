"""The expert's generators for library-backed operators (workers/policies/expert/expert_gemm.c,
expert_conv.c, expert_convnd.c, expert_pool.c), through build/agent-probes/expert_ops_probe on the graphs of real
tasks (`kforge_harness inspect`):

* every kernel variant builds warning-free as the harness builds it: g++ for cpu (also for SSE
  and AVX-512 targets), nvcc with cuBLAS/cuDNN linked for cuda (no GPU here: built, not run);
* on cpu, every variant, called through kforge_runtime from the generated Python lines under the
  runner's ComputeGuard (allocations and views only), matches torch (in float64) on the task's
  shapes and on others: other batch sizes, odd sizes, 1-D and unbatched operands, empty batches;
* what is not supported is refused with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import graphcache
import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "workers" / "harness"
sys.path.insert(0, str(HARNESS))  # kforge_runtime and kforge_harness, as the runner has them

import kforge_runtime  # noqa: E402
from kforge_harness.build import native_command  # noqa: E402
from kforge_harness.candidate import Candidate  # noqa: E402
from kforge_harness.guard import ComputeGuard  # noqa: E402

PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_ops_probe"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
EXAMPLE_TASKS = {"matmul", "linear_bias_relu", "conv_bn_relu", "max_pool2d"}

TASKS = {
    # every kind of node the generators read, with their parameters in every spelling
    "zoo": """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 12)
        self.lw = nn.Parameter(torch.randn(7, 20))
        self.conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
        self.conv_g = nn.Conv2d(4, 8, (3, 2), stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2)
        self.conv_same = nn.Conv2d(4, 4, 4, padding="same", groups=4)
        self.w = nn.Parameter(torch.randn(6, 2, 3, 3))
        self.mp = nn.MaxPool2d(3, stride=2, padding=1)
        self.ap = nn.AvgPool2d((3, 2), stride=(2, 1), padding=(1, 1), count_include_pad=False)
        self.ap_ceil = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)

    def forward(self, x, img, a, b, a3, b3):
        outs = [
            self.fc(x),
            F.linear(x, self.lw, None),
            torch.mm(a, b),
            torch.matmul(a3, b),
            torch.bmm(a3, b3),
            a3 @ b3,
            self.conv(img),
            self.conv_g(img),
            self.conv_same(img),
            F.conv2d(img, self.w, None, 1, 0, 1, 2),
            torch.conv2d(img, self.w, stride=(2, 1), padding="valid", dilation=(1, 2), groups=2),
            self.mp(img),
            self.ap(img),
            self.ap_ceil(img),
            F.max_pool2d(img, (2, 3), (1, 2), (1, 1), (2, 1), ceil_mode=True),
            F.avg_pool2d(img, 2, divisor_override=3),
            F.max_pool2d(img, 2),
        ]
        return sum(o.sum() for o in outs)


def get_inputs():
    return [torch.randn(8, 20), torch.randn(2, 4, 16, 16), torch.randn(6, 20), torch.randn(20, 9),
            torch.randn(3, 6, 20), torch.randn(3, 20, 9)]


def get_init_inputs():
    return []
""",
    # the other convolutions: 1-D, 3-D and transposed, modules and functions
    "convnd": """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1, groups=2, bias=False)
        self.c3 = nn.Conv3d(4, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1))
        self.c3_same = nn.Conv3d(4, 4, 2, padding="same", groups=4)
        self.t1 = nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, output_padding=2)
        self.t2 = nn.ConvTranspose2d(4, 6, (3, 4), stride=(2, 1), padding=(1, 2), output_padding=(1, 0),
                                     groups=2, dilation=(1, 2))
        self.t3 = nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, output_padding=1)
        self.mp1 = nn.MaxPool1d(3, stride=2, padding=1, dilation=2, ceil_mode=True)
        self.ap1 = nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False)
        self.mp3 = nn.MaxPool3d(3, stride=2, padding=1, dilation=(1, 2, 1), ceil_mode=True)
        self.ap3 = nn.AvgPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), count_include_pad=False)
        self.w1 = nn.Parameter(torch.randn(6, 2, 3))
        self.wt2 = nn.Parameter(torch.randn(4, 3, 2, 2))
        self.wt3 = nn.Parameter(torch.randn(4, 3, 2, 3, 2))

    def forward(self, seq, img, vol):
        outs = [
            self.c1(seq),
            self.c3(vol),
            self.c3_same(vol),
            self.t1(seq),
            self.t2(img),
            self.t3(vol),
            F.conv1d(seq, self.w1, None, 1, "same", 2, 2),
            F.conv_transpose2d(img, self.wt2, None, 2, 0, 0, 1, 1),
            torch.conv_transpose3d(vol, self.wt3, None, (1, 2, 2), (0, 1, 0), (0, 1, 1), 1, (2, 1, 1)),
            self.mp1(seq),
            self.ap1(seq),
            F.max_pool1d(seq, 2),
            self.mp3(vol),
            self.ap3(vol),
            F.avg_pool3d(vol, 2, divisor_override=3),
            F.max_pool3d(vol, (1, 2, 2)),
        ]
        return sum(o.sum() for o in outs)


def get_inputs():
    return [torch.randn(2, 4, 17), torch.randn(2, 4, 9, 8), torch.randn(2, 4, 5, 6, 7)]


def get_init_inputs():
    return []
""",
    # what the generators refuse
    "refused": """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.reflect = nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
        self.circular = nn.Conv3d(4, 4, 3, padding=1, padding_mode="circular")

    def forward(self, img):
        pooled, idx = F.max_pool2d(img, 2, return_indices=True)
        return self.reflect(img).sum() + pooled.sum() + idx.sum() + self.circular(img.unsqueeze(2)).sum()


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return []
""",
}


@dataclass(frozen=True)
class Case:
    task: str  # a key of TASKS or an example task
    node: str
    kind: str  # gemm, conv, convnd (1-D, 3-D, transposed) or pool
    ref: Callable[..., torch.Tensor]  # torch's result from the operands (float64)
    shapes: tuple[tuple[tuple[int, ...], ...], ...]  # the operands' shapes, the task's first


W_FC, W_LIN, W_CONV, W_G = (12, 20), (7, 20), (6, 4, 3, 3), (8, 2, 3, 2)
IMG = (2, 4, 16, 16)
IMG2, VOL = (2, 4, 9, 8), (2, 4, 5, 6, 7)
# fmt: off
CASES = {
    "linear_module": Case("zoo", "fc", "gemm", F.linear, (
        ((8, 20), W_FC), ((33, 20), W_FC), ((2, 5, 20), W_FC), ((20,), W_FC), ((0, 20), W_FC),
        ((130, 520), (270, 520)))),
    "linear_function": Case("zoo", "linear", "gemm", F.linear, (((8, 20), W_LIN), ((3, 4, 20), W_LIN))),
    "mm": Case("zoo", "mm", "gemm", torch.mm, (
        ((6, 20), (20, 9)), ((33, 17), (17, 5)), ((200, 300), (300, 150)), ((0, 4), (4, 3)),
        ((5, 0), (0, 7)))),
    "matmul_nd_by_2d": Case("zoo", "matmul", "gemm", torch.matmul, (
        ((3, 6, 20), (20, 9)), ((2, 3, 33, 8), (8, 5)), ((20,), (20, 9)), ((3, 6, 20), (20,)),
        ((20,), (20,)), ((6, 20), (3, 20, 9)), ((20,), (3, 20, 9)))),
    "bmm": Case("zoo", "bmm", "gemm", torch.bmm, (
        ((3, 6, 20), (3, 20, 9)), ((5, 33, 7), (5, 7, 2)), ((0, 4, 3), (0, 3, 2)),
        ((2, 100, 300), (2, 300, 140)))),
    "matmul_operator": Case("zoo", "matmul_1", "gemm", torch.matmul, (
        ((3, 6, 20), (3, 20, 9)), ((2, 3, 4, 5), (2, 3, 5, 6)))),
    "matmul_task": Case("matmul", "matmul", "gemm", torch.matmul, (
        ((768, 768), (768, 768)), ((33, 64), (64, 17)))),
    "linear_task": Case("linear_bias_relu", "linear", "gemm", F.linear, (
        ((512, 1024), (512, 1024)), ((33, 1024), (512, 1024)))),
    "conv_module": Case("zoo", "conv", "conv", lambda x, w: F.conv2d(x, w, stride=2, padding=1), (
        (IMG, W_CONV), ((1, 4, 33, 17), W_CONV), ((0, 4, 16, 16), W_CONV), ((4, 15, 15), W_CONV))),
    "conv_groups_dilation": Case(
        "zoo", "conv_g", "conv",
        lambda x, w: F.conv2d(x, w, stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2),
        ((IMG, W_G), ((3, 4, 33, 20), W_G))),
    "conv_same_even_kernel": Case(
        "zoo", "conv_same", "conv", lambda x, w: F.conv2d(x, w, padding="same", groups=4),
        ((IMG, (4, 1, 4, 4)), ((1, 4, 33, 17), (4, 1, 4, 4)))),
    "conv_function": Case("zoo", "conv2d", "conv", lambda x, w: F.conv2d(x, w, groups=2), (
        (IMG, (6, 2, 3, 3)), ((1, 4, 9, 33), (6, 2, 3, 3)))),
    "conv_valid_strided": Case(
        "zoo", "conv2d_1", "conv", lambda x, w: F.conv2d(x, w, stride=(2, 1), dilation=(1, 2), groups=2),
        ((IMG, (6, 2, 3, 3)), ((3, 4, 17, 33), (6, 2, 3, 3)))),
    "conv_task": Case("conv_bn_relu", "conv", "conv", lambda x, w: F.conv2d(x, w, padding=1), (
        ((8, 32, 32, 32), (64, 32, 3, 3)), ((1, 32, 33, 17), (64, 32, 3, 3)))),
    "conv1d_module": Case("convnd", "c1", "convnd", lambda x, w: F.conv1d(x, w, None, 2, 2, 1, 2), (
        ((2, 4, 17), (6, 2, 5)), ((3, 4, 40), (6, 2, 5)), ((4, 9), (6, 2, 5)), ((0, 4, 8), (6, 2, 5)))),
    "conv3d_module": Case(
        "convnd", "c3", "convnd",
        lambda x, w: F.conv3d(x, w, None, (1, 2, 1), (1, 0, 2), (2, 1, 1)),
        ((VOL, (6, 4, 3, 2, 3)), ((1, 4, 7, 9, 5), (6, 4, 3, 2, 3)), ((4, 5, 6, 7), (6, 4, 3, 2, 3)))),
    "conv3d_same_even": Case(
        "convnd", "c3_same", "convnd", lambda x, w: F.conv3d(x, w, padding="same", groups=4),
        ((VOL, (4, 1, 2, 2, 2)), ((1, 4, 3, 8, 5), (4, 1, 2, 2, 2)))),
    "convt1d_module": Case(
        "convnd", "t1", "convnd", lambda x, w: F.conv_transpose1d(x, w, None, 3, 1, 2),
        (((2, 4, 17), (4, 6, 3)), ((3, 4, 1), (4, 6, 3)), ((4, 9), (4, 6, 3)))),
    "convt2d_groups_dilation": Case(
        "convnd", "t2", "convnd",
        lambda x, w: F.conv_transpose2d(x, w, None, (2, 1), (1, 2), (1, 0), 2, (1, 2)),
        ((IMG2, (4, 3, 3, 4)), ((1, 4, 13, 6), (4, 3, 3, 4)))),
    "convt3d_module": Case(
        "convnd", "t3", "convnd", lambda x, w: F.conv_transpose3d(x, w, None, 2, 1, 1),
        ((VOL, (4, 2, 3, 3, 3)), ((1, 4, 3, 4, 2), (4, 2, 3, 3, 3)))),
    "conv1d_function_same": Case(
        "convnd", "conv1d", "convnd", lambda x, w: F.conv1d(x, w, None, 1, "same", 2, 2),
        (((2, 4, 17), (6, 2, 3)), ((1, 4, 4), (6, 2, 3)))),
    "convt2d_function": Case(
        "convnd", "conv_transpose2d", "convnd", lambda x, w: F.conv_transpose2d(x, w, None, 2),
        ((IMG2, (4, 3, 2, 2)), ((3, 4, 5, 11), (4, 3, 2, 2)))),
    "convt3d_function": Case(
        "convnd", "conv_transpose3d", "convnd",
        lambda x, w: F.conv_transpose3d(x, w, None, (1, 2, 2), (0, 1, 0), (0, 1, 1), 1, (2, 1, 1)),
        ((VOL, (4, 3, 2, 3, 2)), ((1, 4, 2, 3, 9), (4, 3, 2, 3, 2)))),
    "maxpool3d_module": Case(
        "convnd", "mp3", "pool3d", lambda x: F.max_pool3d(x, 3, 2, 1, (1, 2, 1), ceil_mode=True),
        ((VOL,), ((1, 3, 7, 9, 8),), ((4, 6, 5, 9),))),
    "avgpool3d_exclude_pad": Case(
        "convnd", "ap3", "pool3d",
        lambda x: F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), count_include_pad=False),
        ((VOL,), ((1, 3, 4, 9, 8),))),
    "avgpool3d_divisor": Case("convnd", "avg_pool3d", "pool3d", lambda x: F.avg_pool3d(x, 2, divisor_override=3), (
        (VOL,), ((1, 2, 3, 5, 7),))),
    "maxpool3d_function": Case("convnd", "max_pool3d", "pool3d", lambda x: F.max_pool3d(x, (1, 2, 2)), (
        (VOL,), ((2, 1, 3, 3),))),
    "maxpool1d_module": Case(
        "convnd", "mp1", "pool", lambda x: F.max_pool1d(x, 3, 2, 1, 2, ceil_mode=True),
        (((2, 4, 17),), ((5, 40),), ((1, 3, 6),))),
    "avgpool1d_module": Case(
        "convnd", "ap1", "pool", lambda x: F.avg_pool1d(x, 4, 3, 2, count_include_pad=False),
        (((2, 4, 17),), ((5, 40),))),
    "maxpool1d_function": Case("convnd", "max_pool1d", "pool", lambda x: F.max_pool1d(x, 2), (
        ((2, 4, 17),), ((3, 9),))),
    "maxpool_module": Case("zoo", "mp", "pool", lambda x: F.max_pool2d(x, 3, 2, 1), (
        (IMG,), ((1, 3, 33, 17),), ((4, 15, 16),), ((0, 4, 8, 8),))),
    "avgpool_exclude_pad": Case(
        "zoo", "ap", "pool", lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 1), count_include_pad=False),
        ((IMG,), ((1, 3, 33, 17),))),
    "avgpool_ceil": Case("zoo", "ap_ceil", "pool", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (
        (IMG,), ((1, 3, 33, 18),), ((2, 14, 14),))),
    "maxpool_dilation_ceil": Case(
        "zoo", "max_pool2d", "pool", lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), (2, 1), ceil_mode=True),
        ((IMG,), ((1, 3, 33, 18),))),
    "avgpool_divisor": Case("zoo", "avg_pool2d", "pool", lambda x: F.avg_pool2d(x, 2, divisor_override=3), (
        (IMG,), ((1, 3, 33, 17),))),
    "maxpool_default_stride": Case("zoo", "max_pool2d_1", "pool", lambda x: F.max_pool2d(x, 2), (
        (IMG,), ((3, 5, 9),))),
    "maxpool_task": Case("max_pool2d", "pool", "pool", lambda x: F.max_pool2d(x, 2, 2), (
        ((8, 32, 64, 64),), ((3, 5, 33, 17),))),
}
# fmt: on
VARIANTS = {
    "gemm": {"cuda": 3, "cpu": 3},  # cuda: SGEMM or split TF32, cuBLASLt, SGEMM always
    "conv": {"cuda": 2, "cpu": 2},
    "convnd": {"cuda": 2, "cpu": 1},
    "pool": {"cuda": 3, "cpu": 2},
    "pool3d": {"cuda": 1, "cpu": 1},
}
# built for cuda and for the other cpu targets: one of each kind of source
BUILT_EVERYWHERE = [
    "linear_module",
    "mm",
    "conv_module",
    "maxpool_module",
    "avgpool_exclude_pad",
    "conv3d_same_even",
    "convt3d_module",
    "convt1d_module",
    "maxpool3d_module",
    "avgpool3d_exclude_pad",
]


def graph_of(task: Path, tmp_path: Path) -> Path:
    return graphcache.graph_file(task, "cpu", tmp_path, task.stem + ".graph.json")


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """graph(task) -> the inspect graph of a TASKS entry or an example task, made once."""
    made: dict[str, Path] = {}

    def get(task: str) -> Path:
        if task not in made:
            d = tmp_path_factory.mktemp(task)
            if task in EXAMPLE_TASKS:
                path = ROOT / "examples" / "tasks" / f"{task}.py"
            else:
                path = d / f"{task}.py"
                path.write_text(TASKS[task])
            made[task] = graph_of(path, d)
        return made[task]

    return get


def generate(backend: str, graph: Path, node: str, *inputs: str) -> dict:
    if not PROBE.is_file():
        pytest.fail(f"{PROBE} is missing: run `make build` first")
    p = subprocess.run([str(PROBE), backend, str(graph), node, *inputs], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def generated(case: Case, backend: str, graph: Callable[[str], Path]) -> dict:
    n_in = len(case.shapes[0])
    g = generate(backend, graph(case.task), case.node, *[f"x{i}" for i in range(n_in)])
    assert g["ok"], g["detail"]
    assert len(g["kernels"]) == VARIANTS[case.kind][backend]
    for src in g["kernels"]:
        assert src.count('extern "C" int kf_op0(') == 1
    return g


def build(backend: str, src: str, d: Path, extra: list[str]) -> Path:
    """The shared library of one kernel file, built by the harness's command plus extra flags."""
    (d / "kernels").mkdir(parents=True)
    kernel = d / "kernels" / ("kf_op0.cu" if backend == "cuda" else "kf_op0.cpp")
    kernel.write_text(src)
    (d / "model_new.py").write_text("")
    cand = Candidate(str(d), "native", str(d / "model_new.py"), [str(kernel)])
    out = d / "libkernels.so"
    cmd = [*native_command(cand, backend, str(out)), *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-3000:]}\n{src}"
    return out


def compile_only(src: str, d: Path, march: str) -> None:
    f = d / f"k_{march}.cpp"
    f.write_text(src)
    cmd = ["g++", "-std=c++17", "-O3", f"-march={march}", "-fopenmp", "-fPIC", "-Wall", "-Wextra", "-Werror"]
    p = subprocess.run([*cmd, "-c", str(f), "-o", f"{f}.o"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-3000:]}"


def forward_of(py: str, n_in: int) -> Callable[..., torch.Tensor]:
    """The Python lines as ModelNew.forward(self, x0, ...) returning t0."""
    args = ", ".join(f"x{i}" for i in range(n_in))
    ns: dict = {"torch": torch}
    exec(compile(f"def forward(self, {args}):\n{py}        return t0\n", "<expert_ops>", "exec"), ns)
    return ns["forward"]


def run_guarded(forward: Callable[..., torch.Tensor], lib: Path, inputs: list[torch.Tensor]) -> torch.Tensor:
    model = types.SimpleNamespace(k=kforge_runtime.Kernels(str(lib), "cpu"))
    guard = ComputeGuard()
    with guard:
        out = forward(model, *inputs)
    assert guard.violations == []
    assert model.k.calls == 1
    return out


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize("name", BUILT_EVERYWHERE)
def test_every_variant_builds_warning_free(
    tmp_path: Path, graph: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, backend: str, name: str
) -> None:
    if backend == "cuda" and not Path(NVCC).exists():
        pytest.fail(f"nvcc not found at {NVCC}: the CUDA toolkit is part of this machine's set-up")
    monkeypatch.setenv("KFORGE_CUDA_ARCH", os.environ.get("KFORGE_CUDA_ARCH", "90"))
    monkeypatch.setenv("KFORGE_NVCC", NVCC)
    g = generated(CASES[name], backend, graph)
    for v, src in enumerate(g["kernels"]):
        d = tmp_path / f"v{v}"
        if backend == "cuda":
            # TF32 arithmetic only on operands split into TF32 heads and fp32 tails
            # (expert_gemm_split.c, expert_conv_split.c): never on an fp32 tensor as it is
            tf32 = "TENSOR_OP" in src or "FAST_" in src
            assert not tf32 or ("split_tf32<<<" in src and ("kSplitChunk" in src or "kSplitTaps" in src)), (
                name
            )
            assert "FAST_16" not in src and "CUBLAS_TF32_TENSOR_OP_MATH" not in src
            build("cuda", src, d, ["-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra"])
        else:
            d.mkdir()
            for march in ("x86-64", "skylake-avx512"):  # 4- and 16-wide vectors; native is run below
                compile_only(src, d, march)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_variants_match_torch(tmp_path: Path, graph: Callable[[str], Path], name: str) -> None:
    case = CASES[name]
    g = generated(case, "cpu", graph)
    forward = forward_of(g["py"], len(case.shapes[0]))
    gen = torch.Generator().manual_seed(0)
    for v, src in enumerate(g["kernels"]):
        lib = build("cpu", src, tmp_path / f"v{v}", ["-Wextra", "-Werror"])
        for shapes in case.shapes:
            inputs = [torch.randn(s, generator=gen) for s in shapes]
            want = case.ref(*(x.double() for x in inputs))
            got = run_guarded(forward, lib, inputs)
            assert got.dtype == torch.float32 and got.is_contiguous()
            torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4, msg=f"variant {v}, {shapes}")


@pytest.mark.parametrize("name", ["maxpool_module", "maxpool3d_module"])
def test_max_pool_propagates_nan(tmp_path: Path, graph: Callable[[str], Path], name: str) -> None:
    case = CASES[name]
    g = generated(case, "cpu", graph)
    x = torch.randn(2, 3, 9, 10) if name == "maxpool_module" else torch.randn(2, 3, 5, 9, 10)
    x[0, 1, 4, 4] = float("nan")  # 3-D: a row that the window's dilation skips
    x[1, 2, 0, 1] = float("nan")  # 3-D: a row that windows read
    for v, src in enumerate(g["kernels"]):
        got = run_guarded(forward_of(g["py"], 1), build("cpu", src, tmp_path / f"v{v}", []), [x])
        torch.testing.assert_close(got, case.ref(x), equal_nan=True)
        assert got.isnan().any()


def test_batch_dims_that_broadcast_raise(tmp_path: Path, graph: Callable[[str], Path]) -> None:
    g = generated(CASES["matmul_operator"], "cpu", graph)
    lib = build("cpu", g["kernels"][0], tmp_path, [])
    with pytest.raises(ValueError, match="broadcast"):
        run_guarded(forward_of(g["py"], 2), lib, [torch.randn(2, 1, 4, 5), torch.randn(3, 5, 6)])


@pytest.mark.parametrize(
    "task,node,inputs,named",
    [
        ("refused", "reflect", ["x", "w"], "padding_mode reflect"),
        ("refused", "circular", ["x", "w"], "conv3d circular with padding_mode circular"),
        ("convnd", "t3", ["x"], "conv_transpose3d takes 2 tensor operands"),
        ("refused", "max_pool2d_with_indices", ["x"], "return_indices"),
        ("zoo", "mm", ["a"], "takes 2 tensor operands"),
        ("zoo", "conv", ["x"], "takes 2 tensor operands"),
        ("zoo", "mp", ["x", "y"], "takes 1 tensor operand"),
    ],
)
def test_what_is_not_supported_is_refused(
    graph: Callable[[str], Path], task: str, node: str, inputs: list[str], named: str
) -> None:
    for backend in ("cpu", "cuda"):
        g = generate(backend, graph(task), node, *inputs)
        assert not g["ok"] and named in g["detail"], g
        assert g["py"] == "" and g["kernels"] == []
