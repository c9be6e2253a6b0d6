"""The expert's cuda plans on a GPU (make test-gpu): for every task of examples/tasks (or of
KFORGE_EXPERT_TASKS_DIR), the candidate the expert writes (build/agent-probes/expert_probe,
every kernel in variant 0) is judged by the harness's full `evaluate` on the cuda backend, torch.compile baseline included: it
must be correct, with no flag. KFORGE_EXPERT_VARIANTS="0 1 2" judges each task in each of those
variants (a kernel with fewer gets its last), as the expert's tuning tries them; the edges
below too.
KFORGE_EXPERT_VERDICTS=FILE appends each verdict (with its task and variant) to FILE, for the
table of scripts/gpu_expert.sh and bench/README.md. KFORGE_PROBE_LIBS: a folder of shared
libraries the probe needs on a host without them (the bundle's kforge/lib)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# skipped without a CUDA GPU by tests/conftest.py
pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(os.environ.get("KFORGE_BUILD", ROOT / "build")).resolve() / "agent-probes" / "expert_probe"
HARNESS = ROOT / "workers" / "harness"
# KFORGE_EXPERT_TASKS_DIR: another folder of tasks (bench/tasks_extra)
TASK_DIR = Path(os.environ.get("KFORGE_EXPERT_TASKS_DIR", ROOT / "examples" / "tasks")).resolve()
TASKS = sorted(p.stem for p in TASK_DIR.glob("*.py"))
VARIANTS = [int(v) for v in os.environ.get("KFORGE_EXPERT_VARIANTS", "0").split()]


def harness(*args: str, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cuda")
    p = subprocess.run(
        [sys.executable, "-m", "kforge_harness", args[0], "--no-jail", *args[1:]], cwd=str(HARNESS), env=env,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", TASKS)
def test_expert_plan_is_correct_on_the_gpu(tmp_path: Path, name: str, variant: int) -> None:
    judged_plan(TASK_DIR / f"{name}.py", name, tmp_path, variant)


# shapes the tasks do not reach: the one-column products (expert_gemm.c's warp-per-row gemv)
# with an odd k (the scalar loop), a 1-D vector, a linear layer of one output (b transposed),
# a batch; tril and triu with diagonals over a matmul's output and a batch of matrices
# (expert_tri.c); einsums (expert_plan_einsum.c); a Python number among the inputs
EDGES = {
    "one_column_products": (
        "a, v, x, a3, b3",
        "return torch.matmul(a, v)[:, None] + F.linear(x, self.w) + torch.bmm(a3, b3).reshape(300, 1)",
        "self.w = nn.Parameter(torch.randn(1, 256) * 0.1)",
        "[torch.randn(300, 1001), torch.randn(1001), torch.randn(300, 256), torch.randn(3, 100, 64),"
        " torch.randn(3, 64, 1)]",
    ),
    "triangles_einsum_scalar": (
        "a, b, s",
        "return (torch.tril(a @ b, -1) + torch.triu(torch.einsum('ik,jk->ij', a, b.T), 2) * s"
        " + torch.tril(torch.einsum('bij,bjk->bik', a.view(4, 96, 96), b.view(4, 96, 96)), 3)"
        ".reshape(384, 96).sum(1, keepdim=True))",
        "pass",
        "[torch.randn(384, 96), torch.randn(96, 384), 0.5]",
    ),
    # arg-reductions' indices as float (a cast kernel), a comparison made float
    "integer_casts": (
        "x",
        "return torch.argmax(x, 1).float() * 0.5 + torch.argmin(x, 1).to(torch.float32)"
        " + (x > 0).type(torch.float32).sum(1)",
        "pass",
        "[torch.randn(64, 1000, 33)]",
    ),
    # ShuffleNet's channel shuffle: a 5-D transposed view copied (folded to 4 dims by strides)
    "channel_shuffle": (
        "x",
        "return torch.relu(x).view(32, 4, 60, 28, 28).transpose(1, 2).contiguous().view(32, -1, 28, 28) * 2",
        "pass",
        "[torch.randn(32, 240, 28, 28)]",
    ),
    # 0-d tensors made in forward() (a constant fx folds, and a call with the input's device)
    "tensor_constants": (
        "x",
        "return torch.min(torch.relu(x), torch.tensor(0.75)) - torch.tensor(0.5, device=x.device)",
        "pass",
        "[torch.randn(64, 1000, 33)]",
    ),
    # torch.stack: the cat kernel with a length of 1 an input, along a middle and the first dim
    "stack": (
        "x",
        "return torch.stack([x, torch.relu(x), x * 2], dim=1).amax(1) + torch.stack((x, x.abs()), 0)[1]",
        "pass",
        "[torch.randn(300, 1000)]",
    ),
    # tensor bounds of a clamp, fmod and remainder, a global max pool, a dtype that keeps float32
    "misc_spellings": (
        "x, y",
        "return (torch.clamp(x, min=y[0], max=y[1]) + torch.remainder(x, 0.7) + torch.fmod(x, y[2])"
        " + F.adaptive_max_pool1d(x.view(300, 10, 100), 1).view(300, 10).sum(1, keepdim=True)"
        " + F.softmax(x, 1, dtype=torch.float32))",
        "pass",
        "[torch.randn(300, 1000), torch.randn(3, 1000)]",
    ),
    # leaves that broadcast along a run of a reduction's input (kfx_rows_load's kf_load4, each
    # of its three ways: one value per four, a column run whose length is a multiple of 4, four
    # reads) and along long rows of a broadcasting pass (expert_bcast.c's kf_long4 and kf_long)
    "broadcast_leaves": (
        "x, t, b, w, c",
        "return (torch.clamp(1 - x * t, min=0).mean() + (x + b).amax(dim=1, keepdim=True)"
        " + torch.softmax(x - t, dim=1)[:, :1] + (w + c).sum() + torch.logsumexp(x * b, dim=1, keepdim=True))",
        "pass",
        "[torch.randn(300, 1000), torch.randn(300, 1), torch.randn(1000), torch.randn(6, 1000, 10),"
        " torch.randn(1000, 1)]",
    ),
    # depthwise convolutions (expert_conv.c's tiled kernel): a channel multiplier of 2, stride,
    # dilation, a 3 x 5 kernel and padding by side; a 7 x 7 module with its bias and an activation
    "depthwise_strided": (
        "x, w",
        "return F.conv2d(x, w, stride=2, padding=(2, 1), dilation=(2, 1), groups=8)",
        "pass",
        "[torch.randn(3, 8, 37, 45), torch.randn(16, 1, 3, 5)]",
    ),
    "depthwise_module": (
        "x",
        "return torch.relu(self.c(x))",
        "self.c = nn.Conv2d(16, 16, 7, padding=3, groups=16)",
        "[torch.randn(2, 16, 70, 33)]",
    ),
    # nn.RMSNorm (the dtype's epsilon) and F.rms_norm with an eps: a mean of squares each
    "rms_norms": (
        "x",
        "return self.n(x) * 2.0 + F.rms_norm(x, (256,), eps=1e-6)",
        "self.n = nn.RMSNorm(256)",
        "[torch.randn(64, 128, 256)]",
    ),
    # large products on TF32 tensor cores with split operands (expert_gemm_split.c) under the
    # judge's default fp32 tolerance (the examples' matmuls declare a wider one): a plain product
    # with an activation and a linear layer's transposed weight
    "split_products": (
        "a, b",
        "return torch.relu(a @ b) + F.linear(a, self.w)",
        "self.w = nn.Parameter(torch.randn(1536, 4096) * 0.02)",
        "[torch.randn(4096, 4096), torch.randn(4096, 1536)]",
    ),
    # addmm (a matmul and a lazy scaled sum) and outer (a view and a lazy product)
    "addmm_outer": (
        "x, v, u",
        "return torch.addmm(self.b, x, self.w.t(), beta=0.5) + torch.outer(v, u)",
        "self.w = nn.Parameter(torch.randn(512, 256) * 0.05)\n        self.b = nn.Parameter(torch.randn(512))",
        "[torch.randn(1024, 256), torch.randn(1024), torch.randn(512)]",
    ),
    # std_mean and var_mean (a tuple, each item its own reduction), nan_to_num over infinities
    "std_var_mean_nan": (
        "x",
        "s, m = torch.std_mean(x, dim=1, keepdim=True)\n        v, m2 = torch.var_mean(x, dim=1)\n"
        "        return torch.nan_to_num((x - m) / (m > 0) + s + v[:, None] + m2[:, None], posinf=9.0, neginf=-9.0)",
        "pass",
        # rows of mean +-0.5: the sign of each row's mean (which rows divide by zero) does not
        # change with the judge's input scales, as a threshold on the std would
        "[torch.randn(512, 2000) + (torch.arange(512) % 2 * 1.0 - 0.5)[:, None]]",
    ),
    # logcumsumexp (the scan kernel with log-add-exp), forwards and reversed
    "logcumsumexp": (
        "x",
        "return torch.logcumsumexp(x, 1) + x.flip(1).logcumsumexp(1).flip(1)",
        "pass",
        "[torch.randn(256, 4000)]",
    ),
    # BCE with logits, BCE, soft margin and margin ranking losses (pointwise, then a mean)
    "bce_margin": (
        "x, y, z",
        "t = torch.sigmoid(y)\n        s = torch.sign(z)\n"
        "        return (F.binary_cross_entropy_with_logits(x, t) + F.binary_cross_entropy(torch.sigmoid(x), t)"
        " + F.soft_margin_loss(x, s) + F.margin_ranking_loss(x, y, s, margin=0.3))",
        "pass",
        "[torch.randn(512, 2000) * 3, torch.randn(512, 2000), torch.randn(512, 2000)]",
    ),
    # nll_loss of a log_softmax: the cross entropy of its logits
    "nll_of_log_softmax": (
        "x, t",
        "return F.nll_loss(F.log_softmax(x, dim=1), t) + F.nll_loss(torch.log_softmax(x, -1), t, reduction='sum')",
        "pass",
        "[torch.randn(4096, 1000), torch.randint(0, 1000, (4096,))]",
    ),
    # roll: a gather (a circular rule a dim), along one dim, two dims, the flattened tensor
    "roll": (
        "x",
        "return torch.roll(x, 7, 1) + torch.roll(x, shifts=(-3, 5), dims=(0, 1)) + torch.roll(x, 1000)",
        "pass",
        "[torch.randn(512, 1000)]",
    ),
    # gathers that read the chain before them as their prologue (a U-Net decoder's upsample of
    # a ReLU of a sum, a pixel shuffle of a tanh, a roll of an upsample)
    "gather_chains": (
        "x, y, z",
        "return (F.interpolate(torch.relu(x * 1.5 + y), scale_factor=2, mode='bilinear')"
        " + F.pixel_shuffle(torch.tanh(z), 2) + torch.roll(F.interpolate(x, scale_factor=2), 5, 3))",
        "pass",
        "[torch.randn(16, 64, 64, 64), torch.randn(16, 64, 64, 64), torch.randn(16, 256, 64, 64)]",
    ),
    # diagonal (an as_strided view) and trace (the sum of one)
    "diagonal_trace": (
        "x",
        "return torch.diagonal(x) * 2.0 + torch.trace(x) + x.diagonal(-3).sum()",
        "pass",
        "[torch.randn(2048, 2048)]",
    ),
    # gathers (expert_gather.c): the four padding modes, upsampling, pixel shuffle and flips,
    # adaptive pools to 6 x 6 (AlexNet's), at realistic sizes
    "pad_modes": (
        "x",
        "return (F.pad(x, (2, 2, 2, 2), mode='reflect') + F.pad(x, (1, 3, 0, 4), mode='replicate')"
        " + F.pad(x, (3, 1, 2, 2), mode='circular') + F.pad(x, (0, 4, 4, 0), value=0.5))",
        "pass",
        "[torch.randn(16, 64, 128, 128)]",
    ),
    "upsample": (
        "x",
        "return (F.interpolate(x, scale_factor=2, mode='nearest')"
        " + F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)"
        " + F.interpolate(x, size=(128, 128), mode='bilinear', align_corners=True))",
        "pass",
        "[torch.randn(16, 64, 64, 64)]",
    ),
    "pixel_shuffle_flip": (
        "x",
        "return F.pixel_shuffle(x, 2) + torch.flip(F.pixel_unshuffle(x.view(16, 64, 128, 128), 2), [1])"
        ".view(16, 64, 128, 128)",
        "pass",
        "[torch.randn(16, 256, 64, 64)]",
    ),
    "adaptive_pools": (
        "x",
        "return F.adaptive_avg_pool2d(x, (6, 6)) + F.adaptive_max_pool2d(x, (6, 6))",
        "pass",
        "[torch.randn(128, 256, 13, 13)]",
    ),
    # a 6-D permute copied by a gather (Swin's window partition, windows of 7), repeats
    "window_partition_repeat": (
        "x",
        "w = x.view(32, 96, 8, 7, 8, 7).permute(0, 2, 4, 3, 5, 1).contiguous().view(-1, 49, 96)\n"
        "        return (w * 2.0 + x.view(32, 96, 3136)[:, :, :49].transpose(1, 2).repeat(64, 1, 1)"
        " + x.mean(dim=(2, 3)).repeat_interleave(49, dim=1).view(32, 49, 96).repeat(64, 1, 1))",
        "pass",
        "[torch.randn(32, 96, 56, 56)]",
    ),
    # F.scaled_dot_product_attention: scores, softmax and product (causal: a tril mask)
    "sdpa": (
        "q, k, v",
        "return F.scaled_dot_product_attention(q, k, v) + F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "pass",
        "[torch.randn(16, 16, 1024, 64), torch.randn(16, 16, 1024, 64), torch.randn(16, 16, 1024, 64)]",
    ),
    # nn.MultiheadAttention as self-attention (ViT-B's sizes), with the layer norm after it
    "multihead_attention": (
        "x",
        "a, _ = self.attn(x, x, x)\n        return self.norm(a + x)",
        "self.attn = nn.MultiheadAttention(768, 12)\n        self.norm = nn.LayerNorm(768)",
        "[torch.randn(197, 32, 768)]",
    ),
    # a decoder's cross-attention to an encoder's memory (key and value one tensor), batch first
    "multihead_cross": (
        "x, m",
        "a, _ = self.attn(x, m, m)\n        return self.norm(a + x)",
        "self.attn = nn.MultiheadAttention(512, 8, batch_first=True)\n        self.norm = nn.LayerNorm(512)",
        "[torch.randn(32, 128, 512), torch.randn(32, 256, 512)]",
    ),
    # token and position embeddings at GPT-2's sizes: int64 inputs read as indices
    "embedding": (
        "ids, pos",
        "return self.tok(ids) + self.pos(pos)",
        "self.tok = nn.Embedding(50257, 768)\n        self.pos = nn.Embedding(512, 768)",
        "[torch.randint(0, 50257, (32, 512)), torch.arange(512).repeat(32, 1)]",
    ),
    # torch.gather of a policy's log-probabilities at the actions taken (an int64 input)
    "gather_actions": (
        "x, a",
        "return torch.log_softmax(x, dim=1).gather(1, a.unsqueeze(1)).squeeze(1)",
        "pass",
        "[torch.randn(65536, 1000), torch.randint(0, 1000, (65536,))]",
    ),
    # KernelBench's LSTM (level 3, 36_LTSMHn): initial states drawn in __init__ and moved in
    # forward(), c0 made h0 there; h_n returned
    "lstm_kernelbench": (
        "x",
        "self.h0 = self.h0.to(x.device)\n        self.c0 = self.h0.to(x.device)\n"
        "        out, state = self.lstm(x, (self.h0, self.c0))\n        out = self.fc(out[:, -1, :])\n"
        "        return state[0]",
        "self.h0 = torch.randn((6, 10, 256))\n        self.c0 = torch.randn((6, 10, 256))\n"
        "        self.lstm = nn.LSTM(128, 256, 6, batch_first=True)\n        self.fc = nn.Linear(256, 10)",
        "[torch.randn(10, 512, 128)]",
    ),
    # KernelBench's bidirectional GRU (level 3, 41_GRUBidirectional): sequence first, output returned
    "gru_bidirectional": (
        "x",
        "self.h0 = self.h0.to(x.device)\n        output, h_n = self.gru(x, self.h0)\n        return output",
        "self.h0 = torch.randn((12, 10, 256))\n        self.gru = nn.GRU(128, 256, 6, bidirectional=True)",
        "[torch.randn(512, 10, 128)]",
    ),
    # KernelBench's VisionTransformer (level 3, 28): patches by Tensor.unfold, an
    # nn.TransformerEncoder of 6 post-norm layers (traced as their computation), an MLP head
    "vit_kernelbench": (
        "img",
        "x = img.unfold(2, 16, 16).unfold(3, 16, 16).reshape(img.shape[0], -1, 768)\n"
        "        x = self.embed(x)\n        x = torch.cat((self.cls.expand(img.shape[0], -1, -1), x), dim=1)\n"
        "        x += self.pos\n        x = self.transformer(x)\n        return self.head(x[:, 0])",
        "self.pos = nn.Parameter(torch.randn(1, 197, 512))\n        self.embed = nn.Linear(768, 512)\n"
        "        self.cls = nn.Parameter(torch.randn(1, 1, 512))\n"
        "        self.transformer = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048, 0.0), 6)\n"
        "        self.head = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 10))",
        "[torch.randn(2, 3, 224, 224)]",
    ),
    "long_broadcast_rows4": (
        "z, y",
        "return (z + y) * 2",
        "pass",
        "[torch.randn(4, 8, 10004), torch.randn(8, 1)]",
    ),
    "long_broadcast_rows": (
        "u, y",
        "return torch.relu(u - y)",
        "pass",
        "[torch.randn(4, 8, 9990), torch.randn(8, 1)]",
    ),
}
EDGE_TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, {args}):
        {body}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", list(EDGES))
def test_expert_edges_are_correct_on_the_gpu(tmp_path: Path, name: str, variant: int) -> None:
    args, body, init, inputs = EDGES[name]
    task = tmp_path / f"{name}.py"
    task.write_text(EDGE_TASK.format(args=args, body=body, init=init, inputs=inputs))
    judged_plan(task, name, tmp_path, variant)


def judged_plan(task: Path, name: str, tmp_path: Path, variant: int) -> None:
    graph = tmp_path / "graph.json"
    info = harness("inspect", "--task", str(task), "--backend", "cuda", timeout=300)
    graph.write_text(json.dumps(info))
    env = dict(os.environ)
    if os.environ.get("KFORGE_PROBE_LIBS"):
        env["LD_LIBRARY_PATH"] = os.environ["KFORGE_PROBE_LIBS"]
    cand = tmp_path / "cand"
    p = subprocess.run(
        [str(PROBE), "cuda", str(graph), str(cand), str(variant)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["ok"], plan["detail"]
    budget = os.environ.get("KFORGE_EXPERT_BUDGET", "0.6")
    v = harness("evaluate", "--task", str(task), "--candidate", str(cand), "--backend", "cuda", "--budget", budget,
                timeout=800)  # fmt: skip
    if os.environ.get("KFORGE_EXPERT_VERDICTS"):
        with open(os.environ["KFORGE_EXPERT_VERDICTS"], "a", encoding="utf-8") as f:
            kinds = [s["kind"] for s in plan["steps"]]
            rec = {"task": name, "variant": variant, "kernels": kinds, "verdict": v, "graph": info}
            f.write(json.dumps(rec) + "\n")
    assert v["status"] == "ok" and v["correct"], (v["status"], v.get("message"), v.get("checks"))
    assert v["flags"] == [] and v["reward"] >= 1, v
