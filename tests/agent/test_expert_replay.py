"""The expert's model_new.py across calls (expert_model.c, expert_replay.c), on the cpu backend
with its kernels built by the harness, each script in a fresh interpreter: a repeated call
allocates only its output and, once its second call is recorded, replays the kernels' calls;
replayed calls match the full forward, keep earlier outputs intact, and follow new weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_expert_codegen import HARNESS, generate, graph_of, task_file

# The start of every script below: the candidate's library built, the task's Model and the
# generated ModelNew made with the same weights.
MODELS = r"""
import importlib.util, json, os, sys
import torch
from kforge_harness import build, candidate, guard

cand_dir, task_path = sys.argv[1], sys.argv[2]
os.environ["KFORGE_KERNEL_LIB"] = build.build_native(candidate.detect(cand_dir, "cpu"), "cpu").lib


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


task = load("task", task_path)
torch.manual_seed(0)
ref = task.Model(*task.get_init_inputs())
new = load("model_new", os.path.join(cand_dir, "model_new.py")).ModelNew(*task.get_init_inputs())
new.load_state_dict(ref.state_dict())
"""


def report(script: str, cand: Path, task: Path, tmp_path: Path) -> dict:
    """The JSON report script (after MODELS) prints last for the candidate cand of task."""
    env = dict(
        os.environ, PYTHONPATH=str(HARNESS), KFORGE_BACKEND="cpu", KFORGE_CACHE=str(tmp_path / "cache")
    )
    p = subprocess.run([sys.executable, "-c", MODELS + script, str(cand), str(task)], cwd=str(HARNESS), env=env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# test_a_call_allocates_only_its_output: four calls under the runner's guard (the second
# recorded, the others replayed), then new weights copied in and assigned.
CALLS = r"""
class Ops(guard.ComputeGuard):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return super().__torch_dispatch__(func, types, args, kwargs)


report = {"ops": [], "errors": [], "outputs": [], "ways": []}
alive = []
for call in range(4):
    inputs = task.get_inputs()
    with torch.no_grad():
        want = ref(*inputs)
    g = Ops()
    with g:
        got = new(*inputs)
    report["ops"].append(g.names)
    report["violations"] = g.violations
    report["errors"].append(float((got - want).abs().max()))
    report["outputs"].append(got.data_ptr())
    alive.append(got)  # every output held: a new one cannot reuse an earlier one's memory
    report["ways"].append(sorted(type(v).__name__ for v in new._kf_replays.values()))
    report["keep"] = len(new._kf_keep)
    report["kept"] = sorted(str(k) for k in new._kf_keep)
    if call == 0:
        first = got  # kept alive: a later call must not write into it
        first_want = want
report["first_intact"] = float((first - first_want).abs().max())

# new weights, copied into the module's tensors (load_state_dict) and then put in their place
# (assign=True): the kept views must follow both
report["reloaded"] = []
for assign in (False, True):
    with torch.no_grad():
        for t in ref.parameters():
            t.add_(0.25 * torch.randn_like(t))
    new.load_state_dict({k: v.clone() for k, v in ref.state_dict().items()}, assign=assign)
    for call in range(3):  # recorded again, then replayed
        inputs = task.get_inputs()
        with torch.no_grad():
            want = ref(*inputs)
        report["reloaded"].append(float((new(*inputs) - want).abs().max()))
print(json.dumps(report))
"""


# kept: conv_bn_relu's conv output, batch mean and rstd, and the (C, 1, 1) views of the conv bias
# (read by the statistics' prologue and the pass: no bias-added copy) and the norm's weight and
# bias; linear_gelu's matmul output; gelu nothing;
# scaled_softmax's matmul output and its 0-d scale
@pytest.mark.parametrize(
    "name,kept", [("conv_bn_relu", 6), ("linear_gelu", 1), ("gelu", 0), ("scaled_softmax", 2)]
)
def test_a_call_allocates_only_its_output(tmp_path: Path, name: str, kept: int) -> None:
    """The judge times a candidate from its call, under the runner's guard, where an allocation
    or a view is an ATen call through Python (expert_model.c): the intermediates' buffers and
    the parameters' views are kept on the module, so a repeated call allocates only the tensor
    it returns (and, once recorded, replays the kernels' calls with nothing else); that tensor
    is new at every call, the kept buffers, reused, still give the reference's result for new
    inputs, and the kept views follow new weights, copied in or assigned."""
    task = task_file(name, tmp_path)
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand))
    assert g["ok"], g["detail"]
    r = report(CALLS, cand, task, tmp_path)
    assert r["violations"] == []
    assert all(e < 1e-3 for e in r["errors"]), r["errors"]
    assert r["first_intact"] < 1e-3, "a later call wrote into an earlier call's output"
    assert all(e < 1e-3 for e in r["reloaded"]), ("new weights not followed", r["reloaded"])
    assert len(set(r["outputs"])) == 4, "the returned tensor is not new at every call"
    assert r["keep"] == kept, r["kept"]
    allocations = {"empty", "new_empty", "empty_like", "empty_strided"}
    # the first call makes what is kept; the second, recorded, allocates its output and the
    # template the replays make it from (one element, expanded)
    rec = r["ops"][1]
    assert sum(op in allocations for op in rec) == 2 and rec.count("expand") == 1 and "view" not in rec, rec
    # the second call is recorded and the later ones replay it: one allocation (empty_like of a
    # kept template, cheaper than new_empty or torch.empty), nothing else
    assert r["ways"] == [["int"], ["_Replay"], ["_Replay"], ["_Replay"]], r["ways"]
    assert r["ops"][2] == r["ops"][3] == ["empty_like"], r["ops"][2:]


REPLAYED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 24)

    def forward(self, x, y):
        h = torch.relu(self.lin(x) + y)
        return h[:, :8], x, h.sum(1), torch.softmax(x[1:], dim=-1)


def get_inputs():
    return [torch.randn(16, 32), torch.randn(16, 24)]


def get_init_inputs():
    return []
"""

# test_replayed_calls_match_the_full_forward: two signatures of inputs that alternate, then
# the module moved.
REPLAYS = r"""
report = {"errors": [], "ways": []}
outs = []
for rows in (16, 16, 16, 24, 24, 16, 24, 24, 16):
    x, y = torch.randn(rows, 32), torch.randn(rows, 24)
    with torch.no_grad():
        want, got = ref(x, y), new(x, y)
    report["errors"].append(max(float((a - b).abs().max()) for a, b in zip(want, got)))
    report["ways"].append(sorted(type(v).__name__ for v in new._kf_replays.values()))
    outs.append((got, want))
# every call's outputs new: an earlier call's still hold its values
report["intact"] = max(max(float((a - b).abs().max()) for a, b in zip(g, w)) for g, w in outs)
# a module moved (here to the same device) records again
new.to("cpu")
report["after_move"] = sorted(type(v).__name__ for v in new._kf_replays.values())
print(json.dumps(report))
"""


def test_replayed_calls_match_the_full_forward(tmp_path: Path) -> None:
    """model_new.py's forward is recorded at its second call for a signature of inputs and
    replayed after (expert_replay.c): two signatures that alternate (each making the kept buffers
    of its shape again), outputs that are a view of a new tensor, the input (a copy of it) and a
    softmax of a slice of an input all match the reference at every call; each call's outputs are new (an
    earlier call's keep their values); moving the module forgets the records."""
    task = tmp_path / "replayed.py"
    task.write_text(REPLAYED)
    cand = tmp_path / "cand"
    g = generate("cpu", graph_of(task, tmp_path, "cpu"), str(cand))
    assert g["ok"], g["detail"]
    r = report(REPLAYS, cand, task, tmp_path)
    assert all(e < 1e-4 for e in r["errors"]), r["errors"]
    assert r["intact"] < 1e-4, "a later call wrote into an earlier call's output"
    # 16: seen, recorded, replayed; 24: seen, recorded; then both replay
    assert r["ways"][2] == ["_Replay"] and r["ways"][-1] == ["_Replay", "_Replay"], r["ways"]
    assert r["after_move"] == [], r["after_move"]
