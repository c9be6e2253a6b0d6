"""The expert policy's planner and code generation (workers/policies/expert/expert_plan*.c,
expert_rows.c, expert_ew.c, expert_bcast.c) on the graphs of real tasks, through
build/agent-probes/expert_probe:

* every example task is planned, for cpu and for cuda; every cpu kernel variant compiles
  warning-free with g++ -fopenmp, every cuda variant of one task per kind of kernel with nvcc,
  and the first of one or two more per kind and of the small spellings below (the CUDA toolkit
  is on this machine; every task's kernels are built and run on the GPU host, in
  `make test-gpu`);
* the candidate it writes for every example task is judged by the real harness on the cpu
  backend (its verify phase: every correctness trial, no timing): correct and no flag, in its
  first variant, and in its second for one task per kind (the full evaluation with timing and
  reward is in tests/service/test_expert.py and the main job's test);
* what it cannot do is refused with the operator named.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import graphcache
import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_probe"
HARNESS = ROOT / "workers" / "harness"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
TASKS = sorted(p.stem for p in (ROOT / "examples" / "tasks").glob("*.py"))
# one task per kind of kernel: every cuda variant of these is compiled
EVERY_VARIANT = ["gelu", "scale_bias_relu", "argmax_last_dim", "softmax_dim1", "layer_norm_gelu", "bmm"]
# besides those and SMALL, the cuda kernels (variant 0) of these, one or two per other kind (gemm,
# conv, pool, moments, reductions): nvcc takes many seconds a file here; every task's cuda plan is
# compiled and run on the GPU in tests/agent/test_expert_gpu.py (make test-gpu)
CUDA_ALSO = ["linear_bias_relu", "bmm", "conv_bn_relu", "conv2d_relu_maxpool", "avg_pool2d", "group_norm",
             "batch_norm1d_relu", "logsumexp_rows", "sum_dim", "rms_norm", "conv_transpose3d_scale_sigmoid"]  # fmt: skip
TASK_LIKE = """
import math

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
CONV_LIKE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(2, 4, 8, 8)]


def get_init_inputs():
    return []
"""
SMALL = {  # name: (forward body, y's shape): spellings the example tasks do not use
    # diagonals (as_strided views: diagonal is no view to the judge's guard) with offsets of
    # both signs and over the last two dims of a 3-D tensor, and trace
    "diagonal_trace": (
        "return (torch.diagonal(x) * 2.0 + x.diagonal(1)[:31].sum() + torch.trace(x) + x.diagonal(-2).sum())[:30]"
        " + torch.diagonal(y, 0, 1, 2).sum(1)[:1]",
        "4, 32, 40",
    ),
    # cummax and cummin values along rows and columns, over a prologue, a NaN kept from where
    # it appears (log of negatives)
    "cummax_cummin": (
        "return torch.cummax(x, 1).values + torch.cummin(torch.relu(x), dim=0)[0] + torch.cummax(torch.log(x), 1)[0]",
        "64, 32",
    ),
    # roll (a gather's circular rule): one shift along one dim, negative, a last dim, a full
    # turn, two dims at once, a dim named twice, the flattened tensor (dims None)
    "roll": (
        "return (torch.roll(x, 3, 1) * 2.0 + torch.roll(torch.relu(x), shifts=-5, dims=0) + x.roll(1, -1)"
        " + torch.roll(y, (32,), (1,)) + torch.roll(x, (2, -7), (0, 1)) + x.roll((3, 4), (1, 1)) + torch.roll(y, 100))",
        "64, 32",
    ),
    # logcumsumexp (a scan of log(e^a + e^b)) forwards, along the first dim, and reversed
    "logcumsumexp": (
        "return torch.logcumsumexp(x * 3.0, dim=1) + torch.logcumsumexp(y, 0) * 0.5 + x.flip(1).logcumsumexp(1).flip(1)",
        "64, 32",
    ),
    # std_mean and var_mean: a tuple whose items are a variance (or std) and a mean each
    "std_var_mean": (
        "s, m = torch.std_mean(x, dim=1, keepdim=True)\n        v, m2 = torch.var_mean(y, dim=(1,), correction=0)\n"
        "        return (x - m) / (s + 1e-5) + v[:, None] + m2[:, None]",
        "64, 32",
    ),
    # exp near and past float's range on cpu (kf_expf: +inf past 88.72, as expf; it once
    # clamped at 88 and returned 1.7e38 there), and a sigmoid of large values
    "exp_range": ("return torch.exp(x * 100.0) + torch.sigmoid(y * 200.0) + torch.exp(x + 87.5)", "64, 32"),
    # nan_to_num's defaults (float32's largest finite values) and keywords, over NaN (a log of
    # a negative) and both infinities (1 / +-0)
    "nan_to_num": (
        "z = torch.log(x) + 1.0 / (y * (y.abs() > 2.0))\n        "
        "return torch.nan_to_num(z) + torch.nan_to_num(z, nan=1.5, posinf=7.0, neginf=-3.0) + z.nan_to_num(neginf=2.0)",
        "64, 32",
    ),
    # fmod, remainder and % (the sign of the divisor, as PyTorch's), maximum, fmax and fmin
    "fmod_remainder": (
        "return torch.fmod(x, 0.7) + torch.remainder(x, y) + x % -0.3 + torch.maximum(x, y)"
        " + torch.fmax(x, y * 0.5) - torch.fmin(y, x)",
        "64, 32",
    ),
    "adaptive_max": (
        "return (F.adaptive_max_pool1d(x.view(4, 16, 32), 1) + nn.AdaptiveMaxPool2d((1, 1))(y.view(4, 16, 4, 8)).view(4, 16, 1) + F.adaptive_avg_pool1d(x.view(4, 16, 32), 1)).view(4, 16)",
        "64, 32",
    ),
    # bounds that are tensors, broadcast along the rows
    "clamp_tensor": (
        "return torch.clamp(x, min=y[0], max=y[1] + 1) + torch.clamp_min(x, y[2]) + x.clamp(max=y[3])",
        "4, 32",
    ),
    "stack": (
        "return torch.stack([x, y * 2, torch.relu(x)], dim=1).sum(1) + torch.stack((x, y), -1)[..., 1]",
        "64, 32",
    ),
    "chain": ("return F.leaky_relu(torch.tanh(x) * 2 - y / 3, 0.2) + F.hardswish(y)", "64, 32"),
    "clamp_positional": (
        "return torch.clamp(F.gelu(x, approximate='tanh') + torch.sigmoid(y), -1.5, 2.0)",
        "64, 32",
    ),
    "bias_row": ("return torch.relu(x + y) * 0.5", "32"),
    "scale_col": ("return torch.sigmoid(x * y) - y", "64, 1"),
    "max_tuple": ("return torch.max(x * y, dim=1, keepdim=True)[0] + torch.min(x, 0).values.sum()", "64, 32"),
    "mean_var_like": ("return (x - x.mean(-1, keepdim=True)) * y.sum(1, keepdim=True).sigmoid()", "64, 32"),
    "log_softmax_dim0": ("return F.log_softmax(x * y, dim=0)", "64, 32"),
    # softplus with its parameters (its threshold crossed), and tanh(softplus) and Mish in one
    # exponential (expert_ew.c's kfw_tanh_softplus) on both sides of the threshold of 20
    "softplus_kw": (
        "return F.softplus(x * 4, beta=2.0, threshold=5.0) + torch.tanh(F.softplus(y * 12))",
        "64, 32",
    ),
    # the less common one-operand operators (expert_unary.c), positional and keyword spellings
    "unary_zoo": (
        "return (F.selu(x) + F.celu(y, 0.7) - F.softsign(x) * F.logsigmoid(y) + torch.square(x) * 0.1"
        " + torch.erf(y) + torch.log1p(x.abs()) + torch.expm1(y * 0.5) + torch.floor(x * 3)"
        " + torch.round(y * 2) + F.softshrink(x, 0.3) + F.hardshrink(y, lambd=0.4) + F.tanhshrink(x)"
        " + F.threshold(y, 0.1, 2.0) + torch.clamp_min(x, -0.5) + torch.sign(y) + torch.reciprocal(x.abs() + 1))",
        "64, 32",
    ),
    # p-norms as a sum of |x| or x * x and a lazy square root (an L2 normalisation fuses), and
    # products (double accumulators)
    "norms": (
        "return x / torch.norm(x, p=2, dim=1, keepdim=True) + torch.norm(y, p='fro')"
        " - torch.linalg.vector_norm(x, ord=1, dim=0) + x.norm(dim=-1, keepdim=True)",
        "64, 32",
    ),
    "prod": ("return torch.prod(1 + 0.1 * x, dim=1, keepdim=True) * y + (1 - 0.05 * y).prod(0)", "64, 32"),
    # variance and standard deviation in both signatures, corrections 1 and 0
    "variance": (
        "return torch.var(x, dim=1, keepdim=True) * y + x.std(0) - torch.var(x, 1, False, True)"
        " + torch.std(y, dim=0, correction=0, keepdim=True)",
        "64, 32",
    ),
    # losses and cosine similarity (expert_plan_loss.c): reduced, unreduced and broadcast on
    "losses": (
        "return (F.mse_loss(x, y) + F.l1_loss(x, y, reduction='sum') * 0.01 + F.smooth_l1_loss(x, y, beta=0.5)"
        " + F.huber_loss(x, y, delta=2.0)) * F.mse_loss(x * 2, y, reduction='none')"
        " + F.cosine_similarity(x, y, dim=0, eps=1e-6)",
        "64, 32",
    ),
    # a reduction's, softmax's, scan's or statistics' input chain over tensors that broadcast
    # along a run of its dimensions (a per-row target, a per-column bias) is its prologue: the
    # leaves read through _bqm's (q, m), not copied to the input's shape first
    "bcast_rows": (
        "return torch.softmax(x + y, dim=1) + (x * y).sum(1, keepdim=True) + torch.clamp(1 - x * y, min=0).mean()"
        " + torch.cumsum(x - y, dim=1) + torch.amin(x * y - y, dim=0)",
        "64, 1",
    ),
    "bcast_cols": (
        "return F.layer_norm(x + y, (32,)) + (x - y).amax(0, keepdim=True) + torch.var(x * y, dim=1, keepdim=True)"
        " + F.batch_norm(x + y, None, None, training=True) + torch.logsumexp(x / (y.abs() + 1), 1, True)",
        "32",
    ),
    "views": (
        "return torch.relu(x.view(x.size(0), 4, -1) + y.unsqueeze(1)).flatten(1) + F.dropout(x, p=0.0)"
        " + nn.functional.dropout(x * 2, 0.3, False).reshape(x.shape[0], 2, 16).amax(1).flatten().sum()",
        "64, 8",
    ),
    "select": (
        "return torch.where(x > 0, x, x * 0.1) + x * (y >= 0.5).float() + x.masked_fill(x < -1, 0.0)"
        " + torch.where(x != y, 1.0, y) - (x <= y) * 2 + torch.lt(x, 0.25) * y.eq(y)",
        "64, 32",
    ),
    "transposes": (
        "return (torch.relu(x.t() * 2) + y).T.contiguous() + torch.softmax(y.transpose(0, 1), dim=1)"
        " + x.mT.sum(0, keepdim=True).t() + torch.matmul(x.T, x).mean()"
        " + (y @ y.permute(1, 0)).mean()",
        "32, 64",
    ),
    "scalars": (
        "return torch.softmax(x / math.sqrt(x.size(-1)), dim=1) + y * (y.shape[0] // 16) - x.size(1)"
        " + (x - x.mean()).abs().sum(1, keepdim=True) + F.layer_norm(y * y.amax() + x.std(), (32,))",
        "64, 32",
    ),
    "kl_div": (
        "return F.kl_div(torch.log(torch.softmax(x, dim=1)), torch.softmax(y, dim=1), reduction='batchmean')"
        " + F.kl_div(x, y.abs(), reduction='sum') * 0.01 + F.kl_div(x, y, reduction='mean', log_target=True)"
        " + F.kl_div(x, torch.relu(y), reduction='none')",
        "64, 32",
    ),
    "slices": (
        "return torch.relu(x)[:, 1:17] * y[:, :16].T.T + x[:, None, 3] - x.narrow(1, 4, 16) + x[..., 0:1]"
        " + x.select(1, 5).unsqueeze(1) + (x[-8:, 2:6] @ y[:4, -16:]).sum()",
        "64, 32",
    ),
    "view_out": ("return torch.tanh(x * y).view(-1, 16)", "64, 32"),
    # a mean with a std (either order, either correction) of one input over the last dimension:
    # a norm's statistics (expert_plan_multi.c's moments_pair), the pass fused on cuda; a var
    # before its mean; over dim 0 they stay sibling reductions
    "mean_std_pairs": (
        "return (x - x.mean(-1, keepdim=True)) / x.std(1, keepdim=True)"
        " + y.var(1, keepdim=True, unbiased=False) * (y - y.mean(dim=-1, keepdim=True))"
        " + x.mean(0, keepdim=True) * x.std(0, keepdim=True, correction=0)",
        "64, 32",
    ),
    # slices with a step: strided views the elementwise pass reads in place, others copy
    "stepped": (
        "return x[:, ::2] * 2 + x[:, ::2] @ y[1::2, 3:19] + x[::4, 1::2].sum(0, keepdim=True)"
        " + x[::2, 5:21:3].mean()",
        "32, 32",
    ),
    # five sibling reductions (four share a kernel, the fifth has its own) over rows, and over
    # the whole tensor
    "siblings": (
        "return (x.sum(1, keepdim=True) * y.mean(1, keepdim=True) + (x * y).prod(1, keepdim=True)"
        " - x.std(1, keepdim=True) / (1 + x.var(1, correction=0, keepdim=True)) + (x - y).sum(1, keepdim=True))"
        " * F.mse_loss(x, y) + F.l1_loss(x, y)",
        "64, 32",
    ),
    # scans (expert_scan.c) along the last dim (rows) and the first (columns), with prologues
    "scans": (
        "return torch.cumsum(x * 2, dim=1) + (1 + 0.01 * x).cumprod(0) - torch.cumsum(y, -1)"
        " * torch.cumprod(torch.sigmoid(y), dim=1)",
        "64, 32",
    ),
    # attention's scores: b read in place, the 0-d scale kept on the module (_const)
    "scaled_softmax": ("return torch.softmax(x @ y.mT / math.sqrt(x.size(-1)), dim=-1)", "64, 32"),
    # a matmul's b that is a contiguous tensor with its last two dims swapped: read in place
    "matmul_transposed_b": (
        "return torch.softmax(x.view(4, 16, 32) @ y.view(4, 16, 32).transpose(2, 1) / math.sqrt(x.size(-1)),"
        " dim=-1).reshape(64, 16) + (x @ y.t()).sum(1, keepdim=True) + torch.matmul(x, y.permute(1, 0)).amax(1,"
        " keepdim=True) - (x.view(4, 16, 32) @ y.view(4, 16, 32).mT).mean(0).sum(1).amax()"
        " + (x.T @ y).sum() + torch.matmul(x.t(), y.view(1, 64, 32)).amax() + (y.mT @ x.T.mT).mean()",
        "64, 32",
    ),
    "mish_spellings": ("return F.mish(x * 12) - x * torch.tanh(F.softplus(y * 12))", "64, 32"),
    # distances (expert_plan_loss.c): the triplet margin loss's two or three per-row sums, one
    # multi-reduction kernel, then the hinge; p = 1, 2 and 3, swap, each reduction
    "distances": (
        "return F.triplet_margin_loss(x, y, torch.tanh(x - y), margin=0.5)"
        " + F.triplet_margin_loss(x, y, y * 0.5, p=1, swap=True, reduction='sum') * 0.01"
        " + F.pairwise_distance(x, y).sum() * F.triplet_margin_loss(x, y, x * y, reduction='none', p=3)",
        "64, 32",
    ),
    # diag(v) as a matmul's a or b (expert_plan_diag.c): the other operand's rows or columns
    # scaled, one elementwise chain with whatever follows
    "diag_products": (
        "return torch.diag(x[:, 0]) @ y + y @ torch.diag(y[0]) * 2"
        " + torch.matmul(torch.diag(torch.sigmoid(x[:, 1])), torch.relu(y)) + torch.mm(x, torch.diag(x[3]))",
        "64, 32",
    ),
    # chunk, split (by a size and by a list) and glu: pieces of a tensor read in place, a piece
    # of a piece, the shorter last chunk
    "pieces": (
        "a, b = x.chunk(2, dim=1)\n        c, d, e = torch.split(y, [8, 16, 8], dim=1)\n"
        "        f, g = y.split(16, -1)\n"
        "        return (F.silu(a) * b + F.glu(x, dim=-1) + d * f - g.chunk(4, 0)[1].sum()"
        " + torch.chunk(x, 3, dim=0)[2].mean() + (c * e).sum(1, keepdim=True))",
        "64, 32",
    ),
    # torch.cat, concat (expert_cat.c) of inputs, chains and views along the last and the first
    # dim, and zeros_like / full_like as lazy constants
    "cats": (
        "return torch.relu(torch.cat([x, y * 2, torch.tanh(x)], dim=1)).sum(0, keepdim=True)"
        " + torch.cat((x, y), 0).mean() + torch.concat([x[:, :8], torch.zeros_like(y[:, :4]),"
        " torch.full_like(x[:, :2], 0.5), torch.ones_like(y[:, 1:3])], dim=-1).amax(1, keepdim=True)",
        "64, 32",
    ),
    # reverse scans (expert_plan_flip.c): flip, scan, flip back along rows and down columns,
    # with prologues, and over strided views (the copy the prologue makes first is a step of
    # its own: the scan, not it, runs backwards)
    "reverse_scans": (
        "return torch.cumsum(x.flip(1), 1).flip(1) + torch.flip(torch.cumprod(torch.flip(1 + 0.01 * y, [0]),"
        " dim=0), dims=(0,)) * torch.cumsum(torch.flip(x * y, dims=[-1]), dim=-1).flip(-1)"
        " + torch.cumsum(y.t().flip(1), 1).flip(1).t() - torch.cumsum(x[:, ::2].flip(-1), -1).flip(-1).sum()",
        "64, 32",
    ),
    # einsum as the matrix product it is (expert_plan_einsum.c): either operand transposed,
    # batch indices, an implicit output, a tensor's last dim times a matrix
    "einsums": (
        "return torch.einsum('ij,kj->ik', x, y).sum(1, keepdim=True) + torch.einsum('ki,kj->ij', x, y).mean()"
        " + torch.einsum('bij,bjk->bik', x.view(4, 16, 32), y.view(4, 16, 32).transpose(1, 2)).mean()"
        " + torch.einsum('bhqd,bhkd->bhqk', x.view(2, 2, 16, 32), y.view(2, 2, 16, 32)).amax()"
        " + torch.einsum('ij,jk', x, y.T).sum(0, keepdim=True).T"
        " + torch.einsum('bijl,lk->bijk', [x.view(2, 4, 8, 32), y.T]).sum()",
        "64, 32",
    ),
    # tril and triu (expert_tri.c), functions and methods, any diagonal, over a matmul's output
    # and over a batch of matrices: a select against a mask made once
    "triangles": (
        "return torch.tril(x @ y.T)[:, :32] + torch.triu(x, diagonal=1) * 2 + x.tril(-3)"
        " - torch.triu(torch.relu(y), 2) + torch.tril(x.view(4, 16, 32), 5).view(64, 32)",
        "64, 32",
    ),
}


def graph_of(task: Path, tmp_path: Path, backend: str) -> Path:
    """The harness's graph of the task (made once for every test process: tests/graphcache.py)."""
    return graphcache.graph_file(task, backend, tmp_path)


def generate(backend: str, graph: Path, *write: str) -> dict:
    if not PROBE.is_file():
        pytest.fail(f"{PROBE} is missing: run `make build` first")
    p = subprocess.run([str(PROBE), backend, str(graph), *write], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", ["conv_bn_relu", "linear_bias_relu", "max_pool2d", "conv_transpose2d_relu"])
def test_the_plan_outlives_the_graph_it_came_from(tmp_path: Path, name: str) -> None:
    """The episode releases the verdict that carried the graph when the next verdict comes, and
    the expert writes later variants of its kernels after that: every source and the model must
    be the same with the graph released once the plan is built. glibc's MALLOC_PERTURB_ fills
    freed memory, so a plan still reading the released graph writes something else or crashes
    (a cpu worker died of SIGSEGV in CI this way, tuning conv_bn_relu's convolution)."""
    task = ROOT / "examples" / "tasks" / f"{name}.py"
    for backend in ("cpu", "cuda"):
        graph = graph_of(task, tmp_path, backend)
        kept = generate(backend, graph)
        env = {**os.environ, "MALLOC_PERTURB_": "165"}
        p = subprocess.run(
            [str(PROBE), "--free-graph", backend, str(graph)], capture_output=True, text=True, env=env
        )
        assert p.returncode == 0, (backend, p.returncode, p.stderr)
        released = json.loads(p.stdout)
        assert released["model"] == kept["model"], backend
        assert [st["variants"] for st in released["steps"]] == [st["variants"] for st in kept["steps"]], (
            backend
        )
        assert all(st["variants"] for st in kept["steps"]), backend


def compile_all(backend: str, sources: dict[str, str], tmp_path: Path) -> None:
    """Every source compiled; sources that differ only in their function's name (a transformer's
    layers repeat their kernels) once. On cuda the sources are compiled as two translation units
    of many (nvcc's fixed cost per file, mostly the host side, is most of its time on one kernel),
    each source in a namespace of its own with its function renamed and its macros undefined after
    it; where a unit fails, its sources are compiled one by one, so the failure names its source
    (and a unit that fails only for being joined is not the sources' fault)."""
    unique: dict[str, tuple[str, str]] = {}
    for n, src in sources.items():
        unique.setdefault(re.sub(r"\bkf_op\d+\b", "kf_op", src), (n, src))
    items = list(unique.values())
    if backend == "cuda" and len(items) > 2:
        units = [items[i::2] for i in range(2)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            joined = [
                pool.submit(joined_compiles, unit, tmp_path, f"unit{i}") for i, unit in enumerate(units)
            ]
            items = [it for unit, f in zip(units, joined) if not f.result() for it in unit]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for f in [pool.submit(compiles, backend, src, tmp_path, n) for n, src in items]:
            f.result()


def joined_compiles(unit: list[tuple[str, str]], tmp_path: Path, name: str) -> bool:
    """One .cu of the unit's sources (see compile_all); true where it compiled warning-free."""
    includes: set[str] = set()
    bodies = []
    for i, (_, src) in enumerate(unit):
        lines = src.splitlines()
        includes.update(ln for ln in lines if ln.startswith("#include"))
        body = re.sub(
            r"\bkf_op(\d+)\b",
            rf"kf_op\1_u{i}",
            "\n".join(ln for ln in lines if not ln.startswith("#include")),
        )
        undef = "".join(f"#undef {m}\n" for m in dict.fromkeys(re.findall(r"^#define (\w+)", body, re.M)))
        bodies.append(f"namespace kf_u{i} {{\n{body}\n}}  // namespace kf_u{i}\n{undef}")
    f = tmp_path / f"{name}.cu"
    f.write_text("\n".join(sorted(includes)) + "\n" + "\n".join(bodies))
    p = subprocess.run(nvcc_command(f), capture_output=True, text=True, timeout=900)
    return p.returncode == 0


def nvcc_command(f: Path) -> list[str]:
    cmd = [NVCC, "-std=c++17", "-O3", "-c", "-Xcompiler", "-fPIC,-Wall", "-Werror", "all-warnings"]
    return cmd + ["-gencode=arch=compute_90,code=sm_90", str(f), "-o", str(f) + ".o"]


def compiles(backend: str, src: str, tmp_path: Path, n: str) -> None:
    ext = "cu" if backend == "cuda" else "cpp"
    f = tmp_path / f"k{n}.{ext}"
    f.write_text(src)
    if backend == "cuda":
        cmd = nvcc_command(f)
    else:
        cmd = [
            "g++",
            "-std=c++17",
            "-O3",
            "-march=native",
            "-fopenmp",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "-Werror",
        ]
        cmd += ["-c", str(f), "-o", str(f) + ".o"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-3000:]}\n{src}"


def task_file(name: str, tmp_path: Path) -> Path:
    if name in SMALL:
        body, yshape = SMALL[name]
        task = tmp_path / f"{name}.py"
        task.write_text(TASK_LIKE.replace("{body}", body).replace("{yshape}", yshape))
        return task
    return ROOT / "examples" / "tasks" / f"{name}.py"


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize("name", TASKS + list(SMALL))
def test_every_task_is_planned_and_compiles(tmp_path: Path, backend: str, name: str) -> None:
    if backend == "cuda" and name not in EVERY_VARIANT + CUDA_ALSO + list(SMALL):
        pytest.skip("cuda: one or two tasks per kind of kernel here; all of them in make test-gpu")
    if backend == "cuda" and not Path(NVCC).exists():
        pytest.fail(f"nvcc not found at {NVCC}: the CUDA toolkit is part of this machine's set-up")
    g = generate(backend, graph_of(task_file(name, tmp_path), tmp_path, backend))
    assert g["ok"], g["detail"]
    assert g["steps"], g
    assert "class ModelNew(nn.Module)" in g["model"] and "return t" in g["model"]
    sources: dict[str, str] = {}
    for s, step in enumerate(g["steps"]):
        assert step["path"] == f"kernels/kf_op{s}.{'cu' if backend == 'cuda' else 'cpp'}"
        assert f"self.k.kf_op{s}(" in g["model"]
        assert len(step["variants"]) >= 1
        # cuda: nvcc is slow; every variant of one task per kind, the first of the others
        many = backend == "cpu" or name in EVERY_VARIANT
        for v, src in enumerate(step["variants"] if many else step["variants"][:1]):
            assert f'extern "C" int kf_op{s}(' in src
            sources[f"{s}_{v}"] = src
    compile_all(backend, sources, tmp_path)


def test_plans_fuse_what_they_can(tmp_path: Path) -> None:
    """The partition itself: a norm's statistics and the pass that reads them are one kernel (a
    group norm's, statistics + one pass); a chain before a reduction is its prologue (no pass of
    its own); matmul + bias + activation is two kernels."""

    def kinds(name: str, backend: str = "cpu") -> list[str]:
        g = generate(backend, graph_of(task_file(name, tmp_path), tmp_path, backend))
        assert g["ok"], g["detail"]
        return [s["kind"] for s in g["steps"]]

    assert kinds("gelu") == ["ew"]
    for backend in ("cpu", "cuda"):  # x*x the mean's prologue, the pass in the mean's kernel
        assert kinds("rms_norm", backend) == ["reduce"]
        assert kinds("layer_norm_gelu", backend) == ["moments"]  # normalise + affine + gelu
    # a group norm's too on the cpu, where a group is re-read from the cache of its thread
    assert kinds("group_norm") == ["moments"]
    assert kinds("batch_norm1d_relu") == ["moments", "ew"]  # a channel's values are strided
    assert kinds("linear_bias_relu") == ["gemm", "ew"]
    assert kinds("softmax_rows") == ["softmax"]
    assert kinds("conv2d_relu_maxpool") == ["conv", "ew", "pool"]
    # a convolution's bias is read by the statistics and the pass after it, not added by a
    # pass of its own (a leaf that broadcasts in the moments' prologue)
    assert kinds("conv_bn_relu", "cuda") == ["conv", "moments", "ew"]
    hinge = tmp_path / "hinge.py"
    hinge.write_text(TASK_LIKE.replace("{body}", "return torch.mean(torch.clamp(1 - x * y, min=0))")
                     .replace("{yshape}", "64, 1"))  # fmt: skip
    for backend in ("cpu", "cuda"):
        g = generate(backend, graph_of(hinge, tmp_path, backend))
        assert [st["kind"] for st in g["steps"]] == ["reduce"], g["model"]
        assert "*_bqm(" in g["model"]
    # a b that is a contiguous tensor with its last two dims swapped is read in place (op =
    # transpose), not copied first; any other strided b is copied; a 0-d scale is read by the
    # softmax's prologue, not applied by a pass of its own
    tb = tmp_path / "transposed_b.py"
    tb.write_text(TASK_LIKE.replace("{body}", "return torch.softmax(x @ y.transpose(-2, -1) / math.sqrt(y.size(-1)),"
                                    " dim=-1).sum()"
                                    " + x.view(4, 16, 32) @ y.view(32, 4, 16).transpose(0, 1)")
                  .replace("{yshape}", "64, 32"))  # fmt: skip
    for backend in ("cpu", "cuda"):
        g = generate(backend, graph_of(tb, tmp_path, backend))
        assert [st["kind"] for st in g["steps"]] == ["gemm", "softmax", "reduce", "ew", "gemm", "ew"], g[
            "model"
        ]
        assert "kTransB = true" in g["steps"][0]["variants"][0]
        assert "kTransB = false" in g["steps"][4]["variants"][0]
        assert "kTransA = false" in g["steps"][0]["variants"][0]
    # and a matrix a: x.T @ y (KernelBench's transposed A), both: x.T @ y.T
    ta = tmp_path / "transposed_a.py"
    ta.write_text(TASK_LIKE.replace("{body}", "return x.T @ y + torch.matmul(y.T, x).T + x.T @ y.view(32, 64).T")
                  .replace("{yshape}", "64, 32"))  # fmt: skip
    for backend in ("cpu", "cuda"):
        g = generate(backend, graph_of(ta, tmp_path, backend))
        srcs = [st["variants"][0] for st in g["steps"] if st["kind"] == "gemm"]
        assert len(srcs) == 3 and all("kTransA = true" in s for s in srcs), g["model"]
        assert "ew" not in [st["kind"] for st in g["steps"]][:3], g["model"]  # no copies first
        assert "kTransB = true" in srcs[2] and "kTransB = false" in srcs[0]
    # picks that stay contiguous (ints, then one slice of step 1, then full slices: q, k and v
    # of one packed tensor) are read in place from their first element, a transposed one as
    # the matmul's transposed operand; the sums read theirs through strides; judged on cpu
    pk = tmp_path / "picks.py"
    pk.write_text(TASK_LIKE.replace("{body}", "a = torch.relu(x).view(2, 32, 32)\n        return a[0] @ a[1]"
                                    ".transpose(0, 1) + a[1, 2:9].sum() + a[:, 3].sum() + y")
                  .replace("{yshape}", "32, 32"))  # fmt: skip
    for backend in ("cpu", "cuda"):
        g = generate(
            backend, graph_of(pk, tmp_path, backend), *([str(tmp_path / "pk")] if backend == "cpu" else [])
        )
        assert [st["kind"] for st in g["steps"]][:2] == ["ew", "gemm"], g["model"]  # no copy of a pick
        assert "kTransB = true" in g["steps"][1]["variants"][0]
    v = judged(pk, tmp_path / "pk")
    assert v["status"] == "ok" and v["correct"], v
    # cuda: a layer norm's statistics and the pass that reads them are one kernel
    # (expert_plan_fuse.c); group norm's groups are too long to re-read from cache
    assert kinds("layer_norm_gelu", "cuda") == ["moments"]
    assert kinds("layer_norm", "cuda") == ["moments"]
    assert kinds("group_norm", "cuda") == ["moments", "ew"]
    # sibling reductions of one shape and dims read the inputs once, in one kernel
    # (expert_plan_multi.c); a reduction that reads another's result stays a step of its own
    for name in ("cosine_rows", "var_prod", "mse_smooth_l1"):
        extra = ROOT / "bench" / "tasks_extra" / f"{name}.py"
        for backend in ("cpu", "cuda"):
            steps = generate(backend, graph_of(extra, tmp_path, backend))["steps"]
            assert [st["kind"] for st in steps] == ["multi", "ew"], (name, backend)
    # but a mean and a std of one input over the last dimension are a norm's statistics, which
    # the pass joins as a layer norm's does; over another dimension they stay siblings
    std_rows = ROOT / "bench" / "tasks_extra" / "standardize_rows.py"
    for backend in ("cpu", "cuda"):
        steps = generate(backend, graph_of(std_rows, tmp_path, backend))["steps"]
        assert [st["kind"] for st in steps] == ["moments"], backend
        assert "KF_SECOND = 2" in steps[0]["variants"][0] and "KF_CORR = 1.0" in steps[0]["variants"][0]
    cols = tmp_path / "std_cols.py"
    cols.write_text(TASK_LIKE.replace("{body}", "return (x - x.mean(0, keepdim=True)) / x.std(0, keepdim=True)")
                    .replace("{yshape}", "64, 32"))  # fmt: skip
    assert [st["kind"] for st in generate("cuda", graph_of(cols, tmp_path, "cuda"))["steps"]] == [
        "multi",
        "ew",
    ]
    pairs = tmp_path / "pairs.py"
    pairs.write_text(TASK_LIKE.replace("{body}", SMALL["mean_std_pairs"][0]).replace("{yshape}", "64, 32"))
    for backend in ("cpu", "cuda"):  # x's mean and std, y's var and mean; then x's over dim 0
        steps = generate(backend, graph_of(pairs, tmp_path, backend))["steps"]
        assert [st["kind"] for st in steps] == ["moments", "moments", "multi", "ew"], backend
        assert "KF_SECOND = 1" in steps[1]["variants"][0] and "KF_CORR = 0.0" in steps[1]["variants"][0]
    manual = ROOT / "bench" / "tasks_extra" / "manual_layer_norm.py"
    assert [st["kind"] for st in generate("cuda", graph_of(manual, tmp_path, "cuda"))["steps"]] == ["moments"]
    dep = tmp_path / "dependent.py"
    dep.write_text(TASK_LIKE.replace("{body}", "return ((x - x.mean(1, keepdim=True)) ** 2).sum(1, keepdim=True)"
                                     " + x.sum(1, keepdim=True) + y.amax(1, keepdim=True)")
                   .replace("{yshape}", "64, 32"))  # fmt: skip
    # the mean; the sum of (x - mean) ** 2, the mean read in its prologue (it broadcasts along
    # the rows: no pass writes the squares), which a sibling reduction does not join (a
    # multi-reduction reads leaves of its input's shape only); x's sum; y's maximum; the rest
    assert [st["kind"] for st in generate("cpu", graph_of(dep, tmp_path, "cpu"))["steps"]] == [
        "reduce",
        "reduce",
        "reduce",
        "reduce",
        "ew",
    ]
    # an instance norm's statistics and its pass stay two kernels: the layer norm's fused kernel
    # walks a group of many rows at 0.594 ms where the two take 0.226 (H200, bench/README.md)
    inorm = ROOT / "bench" / "tasks_extra" / "instance_norm.py"
    assert [st["kind"] for st in generate("cuda", graph_of(inorm, tmp_path, "cuda"))["steps"]] == [
        "moments",
        "ew",
    ]
    # cuda: a convolution takes the pass that reads its output (bias, activation) as its
    # epilogue (expert_plan_fuse.c, expert_conv_epi.c); cpu keeps a pass of its own
    assert kinds("conv3d_gelu", "cuda") == ["conv"]
    assert kinds("conv2d_relu_maxpool", "cuda") == ["conv", "pool"]
    assert kinds("conv3d_gelu") == ["conv", "ew"]

    def conv_steps(body: str) -> tuple[list[str], bool]:
        task = tmp_path / "conv_tail.py"
        task.write_text(CONV_LIKE.replace("{body}", body))
        g = generate("cuda", graph_of(task, tmp_path, "cuda"))
        assert g["ok"], g["detail"]
        return [st["kind"] for st in g["steps"]], "struct KfEpi {" in g["steps"][0]["variants"][0]

    # a residual (a leaf of the output's shape) and a scale join; the output read again later
    # (returned as well, or beside the pass in a cat) keeps the pass apart, since the fused
    # step no longer writes it
    assert conv_steps("return torch.relu(self.c(x)) * 0.5 + x") == (["conv"], True)
    assert conv_steps("y = self.c(x)\n        return torch.tanh(y), y") == (["conv", "ew", "ew"], False)
    assert conv_steps("y = self.c(x)\n        return torch.cat([torch.relu(y), y], 1)")[1] is False
    # and an RMS norm's mean of squares with the pass that reads it
    assert kinds("rms_norm", "cuda") == ["reduce"]
    assert kinds("rms_norm_residual", "cuda") == ["reduce"]
    assert kinds("mean_dim_tanh", "cuda") == ["reduce", "ew"]  # the pass is not of x's shape
    # an L2 normalisation: the sum of squares and the pass that divides by its root, one kernel
    l2 = tmp_path / "l2_normalise.py"
    l2.write_text(TASK_LIKE.replace("{body}", "return x / torch.norm(x, p=2, dim=-1, keepdim=True) + y")
                  .replace("{yshape}", "64, 32"))  # fmt: skip
    assert [st["kind"] for st in generate("cuda", graph_of(l2, tmp_path, "cuda"))["steps"]] == ["reduce"]
    # Mish's tanh(softplus(x)) is one exponential and a division: no log1p, no tanh
    for name in ("mish", "mish_spellings"):
        src = generate("cuda", graph_of(task_file(name, tmp_path), tmp_path, "cuda"))["steps"][0]["variants"][
            0
        ]
        assert "log1pf" not in src and "tanhf" not in src and "expf(" in src, src

    def held(task: Path) -> list[tuple[str, str]]:
        g = generate("cuda", graph_of(task, tmp_path, "cuda"))
        src = g["steps"][0]["variants"][0]
        assert "norm_reg" in src, f"{task.name}: no register-held row kernel"
        return re.findall(r"const float4 a(\d+) = xr(\d+)\[k\];", src)

    # a norm whose group is one row is held in registers (expert_norm_fused.c's norm_reg), and
    # when the pass reads every tensor the statistics read, it takes them from the registers
    assert held(task_file("rms_norm", tmp_path)) == [("0", "0")]
    assert held(task_file("layer_norm_gelu", tmp_path)) == [("0", "0")]
    assert held(task_file("rms_norm_residual", tmp_path)) == [
        ("0", "0"),
        ("1", "1"),
    ]  # x and r, the statistics' x + r
    # the pass reads x alone, the statistics x + y: the registers hold the prologue's values
    task = tmp_path / "norm_of_sum.py"
    body = "return x * torch.rsqrt(((x + y) * (x + y)).mean(-1, keepdim=True) + 1e-6)"
    task.write_text(TASK_LIKE.replace("{body}", body).replace("{yshape}", "64, 32"))
    assert held(task) == []


def judged(task: Path, cand: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cpu")
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", "evaluate", "--no-jail", "--task", str(task), "--candidate", str(cand),
         "--backend", "cpu", "--phase", "verify"],
        cwd=str(HARNESS), env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", ["0", "1"])
@pytest.mark.parametrize("name", TASKS + list(SMALL))
def test_generated_candidate_is_correct(tmp_path: Path, name: str, variant: str) -> None:
    if variant == "1" and name not in EVERY_VARIANT + list(SMALL) + ["conv_bn_relu", "group_norm"]:
        pytest.skip("variant 1 is judged for one task per kind of kernel")
    task = task_file(name, tmp_path)
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand), variant)
    assert g["ok"], g["detail"]
    v = judged(task, cand)
    assert v["status"] == "ok" and v["correct"], (v["status"], v.get("message"), v.get("checks"), v["flags"])
    assert v["flags"] == [], v  # verify phase: the correctness trials, untimed (reward null)


LOSS_MODULES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mse = nn.MSELoss(reduction="sum")
        self.sl1 = nn.SmoothL1Loss(beta=0.3)
        self.huber = nn.HuberLoss(reduction="none", delta=0.7)
        self.l1 = nn.L1Loss()
        self.cos = nn.CosineSimilarity(dim=0)
        self.kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
        # its degree is its attribute norm (read as 2 once: p=1 was judged incorrect)
        self.d1 = nn.PairwiseDistance(p=1.0)

    def forward(self, x, y):
        return (self.huber(x, y) * (self.mse(x, y) + self.sl1(x, y) - self.l1(x, y)) + self.cos(x, y)
                + self.kl(x, y * 0.1) + self.d1(x, y).sum())


def get_inputs():
    return [torch.randn(128, 64), torch.randn(128, 64)]


def get_init_inputs():
    return []
"""


INSTANCE_NORM_POOL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(8, affine=True, eps=1e-4)
        self.plain = nn.InstanceNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        with torch.no_grad():  # an affine that a kernel ignoring it would get wrong
            self.inorm.weight.add_(0.5 * torch.randn(8))
            self.inorm.bias.add_(0.5 * torch.randn(8))

    def forward(self, x):
        return (self.inorm(x) * self.pool(x) + self.plain(x * 2) + F.adaptive_avg_pool2d(x, (1, 1))
                + F.instance_norm(x - 1))


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return []
"""


CONV_FAMILY = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        self.vol = nn.Conv3d(2, 3, 3, padding=1)
        self.up3 = nn.ConvTranspose3d(3, 2, 2, stride=2, bias=False)
        self.seq = nn.Conv1d(8, 8, 3, padding=1, groups=4)
        self.seq_t = nn.ConvTranspose1d(8, 4, 5, stride=2, padding=2, output_padding=1)

    def forward(self, x, v):
        a = torch.relu(self.up(x))
        b = torch.sigmoid(self.vol(v)) * 2 - 1
        c = self.up3(b) + v.mean()
        s = x.mean(dim=2)
        d = F.gelu(self.seq(s)) + s
        return a.sum(dim=(2, 3)) + c.mean() + self.seq_t(d).amax(dim=2)


def get_inputs():
    return [torch.randn(2, 8, 12, 10), torch.randn(2, 2, 4, 6, 6)]


def get_init_inputs():
    return []
"""

# elementwise chains over 5-D tensors, as 3-D convolutions' tails are: each broadcast folds
# into at most 4 dimensions (a per-channel parameter, a scalar, a [D, H, W] volume)
FIVE_D = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(3, 1, 1, 1) + 0.5)
        self.plane = nn.Parameter(torch.randn(4, 5, 6))

    def forward(self, x):
        y = torch.relu(x * self.scale + x.mean()) - torch.tanh(x + self.plane)
        return y.sum(dim=(2, 3, 4)) + y.amax(dim=1).mean()


def get_inputs():
    return [torch.randn(2, 3, 4, 5, 6)]


def get_init_inputs():
    return []
"""

# nn.PReLU with a weight per channel (drawn, so that a weight read along the wrong dim shows),
# F.prelu with one weight, F.normalize (p 2 and 1), expand and expand_as views
PRELU_NORMALIZE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pr = nn.PReLU(8)
        with torch.no_grad():
            self.pr.weight.uniform_(0.1, 0.9)
        self.w1 = nn.Parameter(torch.rand(1) * 0.5)

    def forward(self, x):
        a = self.pr(x) + F.prelu(x * 2, self.w1)
        b = F.normalize(x, dim=1) + F.normalize(x, p=1.0, dim=-1, eps=1e-6)
        c = x.mean(1).unsqueeze(1).expand_as(x) - x.amax(dim=(2, 3), keepdim=True).expand(-1, -1, 16, 16)
        return a * b + c


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return []
"""

# a boolean mask and integer inputs (expert_cast.c): each read once into float32, then a
# masked cumsum, a where on the mask, comparisons and products with the integers
MASKS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask, idx, small):
        return (torch.cumsum(x * mask, dim=1) + torch.where(mask, x, 0.0) * idx
                - (idx > 2) * x.softmax(1) + small * 0.5)


def get_inputs():
    return [torch.randn(16, 48), torch.rand(16, 48) > 0.5, torch.randint(0, 5, (16, 1)),
            torch.randint(-3, 3, (48,), dtype=torch.int32)]


def get_init_inputs():
    return []
"""

# cross entropy (expert_xent.c): logits and int64 class indices read as they are, each
# reduction, the module with an ignore_index that some targets hit
XENT = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(ignore_index=3)

    def forward(self, x, t):
        return (F.cross_entropy(x, t) + F.cross_entropy(x * 2, t, reduction='sum') * 0.01
                + self.loss(x, t) + F.cross_entropy(x, t, reduction='none').amax())


def get_inputs():
    return [torch.randn(48, 10) * 3, torch.randint(0, 10, (48,))]


def get_init_inputs():
    return []
"""

SCALAR_INPUT = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.smin = nn.Softmin(dim=0)

    def forward(self, s, x, t):
        return F.softmin(x * s, dim=1) + self.smin(x) * t - s / t


def get_inputs():
    return [2.5, torch.randn(48, 10), 0.75]


def get_init_inputs():
    return []
"""

# x.float(), .to(torch.float32) and .type(torch.float32) of arg-reductions' indices (a cast
# kernel) and of a comparison or a float (the same value)
CASTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = (x > 0).to(torch.float32)
        i = torch.argmin(x, dim=2).to(dtype=torch.float32)
        j = torch.argmax(x, dim=2, keepdim=True).type(torch.float32)
        return (x.float() * m).sum(dim=2) + i * 0.25 + j.squeeze(2) - torch.argmax(x[:, :, :32], 1).float()


def get_inputs():
    return [torch.randn(8, 32, 48)]


def get_init_inputs():
    return []
"""

# ShuffleNet's unit: grouped 1x1 convolutions, a depthwise one, batch norms, and the channel
# shuffle (a 5-D view transposed and copied: its dims merge to 4 by the strides inspect records)
SHUFFLE_UNIT = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(24, 24, 1, groups=3, bias=False)
        self.bn1 = nn.BatchNorm2d(24)
        self.conv2 = nn.Conv2d(24, 24, 3, padding=1, groups=24, bias=False)
        self.bn2 = nn.BatchNorm2d(24)
        self.conv3 = nn.Conv2d(24, 24, 1, groups=3, bias=False)
        self.bn3 = nn.BatchNorm2d(24)
        self.groups = 3

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        b, c, h, w = out.size()
        out = out.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(b, -1, h, w)
        out = self.bn2(self.conv2(out))
        out = F.relu(self.bn3(self.conv3(out)))
        return out + x


def get_inputs():
    return [torch.randn(4, 24, 12, 12)]


def get_init_inputs():
    return []
"""

# 0-d tensors made in forward(): torch.tensor(c), which fx folds into a constant of its own
# (inspect keeps its value), and torch.tensor(c, device=x.device), a call (KernelBench's
# torch.min(x, torch.tensor(v, device=x.device)))
TENSOR_CONSTANTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.c = 0.25

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, torch.tensor(self.c)) * torch.tensor(2.0, dtype=torch.float32)
        return torch.max(x, torch.tensor(-0.5, device=x.device)) + torch.tensor(float("inf")).clamp(max=1.0)


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return []
"""

# nn.Flatten (start_dim 1 by default), and a dtype argument that keeps float32
FLATTEN_DTYPES = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        y = F.softmax(self.fc(self.flat(x)), dim=1, dtype=torch.float32)
        return y + torch.cumsum(y, 1, dtype=torch.float32) + nn.Flatten(0, 1)(x)[:4, :10]


def get_inputs():
    return [torch.randn(4, 8, 16)]


def get_init_inputs():
    return []
"""

# nn.RMSNorm with its default eps (the dtype's epsilon), over two dims without an affine, and
# F.rms_norm with a weight and an eps
RMS_NORMS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = nn.RMSNorm(64)
        self.n2 = nn.RMSNorm([8, 64], eps=1e-5, elementwise_affine=False)
        self.w = nn.Parameter(torch.randn(64))

    def forward(self, x):
        y = self.n(x) + self.n2(x)
        return F.rms_norm(y, (64,), self.w, 1e-6) * 2.0


def get_inputs():
    return [torch.randn(4, 8, 64) * 3]


def get_init_inputs():
    return []
"""

# addmm with a bias and with beta and alpha, baddbmm, outer and ger: a matmul (or a view) each,
# the rest fused
ADDMM_OUTER = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(48, 32) * 0.1)
        self.b = nn.Parameter(torch.randn(48))

    def forward(self, x, y, v, u, z):
        h = torch.addmm(self.b, x, self.w.t())
        h2 = torch.addmm(h, torch.relu(x), self.w.t(), beta=0.5, alpha=2.0)
        o = torch.outer(v, u) + torch.ger(u[:16], v[:48].sigmoid()).sum()
        bb = torch.baddbmm(z, y, y.transpose(1, 2), alpha=0.25)
        return h2 + o[:64, :48] * 0.1 + bb.mean()


def get_inputs():
    return [torch.randn(64, 32), torch.randn(4, 10, 12), torch.randn(64), torch.randn(48), torch.randn(4, 10, 10)]


def get_init_inputs():
    return []
"""

# BCE (its logs clamped at -100) and BCE with logits, soft margin and margin ranking losses, as
# modules (reductions from attributes, a margin) and functions
BCE_MARGIN = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.BCEWithLogitsLoss()
        self.l2 = nn.BCELoss(reduction="sum")
        self.l3 = nn.SoftMarginLoss()
        self.l4 = nn.MarginRankingLoss(margin=0.3)

    def forward(self, x, y, z):
        t = torch.sigmoid(y)
        s = torch.sign(z)
        return (self.l1(x, t) + self.l2(torch.sigmoid(x), t) * 0.01 + F.binary_cross_entropy_with_logits(x, t, reduction="sum") * 0.001
                + self.l3(x, s) + self.l4(x, y, s) + F.margin_ranking_loss(x, z, s) + F.soft_margin_loss(y, s, reduction="sum") * 0.01)


def get_inputs():
    return [torch.randn(64, 300) * 3, torch.randn(64, 300), torch.randn(64, 300)]


def get_init_inputs():
    return []
"""

# nll_loss (function and nn.NLLLoss) of a log_softmax over the classes: the cross entropy of
# its logits, the log_softmax no pass of its own
NLL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ls = nn.LogSoftmax(dim=1)
        self.nll = nn.NLLLoss()

    def forward(self, x, t):
        return F.nll_loss(F.log_softmax(x, dim=1), t) + self.nll(self.ls(x * 2.0), t) + F.nll_loss(torch.log_softmax(x, -1), t, reduction="sum") * 0.01


def get_inputs():
    return [torch.randn(128, 50), torch.randint(0, 50, (128,))]


def get_init_inputs():
    return []
"""

# nn.Softmax2d over [N, C, H, W] and [C, H, W]: a softmax over dim -3
SOFTMAX2D = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = nn.Softmax2d()

    def forward(self, x):
        return self.s(x) + self.s(x[0]).sum(0)


def get_inputs():
    return [torch.randn(4, 16, 12, 10)]


def get_init_inputs():
    return []
"""

# module tasks kept as files: gathers, attention, embeddings, gather by indices (the docstring
# of each says what it covers)
TASK_FILES = {p.stem: p.read_text() for p in sorted((Path(__file__).parent / "expert_tasks").glob("*.py"))}
SDPA_A, MHA, EMBED = TASK_FILES["sdpa_a"], TASK_FILES["multihead_attention"], TASK_FILES["embedding"]
# causal with keys longer than the queries (top-left aligned), a mask computed in forward
SDPA_B = SDPA_A.replace(
    """        b = F.scaled_dot_product_attention(q, kk, kk * 2.0, attn_mask=bmask)
        c = F.scaled_dot_product_attention(q, kk, kk, attn_mask=fmask, scale=0.3)
        y = a.transpose(1, 2).contiguous().view(B, T, C)
        return torch.cat([y.flatten(), b.flatten(), c.flatten()])""",
    """        d = F.scaled_dot_product_attention(q, kk, torch.tanh(kk), is_causal=True)
        e = F.scaled_dot_product_attention(kk, q, v, attn_mask=fmask.transpose(-2, -1) * 0.5)
        return torch.cat([a.flatten(), d.flatten(), e.flatten()])""",
)
assert SDPA_B != SDPA_A

MODULE_TASKS = {
    **TASK_FILES,
    "sdpa_b": SDPA_B,
    "masks": MASKS,
    "softmax2d": SOFTMAX2D,
    "nll": NLL,
    "bce_margin": BCE_MARGIN,
    "addmm_outer": ADDMM_OUTER,
    "rms_norms": RMS_NORMS,
    "flatten_dtypes": FLATTEN_DTYPES,
    "tensor_constants": TENSOR_CONSTANTS,
    "shuffle_unit": SHUFFLE_UNIT,
    "casts": CASTS,
    "cross_entropy": XENT,
    "loss_modules": LOSS_MODULES,
    "instance_norm_pool": INSTANCE_NORM_POOL,
    "conv_family": CONV_FAMILY,
    "five_d": FIVE_D,
    "prelu_normalize_expand": PRELU_NORMALIZE,
    # Python numbers among the inputs, the first of them first (KernelBench's matrix times a
    # scalar), read as 0-d tensors; Softmin, module and function
    "scalar_input": SCALAR_INPUT,
}


@pytest.mark.parametrize("name", list(MODULE_TASKS))
def test_module_spellings_are_planned_and_correct(tmp_path: Path, name: str) -> None:
    """nn.MSELoss, SmoothL1Loss, HuberLoss, L1Loss, CosineSimilarity, PairwiseDistance with their attributes
    (the functional spellings are in SMALL's losses); nn.InstanceNorm2d with and without an
    affine, F.instance_norm, nn.AdaptiveAvgPool2d(1) and F.adaptive_avg_pool2d; transposed, 1-D
    and 3-D convolutions with their biases fused into what follows; chains over 5-D tensors:
    judged on cpu, and their cuda kernels compiled."""
    task = tmp_path / f"{name}.py"
    task.write_text(MODULE_TASKS[name])
    g = generate("cuda", graph_of(task, tmp_path, "cuda"))
    assert g["ok"], g["detail"]
    kinds = [st["kind"] for st in g["steps"]]
    if name == "conv_family":  # five convolutions, no pass of their own for a bias (6 tails)
        assert kinds.count("conv") == 5 and kinds.count("ew") <= 6, kinds
    if name == "gather_prologue":  # each chain read by its gather: no elementwise pass
        assert kinds.count("gather") == 6 and "ew" not in kinds, kinds
    if name == "nll":  # the log_softmax read only by the nll: no pass of its own
        assert kinds.count("xent") == 3 and "softmax" not in kinds, kinds
    if name in ("lstm_state", "gru_rnn"):  # one step for each recurrent layer, as many as layers
        assert kinds.count("rnn") == 2 + (name == "gru_rnn"), kinds
    # every variant of a recurrent layer's kernel (1: the recurrent product inside the cell, 2:
    # one persistent kernel for all steps, falling back to 1 where it does not fit)
    assert all(len(st["variants"]) == 3 for st in g["steps"] if st["kind"] == "rnn"), kinds
    sources = {f"{i}_{v}": src for i, st in enumerate(g["steps"]) for v, src in enumerate(st["variants"])
               if v == 0 or st["kind"] == "rnn"}  # fmt: skip
    compile_all("cuda", sources, tmp_path)
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand), "0")
    assert g["ok"], g["detail"]
    v = judged(task, cand)
    assert v["status"] == "ok" and v["correct"] and v["flags"] == [], v


@pytest.mark.parametrize(
    "body,named",
    [
        ("return F.interpolate(x.view(1, 1, 64, 32), scale_factor=2, mode='bicubic')", "bicubic"),
        ("return torch.cummax(x, 1).indices.float() + y", "the indices of cummax"),
        ("return torch.gather(x, 1, x.argmax(1, keepdim=True)) + y", "gather other than by an int64 input"),
        (
            "q = x.view(2, 4, 8, 32)\n        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)",
            "dropout",
        ),
        (
            "return F.interpolate(x.view(1, 1, 64, 32), scale_factor=0.5, mode='bilinear', antialias=True)",
            "antialias",
        ),
        (
            "return F.adaptive_max_pool2d(x.view(1, 1, 64, 32), (3, 5), return_indices=True)[0]",
            "max_pool2d_with_indices",
        ),
        ("return torch.diag(x[0]) + y[:32, :]", "diag"),
        ("return torch.diag(x) + 1", "diag"),
        # a diagonal (an index repeated within one operand) and an ellipsis
        ("return torch.einsum('ii->i', x[:32]) + y", 'einsum "ii->i"'),
        ("return torch.einsum('...ij,jk->...ik', x.view(2, 32, 32), y[:32])", 'einsum "...ij'),
        ("return x + torch.ones(64, 32, dtype=torch.int64, device=x.device)", "torch.ones of other than"),
        ("return x, torch.arange(x.size(0), device=x.device)", "an output of torch.arange's integers"),
        ("return torch.stack([x.argmax(1), y.argmax(1)], dim=0)", "stack of other than"),
        ("return torch.sort(x, dim=1)[0] + y", "sort"),
        ("return F.dropout(x, p=0.5) + y", "dropout with p=0.5 in training mode"),
        ("return (x > y).sum()", "a reduction of a comparison's boolean tensor"),
        ("return x[:, [0, 2]] + 1", "indexing by a tensor or a list"),
        ("return x > y", "a comparison's boolean tensor used as a tensor"),
        ("return x * 2 if x.sum() > 0 else y", "could not be traced by torch.fx"),
        ("return x.view(4, 16, 32).mean(dim=(0, 2)) + 1", "not adjacent"),
        # a keyword read as a number that is an infinity: refused, not read as its default
        ("return F.hardtanh(x, min_val=float('-inf')) + y", "hardtanh"),
        # in-place updates another name would see: of an input (after the call too), of a tensor
        # a view was taken of, of a view
        ("x.add_(y)\n        return x", "add_"),
        ("a = x * 2\n        v = a[0]\n        a.add_(1)\n        return v + y", "add_"),
        ("a = x * 2\n        a[0].mul_(3)\n        return a + y", "mul_"),
        ("return torch.linalg.norm(x, ord=2) + y", "linalg_norm other than"),
        ("return x.sum(), None", "an output that is not a tensor or a tuple of tensors"),
    ],
)
def test_what_it_cannot_do_is_named(tmp_path: Path, body: str, named: str) -> None:
    task = tmp_path / "t.py"
    task.write_text(TASK_LIKE.replace("{body}", body).replace("{yshape}", "64, 32"))
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and named in g["detail"], g


EXTRA = sorted(p.stem for p in (ROOT / "bench" / "tasks_extra").glob("*.py"))


@pytest.mark.parametrize("name", EXTRA)
def test_extra_tasks_are_planned_and_correct(tmp_path: Path, name: str) -> None:
    """bench/tasks_extra (operators no example task uses, at realistic sizes, which
    scripts/gpu_expert.sh judges on the GPU with TASKS_DIR=bench/tasks_extra): planned on both
    backends, judged correct on cpu."""
    task = ROOT / "bench" / "tasks_extra" / f"{name}.py"
    g = generate("cuda", graph_of(task, tmp_path, "cuda"))
    assert g["ok"], g["detail"]
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand), "0")
    assert g["ok"], g["detail"]
    v = judged(task, cand)
    assert v["status"] == "ok" and v["correct"] and v["flags"] == [], v


def test_embedding_forms_not_planned_are_named(tmp_path: Path) -> None:
    """max_norm (which renormalises the weight's rows in place) and indices that are not an
    input of the task are refused, naming embedding."""
    task = tmp_path / "t.py"
    for old, new in [("F.embedding(pos, table)", "F.embedding(pos, table, max_norm=1.0)"),
                     ("F.embedding(pos, table)", "F.embedding(pos[:, :4], table)")]:  # fmt: skip
        task.write_text(EMBED.replace(old, new))
        g = generate("cpu", graph_of(task, tmp_path, "cpu"))
        assert not g["ok"] and "embedding" in g["detail"], g


LSTM = TASK_FILES["lstm_state"]


def test_state_kept_between_calls_is_named(tmp_path: Path) -> None:
    """A forward() that keeps a value computed from its inputs on its module for the next call
    (KernelBench's VanillaRNN) is refused naming the attribute, not planned as one call."""
    task = ROOT / "tests" / "harness" / "cases" / "task_keeps_state.py"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "keeps module attribute hidden between calls" in g["detail"], g


CALL = "out, state = self.lstm(x, (self.h0, self.c0))"


@pytest.mark.parametrize(
    "edits,named",
    [
        ([("dropout=0.0)", "dropout=0.0, proj_size=4)"), (CALL, "out, state = self.lstm(x)"),
          ("nn.Linear(hidden_size,", "nn.Linear(4,"), ("d, _ = self.dec(y.unsqueeze(0), state)", "d = y")],
         "proj_size"),
        # dropout between layers in training mode draws at random
        ([("dropout=0.0)", "dropout=0.5)")], "dropout 0.5 in training mode"),
        # a state __init__ made otherwise than by a draw: no candidate can make it again
        ([("self.h0 = torch.randn((num_layers, batch_size, hidden_size))",
           "self.h0 = torch.randn((num_layers, batch_size, hidden_size)) * 0.5")],
         "h0 that the module does not own"),
        # drawn after the module's parameters: the replay cannot reach it
        ([("        self.fc = nn.Linear(hidden_size, output_size)\n",
           "        self.fc = nn.Linear(hidden_size, output_size)\n        self.h0 = torch.randn(3, 3, 16)\n")],
         "h0 that the module does not own"),
    ],
)  # fmt: skip
def test_recurrent_refusals_are_named(tmp_path: Path, edits: list, named: str) -> None:
    """What a recurrent layer cannot do ends the plan naming it: an LSTM's projection,
    dropout in training mode, and initial states that ModelNew could not make again."""
    src = LSTM
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    task = tmp_path / "t.py"
    task.write_text(src)
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and named in g["detail"], g


def test_multihead_attention_weights_are_refused(tmp_path: Path) -> None:
    """The attention weights (item 1) are planned only when nothing reads them; a key padding
    mask is refused too, both naming MultiheadAttention."""
    task = tmp_path / "t.py"
    task.write_text(
        MHA.replace("a, _ = self.attn(s, s, s)", "a, w = self.attn(s, s, s)\n        a = a + w.sum()")
    )
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "MultiheadAttention" in g["detail"], g
    task.write_text(
        MHA.replace(
            "a, _ = self.attn(s, s, s)", "a, _ = self.attn(s, s, s, key_padding_mask=s[:, :, 0].t() > 0)"
        )
    )
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "MultiheadAttention" in g["detail"], g


def test_an_integer_result_is_named(tmp_path: Path) -> None:
    """A sum of a mask is an int64 tensor in PyTorch: its float copy's sum would have the wrong
    dtype, so it is refused by name; a float64 input is refused too."""
    task = tmp_path / "t.py"
    task.write_text(MASKS.replace("return (torch.cumsum", "return mask.sum(1, keepdim=True) + (torch.cumsum"))
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "of an integer result" in g["detail"], g
    task.write_text(MASKS.replace("torch.randn(16, 48)]", "torch.randn(16, 48, dtype=torch.float64)]")
                    .replace("torch.randn(16, 48),", "torch.randn(16, 48, dtype=torch.float64),"))  # fmt: skip
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "is a float64 tensor" in g["detail"], g


def test_a_returned_view_is_not_a_scratch_buffer(tmp_path: Path) -> None:
    """forward() returns a view of a step's output: that output must be new at every call (a
    caller may keep it), not the module's scratch buffer."""
    task = tmp_path / "t.py"
    task.write_text(TASK_LIKE.replace("{body}", SMALL["view_out"][0]).replace("{yshape}", "64, 32"))
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand), "0")
    assert g["ok"], g["detail"]
    body = (cand / "model_new.py").read_text().split("def forward", 1)[1]
    ret = body.strip().splitlines()[-1].split()[-1]  # the returned view, wN
    root = next(
        ln.split(" = ")[1].split(".view")[0] for ln in body.splitlines() if ln.strip().startswith(f"{ret} =")
    )
    alloc = next(ln for ln in body.splitlines() if ln.strip().startswith(f"{root} = "))
    assert "_alloc(" in alloc and "_scratch" not in alloc, body


def test_a_broadcast_that_does_not_fold_is_named(tmp_path: Path) -> None:
    """[2, 3, 4, 5, 6] + [3, 1, 5, 1]: five dimensions that no two operands walk alike."""
    task = tmp_path / "t.py"
    task.write_text(FIVE_D.replace("torch.randn(4, 5, 6)", "torch.randn(3, 1, 5, 1)"))
    g = generate("cpu", graph_of(task, tmp_path, "cpu"))
    assert not g["ok"] and "more than 4 dimensions that do not merge" in g["detail"], g


def test_cpu_erf_is_accurate(tmp_path: Path) -> None:
    """The cpu kernels' kf_erff and kf_expf (expert_cpu_math.c, which replace glibc's scalar erff
    so that the pass vectorises), taken from the gelu task's generated source and compiled with
    the harness's flags: erf within 1e-6 absolute of math.erf over [-12, 12], exp within 2e-7
    relative over its range, NaN and the infinities as erf gives them."""
    import ctypes
    import math

    g = generate("cpu", graph_of(task_file("gelu", tmp_path), tmp_path, "cpu"))
    src = g["steps"][0]["variants"][0]
    assert "kf_erff(" in src and " erff(" not in src, src
    start, end = src.index("static inline float kf_expf"), src.index('extern "C"')
    lib_src = tmp_path / "m.cpp"
    lib_src.write_text(
        "#include <cmath>\n#include <cstdint>\n"
        + src[start:end]
        + 'extern "C" float erf1(float x) { return kf_erff(x); }\n'
        + 'extern "C" float exp1(float x) { return kf_expf(x); }\n'
    )
    so = tmp_path / "m.so"
    cmd = ["g++", "-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-Wall", "-Werror"]
    subprocess.run([*cmd, str(lib_src), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    for f in (lib.erf1, lib.exp1):
        f.argtypes, f.restype = [ctypes.c_float], ctypes.c_float
    xs = [ctypes.c_float(i / 1000.0).value for i in range(-12000, 12001)]
    worst = max(abs(lib.erf1(x) - math.erf(x)) for x in xs)
    assert worst < 1e-6, worst
    # each x as the float the kernel gets (a decimal's rounding alone moves exp(68.34) by 4e-6)
    xs = [ctypes.c_float(i / 100.0).value for i in range(-8700, 8801)]
    worst = max(abs(lib.exp1(x) / math.exp(x) - 1.0) for x in xs)
    assert worst < 2e-7, worst
    assert math.isnan(lib.erf1(float("nan")))
    assert lib.erf1(float("inf")) == 1.0 and lib.erf1(float("-inf")) == -1.0
