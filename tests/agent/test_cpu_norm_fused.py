"""The expert's cpu norms with their pass fused into the statistics' kernel
(workers/policies/expert/expert_norm_fused_cpu.c), and the cpu broadcasting pass's chunks
(expert_bcast.c's kfw_cpu_chunks). A fused kernel's thread sums a group, then writes the pass
over the group's rows, reading the statistics as two scalars and every other input along the row
or, where one does not run along it, through a chunk buffer. Each case plans as the steps named
and matches PyTorch: rows longer than a chunk (1100 = 512 + 512 + 76), a per-row scale that is
not a statistic (one value repeated in a chunk), a GELU after the norm (the vectorisable math's
pragma ahead of the prologue), the plain mean and sum of a row as the statistic, a GroupNorm's
(statistics per group of channels, its per-channel affine in chunks) and an InstanceNorm's, fmax
and fmin over NaNs; unfused, a BatchNorm's pass over the strided channels (its statistics in
chunks) and an input read across its rows (a transposed view: gathered into the chunk)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cpu_rows import plan_and_build
from test_gemm_split_gpu import _load  # a module from its file

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        {init}

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""

# name: (init, body, input shape, the plan's steps)
CASES = {
    "layer_norm_gelu_long_rows": (
        "self.w = nn.Parameter(torch.randn(1100, generator=g))\n"
        "        self.b = nn.Parameter(torch.randn(1100, generator=g))",
        "F.gelu(F.layer_norm(x, (1100,), self.w, self.b))",
        "6, 5, 1100",
        ["moments"],
    ),
    "rms_norm_row_scale": (
        "self.w = nn.Parameter(torch.randn(700, generator=g))\n"
        "        self.s = nn.Parameter(torch.randn(4, 7, 1, generator=g))",
        "x * torch.rsqrt(torch.mean(x * x, -1, keepdim=True) + 1e-6) * self.w * self.s",
        "4, 7, 700",
        ["reduce"],
    ),
    "mean_centred": ("pass", "x - x.mean(-1, keepdim=True)", "7, 300", ["reduce"]),
    "sum_normalised": (
        "pass",
        "torch.exp(x) / torch.exp(x).sum(-1, keepdim=True) * 3.0",
        "7, 300",
        ["reduce"],
    ),
    "group_norm_channels": (
        "self.gn = nn.GroupNorm(4, 16)\n"
        "        with torch.no_grad():\n"
        "            self.gn.weight.copy_(torch.randn(16, generator=g))\n"
        "            self.gn.bias.copy_(torch.randn(16, generator=g))",
        "torch.relu(self.gn(x))",
        "3, 16, 9, 10",
        ["moments"],
    ),
    # a group of 4 channels of 50 (rep 4): the group's two scalars read across its 4 rows
    "group_norm_1d": (
        "self.w = nn.Parameter(torch.randn(12, generator=g))",
        "F.group_norm(x, 3, self.w, None, 1e-3) * 2.0",
        "5, 12, 50",
        ["moments"],
    ),
    "instance_norm": ("self.inorm = nn.InstanceNorm2d(6)", "self.inorm(x) - x", "2, 6, 7, 9", ["moments"]),
    "batch_norm_channels": (
        "self.bn = nn.BatchNorm2d(16)\n"
        "        with torch.no_grad():\n"
        "            self.bn.weight.copy_(torch.randn(16, generator=g))",
        "torch.relu(self.bn(x))",
        "3, 16, 9, 10",
        ["moments", "ew"],
    ),
    # fmax and fmin (kf_fmaxf and kf_fminf, selects in place of glibc's calls): the number where
    # one of the two is NaN, as PyTorch's; the NaNs are put in below
    "fmax_fmin_nan": (
        "self.y = nn.Parameter(torch.randn(40, 700, generator=g))",
        "torch.fmin(torch.fmax(x, self.y), x * 0.5 + 1.0)",
        "40, 700",
        ["ew"],
    ),
    "transposed_across_rows": (
        "self.w = nn.Parameter(torch.randn(700, generator=g))",
        "x * self.w + x.transpose(0, 1)",
        "700, 700",
        ["ew"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_norms_and_broadcasts_match_pytorch(tmp_path: Path, name: str, monkeypatch) -> None:
    import torch

    init, body, shape, steps = CASES[name]
    task = tmp_path / f"{name}.py"
    task.write_text(TASK.format(init=init, body=body, shape=shape))
    plan, cand = plan_and_build(task, tmp_path, monkeypatch)
    assert [s["kind"] for s in plan["steps"]] == steps, plan["steps"]
    src = plan["steps"][-1]["variants"][0]
    if len(steps) == 1 and steps[0] != "ew":  # the fused kernel, not the plain statistics
        assert "STAT_MODE" in src
    elif name.endswith("_nan"):
        assert "kf_fmaxf(" in src and "kf_fminf(" in src and "= fmaxf(" not in src
    else:  # the broadcasting pass's chunks
        assert "kf_chunk(" in src
    ref = _load(task, f"norm_task_{name}").Model()
    model = _load(cand / "model_new.py", f"norm_cand_{name}").ModelNew()
    x = torch.randn(*[int(d) for d in shape.split(",")], generator=torch.Generator().manual_seed(7))
    if name.endswith("_nan"):
        x[3, 5:9] = float("nan")
        with torch.no_grad():
            ref.y[3, 7:12] = float("nan")  # both NaN at 7 and 8; one of the two at 5, 6, 9..11
    model.load_state_dict(ref.state_dict(), strict=False)
    with torch.no_grad():
        want, got = ref(x), model(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)
